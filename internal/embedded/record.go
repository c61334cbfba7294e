package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// recordVersion is the first byte of every task record. A reader refuses a
// version it does not know instead of guessing.
const recordVersion = 1

// encodeTask writes the persistent fields of t as one record:
// the version byte, then every field in a fixed order as uvarints, varints,
// length-prefixed strings and times (see putTime), then the optional
// fields that are set, each led by its tag, in increasing tag order. A
// task without optional fields is stored as it was before they existed,
// and a field added later takes the next tag.
//
//	tagHeaders  propagated headers (TaskMessage.Headers): uvarint count
//	            (at least 1), then each name and value as strings, names
//	            in increasing byte order
//	tagPriority TaskMessage.Priority (1 to base.MaxPriority) as a uvarint
//	tagKey      TaskMessage.Key (not empty) as a string
//	tagWorkflow a workflow task's workflow ID (not empty) and its ID in
//	            the workflow, as strings
func encodeTask(t *task) []byte {
	return appendTask(make([]byte, 0, recordSize(t)), t)
}

// recordSize is about how many bytes encodeTask writes for t: the fields'
// contents and room for their lengths and numbers.
func recordSize(t *task) int {
	m := t.msg
	return 184 + len(m.ID) + len(m.Type) + len(m.Payload) + len(m.Queue) + len(m.UniqueKey) +
		len(m.GroupKey) + len(m.LastErr) + len(t.token) + len(t.result) + len(m.Key)
}

// appendTask appends the record of t (see encodeTask) to dst.
func appendTask(dst []byte, t *task) []byte {
	m := t.msg
	e := encoder{b: dst}
	e.b = append(e.b, recordVersion)
	e.uvarint(uint64(t.state))
	e.str(m.Queue)
	e.str(m.ID)
	e.str(m.Type)
	e.bytes(m.Payload)
	e.varint(int64(m.MaxRetry))
	e.varint(int64(m.Retried))
	e.varint(int64(m.Timeout))
	e.time(m.Deadline)
	e.str(m.UniqueKey)
	e.varint(int64(m.UniqueTTL))
	e.varint(int64(m.Retention))
	e.str(m.GroupKey)
	e.str(m.LastErr)
	e.time(m.LastFailedAt)
	e.varint(t.order)
	e.time(t.at)
	e.str(t.token)
	e.time(t.completedAt)
	e.bytes(t.result)
	e.time(t.uniqueUntil)
	if len(m.Headers) > 0 {
		e.uvarint(tagHeaders)
		e.headers(m.Headers)
	}
	if m.Priority != 0 {
		e.uvarint(tagPriority)
		e.uvarint(uint64(m.Priority))
	}
	if m.Key != "" {
		e.uvarint(tagKey)
		e.str(m.Key)
	}
	if m.Workflow != "" {
		e.uvarint(tagWorkflow)
		e.str(m.Workflow)
		e.str(m.WorkflowTask)
	}
	return e.b
}

// Tags of the optional fields of a record.
const (
	tagHeaders  = 1
	tagPriority = 2
	tagKey      = 3
	tagWorkflow = 4
)

// errBadRecord marks a record that cannot be decoded.
var errBadRecord = errors.New("bad task record")

