package rdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// The immutable part of a task message (what the caller gave at Enqueue) is
// stored in the task hash's field "m" as one compact binary value (or as
// the whole value of the task's key while the task has no other field:
// the string form of lua/lib.lua's task_get), so that
// Enqueue writes and Fetch reads one field instead of nine. The fields that
// change over the task's life (state, retries, last error, lease) have
// their own hash fields, which the scripts read and write.
//
// Layout: version byte (1, or 2 when the extension byte follows), flags
// byte, then
//
//	[version 2]     extension flags byte (not zero)
//	uvarint len + Type
//	[flagPayload]   uvarint len + Payload
//	uvarint MaxRetry
//	[flagTimeout]   varint Timeout (ns)
//	[flagDeadline]  varint Unix seconds, uvarint nanoseconds
//	[flagUnique]    uvarint len + UniqueKey, varint UniqueTTL (ns)
//	[flagRetention] varint Retention (ns)
//	[flagGroup]     uvarint len + GroupKey
//	[flagLane]      uvarint Priority, uvarint len + Key (not both zero)
//	[extWorkflow]   uvarint len + Workflow, uvarint len + WorkflowTask
//	[flagHeaders]   uvarint count (at least 1), then count times
//	                uvarint len + name, uvarint len + value, names in
//	                increasing byte order; then the length of all that
//	                as two bytes, big-endian
//
// Propagated headers are not part of a task's identity (see
// base.TaskMessage.SameEnqueue): the scripts compare messages without
// them, finding where they start from the flag and the last two bytes
// (lib.lua's content).
//
// A flag added later took a free bit and put its field where its bit's
// order says; a message without it costs no byte and old messages decode
// unchanged (flagHeaders took the top bit so that the bits below stayed
// free for fields of the task itself). flagLane took the last free bit, so
// the fields added after it are announced by the bits of an extension
// flags byte, which follows the flags byte in messages of version 2; a
// message without such a field is written as version 1, byte for byte as
// before. The extension byte is where lib.lua's content keeps it: the
// flags byte stays second.
const (
	codecVersion    = 1
	codecVersionExt = 2 // version 1 with an extension flags byte
)

// The extension flags (version 2).
const (
	extWorkflow = 1 << iota // Workflow is set (WorkflowTask with it)

	extKnown = extWorkflow
)

const (
	flagPayload = 1 << iota // Payload is not nil (it may be empty)
	flagTimeout
	flagDeadline
	flagUnique
	flagRetention
	flagGroup
	flagLane // Priority or Key is set

	// flagHeaders marks propagated headers (base.TaskMessage.Headers).
	flagHeaders = 1 << 7

	// flagsKnown is every flag this version writes; a message with another
	// bit set was written by something else and is refused.
	flagsKnown = flagPayload | flagTimeout | flagDeadline | flagUnique | flagRetention | flagGroup | flagLane | flagHeaders
)

var errCorrupt = errors.New("rdb: corrupt task message")

// encodeMessage appends the encoding of m's immutable fields to dst.
func encodeMessage(dst []byte, m *base.TaskMessage) []byte {
	var flags byte
	if m.Payload != nil {
		flags |= flagPayload
	}
	if m.Timeout != 0 {
		flags |= flagTimeout
	}
	if !m.Deadline.IsZero() {
		flags |= flagDeadline
	}
	if m.UniqueKey != "" {
		flags |= flagUnique
	}
	if m.Retention != 0 {
		flags |= flagRetention
	}
	if m.GroupKey != "" {
		flags |= flagGroup
	}
	if m.Priority != 0 || m.Key != "" {
		flags |= flagLane
	}
	if len(m.Headers) > 0 {
		flags |= flagHeaders
	}
	var ext byte
	if m.Workflow != "" {
		ext |= extWorkflow
	}
	if ext != 0 {
		dst = append(dst, codecVersionExt, flags, ext)
	} else {
		dst = append(dst, codecVersion, flags)
	}
	dst = appendString(dst, m.Type)
	if flags&flagPayload != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(m.Payload)))
		dst = append(dst, m.Payload...)
	}
	dst = binary.AppendUvarint(dst, uint64(m.MaxRetry))
	if flags&flagTimeout != 0 {
		dst = binary.AppendVarint(dst, int64(m.Timeout))
	}
	if flags&flagDeadline != 0 {
		dst = binary.AppendVarint(dst, m.Deadline.Unix())
		dst = binary.AppendUvarint(dst, uint64(m.Deadline.Nanosecond()))
	}
	if flags&flagUnique != 0 {
		dst = appendString(dst, m.UniqueKey)
		dst = binary.AppendVarint(dst, int64(m.UniqueTTL))
	}
	if flags&flagRetention != 0 {
		dst = binary.AppendVarint(dst, int64(m.Retention))
	}
	if flags&flagGroup != 0 {
		dst = appendString(dst, m.GroupKey)
	}
	if flags&flagLane != 0 {
		dst = binary.AppendUvarint(dst, uint64(m.Priority))
		dst = appendString(dst, m.Key)
	}
	if ext&extWorkflow != 0 {
		dst = appendString(dst, m.Workflow)
		dst = appendString(dst, m.WorkflowTask)
	}
	if flags&flagHeaders != 0 {
		dst = appendHeaders(dst, m.Headers)
	}
	return dst
}

// maxHeadersSection is the longest headers section the two-byte length
// can give; base.MaxHeadersSize keeps every valid message well below.
const maxHeadersSection = 1<<16 - 1

