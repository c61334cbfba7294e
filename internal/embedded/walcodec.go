package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A log record's payload is one batch: a sequence of entries, each a tag
// byte and its fields. Lengths and numbers are uvarints; a value is
// written as its length + 1, 0 standing for nil (a delete).
const (
	walTask   byte = 1 // seq, value
	walQueue  byte = 2 // key, value
	walClaim  byte = 3 // key, value
	walKV     byte = 4 // key, value
	walWF     byte = 5 // key, value
	walWFSpec byte = 6 // key, value
	walStat   byte = 7 // queue, kind byte, day, n
	walDrop   byte = 8 // queue
)

// errBadBatch marks a log record whose payload does not decode.
var errBadBatch = errors.New("bad batch encoding")

// appendBatch appends the encoding of b to dst.
func appendBatch(dst []byte, b *batch) []byte {
	for seq, v := range b.tasks {
		dst = append(dst, walTask)
		dst = binary.AppendUvarint(dst, seq)
		dst = appendValue(dst, v)
	}
	for _, m := range []struct {
		tag byte
		kv  map[string][]byte
	}{{walQueue, b.queues}, {walClaim, b.claims}, {walKV, b.kv}, {walWF, b.wf}, {walWFSpec, b.wfSpecs}} {
		for k, v := range m.kv {
			dst = append(dst, m.tag)
			dst = appendString(dst, k)
			dst = appendValue(dst, v)
		}
	}
	for q := range b.dropStats {
		dst = append(dst, walDrop)
		dst = appendString(dst, q)
	}
	for k, n := range b.stats {
		dst = append(dst, walStat)
		dst = appendString(dst, k.queue)
		dst = append(dst, k.kind)
		dst = binary.AppendUvarint(dst, k.day)
		dst = binary.AppendUvarint(dst, n)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendValue(dst, v []byte) []byte {
	if v == nil {
		return append(dst, 0)
	}
	dst = binary.AppendUvarint(dst, uint64(len(v))+1)
	return append(dst, v...)
}

// decodeBatch decodes a payload written by appendBatch into a new batch
// (with no ticket). The values are copies: p may be reused.
func decodeBatch(p []byte) (*batch, error) {
	b := emptyBatch(0)
	d := walDecoder{p: p}
	for len(d.p) > 0 && d.err == nil {
		tag := d.p[0]
		d.p = d.p[1:]
		switch tag {
		case walTask:
			seq := d.uvarint()
			b.tasks[seq] = d.value()
		case walQueue, walClaim, walKV, walWF, walWFSpec:
			k := d.str()
			v := d.value()
			b.stringMap(tag)[k] = v
		case walDrop:
			b.dropStats[d.str()] = true
		case walStat:
			q := d.str()
			var kind byte
			if len(d.p) == 0 {
				d.err = errBadBatch
				break
			}
			kind, d.p = d.p[0], d.p[1:]
			day := d.uvarint()
			b.stats[statKey{q, kind, day}] += d.uvarint()
		default:
			return nil, fmt.Errorf("%w: entry tag %d", errBadBatch, tag)
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return b, nil
}

type walDecoder struct {
	p   []byte
	err error
}

func (d *walDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.err = fmt.Errorf("%w: truncated number", errBadBatch)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *walDecoder) bytes(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.err = fmt.Errorf("%w: truncated value", errBadBatch)
		return nil
	}
	v := append([]byte{}, d.p[:n]...)
	d.p = d.p[n:]
	return v
}

func (d *walDecoder) str() string { return string(d.bytes(d.uvarint())) }

func (d *walDecoder) value() []byte {
	n := d.uvarint()
	if n == 0 || d.err != nil {
		return nil
	}
	return d.bytes(n - 1)
}

// stringMap returns the map of b that entries tagged tag go to.
func (b *batch) stringMap(tag byte) map[string][]byte {
	switch tag {
	case walQueue:
		return b.queues
	case walClaim:
		return b.claims
	case walKV:
		return b.kv
	case walWF:
		return b.wf
	}
	return b.wfSpecs
}