// decodeTask reads a record written by encodeTask, and only such a
// record: encodeTask gives the bytes it accepts back unchanged. The result shares no
// memory with b (bbolt's memory is only valid inside its transaction).
// intern, when not nil, returns a shared copy of a queue name or task type,
// which repeat across records.
func decodeTask(seq uint64, b []byte, intern func([]byte) string) (*task, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w %d: empty", errBadRecord, seq)
	}
	if b[0] != recordVersion {
		return nil, fmt.Errorf("%w %d: version %d, this htq reads version %d", errBadRecord, seq, b[0], recordVersion)
	}
	d := decoder{b: b[1:]}
	t := &task{seq: seq}
	t.msg = &t.m
	m := t.msg
	t.state = base.TaskState(d.uvarint())
	if intern != nil {
		m.Queue = intern(d.strBytes())
		m.ID = d.str()
		m.Type = intern(d.strBytes())
	} else {
		m.Queue = d.str()
		m.ID = d.str()
		m.Type = d.str()
	}
	m.Payload = d.bytes()
	m.MaxRetry = d.int()
	m.Retried = d.int()
	m.Timeout = time.Duration(d.varint())
	m.Deadline = d.time()
	m.UniqueKey = d.str()
	m.UniqueTTL = time.Duration(d.varint())
	m.Retention = time.Duration(d.varint())
	m.GroupKey = d.str()
	m.LastErr = d.str()
	m.LastFailedAt = d.time()
	t.order = d.varint()
	t.at = d.time()
	t.token = d.str()
	t.completedAt = d.time()
	t.result = d.bytes()
	t.uniqueUntil = d.time()
	for last := uint64(0); len(d.b) > 0 && d.err == nil; {
		tag := d.uvarint()
		switch {
		case tag <= last:
			d.fail("optional field order")
		case tag == tagHeaders:
			m.Headers = d.headers()
		case tag == tagPriority:
			p := d.uvarint()
			if p == 0 || p > base.MaxPriority {
				d.fail("priority")
			}
			m.Priority = int(p)
		case tag == tagKey:
			if m.Key = d.str(); m.Key == "" {
				d.fail("key")
			}
		case tag == tagWorkflow:
			m.Workflow = d.str()
			m.WorkflowTask = d.str()
			if m.Workflow == "" {
				d.fail("workflow ID") // written only with one
			}
		default:
			d.fail(fmt.Sprintf("optional field (unknown tag %d)", tag))
		}
		last = tag
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w %d: %v", errBadRecord, seq, d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w %d: %d bytes left over", errBadRecord, seq, len(d.b))
	}
	if t.state < base.StateActive || t.state > base.MaxState {
		return nil, fmt.Errorf("%w %d: state %d", errBadRecord, seq, t.state)
	}
	if err := base.ValidateQueueName(m.Queue); err != nil {
		return nil, fmt.Errorf("%w %d: %v", errBadRecord, seq, err)
	}
	return t, nil
}

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte) {
	// 0 is nil, n+1 is n bytes, so that nil and empty stay apart.
	if p == nil {
		e.uvarint(0)
		return
	}
	e.uvarint(uint64(len(p)) + 1)
	e.b = append(e.b, p...)
}

// headers writes the count of h, then its entries in name order.
func (e *encoder) headers(h map[string]string) {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	e.uvarint(uint64(len(names)))
	for _, k := range names {
		e.str(k)
		e.str(h[k])
	}
}

// time writes 0 for the zero time, else 1, the Unix seconds and the
// nanoseconds.
func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.uvarint(0)
		return
	}
	e.uvarint(1)
	e.varint(t.Unix())
	e.uvarint(uint64(t.Nanosecond()))
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("truncated or malformed %s", what)
	}
}

// uvarint reads an unsigned varint in its shortest form, the only one
// encoder writes (binary.Uvarint alone also takes padded forms such as
// 0x80 0x00, which would not encode back to the same record).
func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) {
		d.fail("uvarint")
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads a signed varint in its shortest form.
func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 || n != uvarintLen(zigzag(v)) {
		d.fail("varint")
		d.b = nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

// uvarintLen is how many bytes binary.AppendUvarint writes for v.
func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// zigzag is the unsigned form binary.AppendVarint writes for v.
func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func (d *decoder) int() int {
	v := d.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		d.fail("int")
	}
	return int(v)
}

func (d *decoder) raw(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.fail("field")
		d.b = nil
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n == 0 {
		return ""
	}
	return string(d.raw(n))
}

// strBytes is str without the copy; the bytes are valid as long as the
// record is.
func (d *decoder) strBytes() []byte {
	n := d.uvarint()
	if n == 0 {
		return nil
	}
	return d.raw(n)
}

// headers reads what encoder.headers wrote: a count of at least one and
// names strictly increasing.
func (d *decoder) headers() map[string]string {
	n := d.uvarint()
	// Each entry takes at least two bytes (two empty strings).
	if n == 0 || n > uint64(len(d.b))/2 {
		d.fail("headers")
		return nil
	}
	h := make(map[string]string, int(n))
	prev := ""
	for i := uint64(0); i < n && d.err == nil; i++ {
		k, v := d.str(), d.str()
		if i > 0 && k <= prev {
			d.fail("headers")
		}
		h[k] = v
		prev = k
	}
	return h
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n == 0 {
		return nil
	}
	return append([]byte{}, d.raw(n-1)...)
}

func (d *decoder) time() time.Time {
	switch d.uvarint() {
	case 0:
		return time.Time{}
	case 1:
		sec := d.varint()
		nsec := d.uvarint()
		t := time.Unix(sec, int64(nsec))
		// The zero time is written as 0, and a time that time.Unix
		// cannot hold as given would not encode back to these bytes.
		if nsec >= 1e9 || t.IsZero() || t.Unix() != sec {
			d.fail("time")
			return time.Time{}
		}
		return t
	default:
		d.fail("time")
		return time.Time{}
	}
}