// appendHeaders appends the count of h, its entries in name order and
// the length of both.
func appendHeaders(dst []byte, h map[string]string) []byte {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	start := len(dst)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, k := range names {
		dst = appendString(dst, k)
		dst = appendString(dst, h[k])
	}
	return binary.BigEndian.AppendUint16(dst, uint16(min(len(dst)-start, maxHeadersSection)))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// decodeMessage fills the immutable fields of m from blob (as
// encodeMessage wrote it). It never panics on bad input, and it accepts
// only what encodeMessage writes: encoding the message it fills gives
// blob back byte for byte. So it refuses unknown flag bits, a flag whose
// field holds the value the encoder leaves out (an empty unique or group
// key, a zero timeout, retention or deadline, neither priority nor key,
// an empty workflow), an extension byte that is zero or has unknown bits,
// a priority above base.MaxPriority, varints that are not in
// their shortest form, a deadline's nanoseconds of a second or more, and a
// count that does not fit an int.
func decodeMessage(blob string, m *base.TaskMessage) error {
	d := decoder{s: blob}
	if len(blob) < 2 || blob[0] != codecVersion && blob[0] != codecVersionExt || blob[1]&^flagsKnown != 0 {
		return errCorrupt
	}
	flags := blob[1]
	d.i = 2
	var ext byte
	if blob[0] == codecVersionExt {
		if len(blob) < 3 || blob[2] == 0 || blob[2]&^extKnown != 0 {
			return errCorrupt
		}
		ext = blob[2]
		d.i = 3
	}
	m.Type = d.str()
	if flags&flagPayload != 0 {
		m.Payload = []byte(d.str())
	}
	if n := d.uvarint(); n <= math.MaxInt {
		m.MaxRetry = int(n)
	} else {
		d.bad = true
	}
	if flags&flagTimeout != 0 {
		m.Timeout = time.Duration(d.varint())
		d.bad = d.bad || m.Timeout == 0
	}
	if flags&flagDeadline != 0 {
		sec := d.varint()
		nsec := d.uvarint()
		m.Deadline = time.Unix(sec, int64(nsec))
		// A deadline that is the zero time, or that time.Unix cannot hold
		// as given, would not encode back to these bytes.
		d.bad = d.bad || nsec >= 1e9 || m.Deadline.IsZero() || m.Deadline.Unix() != sec
	}
	if flags&flagUnique != 0 {
		m.UniqueKey = d.str()
		m.UniqueTTL = time.Duration(d.varint())
		d.bad = d.bad || m.UniqueKey == ""
	}
	if flags&flagRetention != 0 {
		m.Retention = time.Duration(d.varint())
		d.bad = d.bad || m.Retention == 0
	}
	if flags&flagGroup != 0 {
		m.GroupKey = d.str()
		d.bad = d.bad || m.GroupKey == ""
	}
	if flags&flagLane != 0 {
		if p := d.uvarint(); p <= base.MaxPriority {
			m.Priority = int(p)
		} else {
			d.bad = true
		}
		m.Key = d.str()
		d.bad = d.bad || m.Priority == 0 && m.Key == ""
	}
	if ext&extWorkflow != 0 {
		m.Workflow = d.str()
		m.WorkflowTask = d.str()
		d.bad = d.bad || m.Workflow == ""
	}
	if flags&flagHeaders != 0 {
		m.Headers = d.headers()
	}
	if d.bad || d.i != len(blob) {
		return errCorrupt
	}
	if len(blob) > 512 {
		// The strings above point into blob; copy them so that a kept
		// message does not keep a large payload's reply alive twice.
		m.Type = strings.Clone(m.Type)
		m.UniqueKey = strings.Clone(m.UniqueKey)
		m.GroupKey = strings.Clone(m.GroupKey)
		m.Key = strings.Clone(m.Key)
		m.Workflow = strings.Clone(m.Workflow)
		m.WorkflowTask = strings.Clone(m.WorkflowTask)
	}
	return nil
}

type decoder struct {
	s   string
	i   int
	bad bool
}

// uvarint reads an unsigned varint in its shortest form (as
// binary.AppendUvarint writes it); anything else marks the decoder bad.
func (d *decoder) uvarint() uint64 {
	var x uint64
	var shift uint
	for n := 0; n < binary.MaxVarintLen64; n++ {
		if d.i >= len(d.s) {
			d.bad = true
			return 0
		}
		b := d.s[d.i]
		d.i++
		if b < 0x80 {
			if n > 0 && b == 0 || n == binary.MaxVarintLen64-1 && b > 1 {
				// A trailing zero byte (not the shortest form) or a
				// value over 64 bits.
				d.bad = true
				return 0
			}
			return x | uint64(b)<<shift
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	d.bad = true
	return 0
}

func (d *decoder) varint() int64 {
	ux := d.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// headers reads what appendHeaders wrote: a count of at least one, no
// more entries than the rest of the blob can hold, names strictly
// increasing, and their length. The strings are copied out of the blob.
func (d *decoder) headers() map[string]string {
	start := d.i
	n := d.uvarint()
	// Each entry takes at least two bytes (two empty strings).
	if d.bad || n == 0 || n > uint64(len(d.s)-d.i)/2 {
		d.bad = true
		return nil
	}
	h := make(map[string]string, int(n))
	prev := ""
	for i := uint64(0); i < n && !d.bad; i++ {
		k, v := d.str(), d.str()
		if i > 0 && k <= prev {
			d.bad = true
		}
		h[strings.Clone(k)] = strings.Clone(v)
		prev = k
	}
	if d.bad || len(d.s)-d.i < 2 || int(d.s[d.i])<<8|int(d.s[d.i+1]) != d.i-start {
		d.bad = true
		return nil
	}
	d.i += 2
	return h
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.s)-d.i) {
		d.bad = true
		return ""
	}
	s := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return s
}

// corruptError describes a task whose stored message cannot be decoded.
func corruptError(q, id string) error {
	return fmt.Errorf("rdb: task %s/%s: %w", q, id, errCorrupt)
}
