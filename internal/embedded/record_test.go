package embedded

import (
	"bytes"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// sampleTask is a task with every persistent field set.
func sampleTask() *task {
	t := &task{seq: 7, state: base.StateActive, order: -3,
		at: time.Unix(1700000000, 5), token: "srv/abc", completedAt: time.Unix(1700000001, 0),
		result: []byte{}, uniqueUntil: time.Unix(1700003600, 999999999)}
	t.m = base.TaskMessage{ID: "id1", Type: "email", Payload: []byte(`{"a":1}`), Queue: "q",
		MaxRetry: 25, Retried: 2, Timeout: time.Minute, Deadline: time.Unix(1800000000, 0),
		UniqueKey: "u", UniqueTTL: time.Hour, Retention: -time.Second, GroupKey: "g",
		LastErr: "boom", LastFailedAt: time.Unix(1700000000, 1)}
	t.msg = &t.m
	return t
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tk := range []*task{sampleTask(), {seq: 1, state: base.StatePending, m: base.TaskMessage{Queue: "q", ID: "i", Type: "t"}}} {
		tk.msg = &tk.m
		rec := encodeTask(tk)
		got, err := decodeTask(tk.seq, rec, nil)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if again := encodeTask(got); !bytes.Equal(again, rec) {
			t.Errorf("re-encoded record differs:\n%q\n%q", rec, again)
		}
		if got.msg.ID != tk.msg.ID || got.msg.UniqueTTL != tk.msg.UniqueTTL || !got.at.Equal(tk.at) || (got.result == nil) != (tk.result == nil) {
			t.Errorf("decoded %+v, want %+v", got.msg, tk.msg)
		}
	}
}

func TestRecordRefusesNonCanonical(t *testing.T) {
	good := encodeTask(sampleTask())
	padded := append([]byte{recordVersion, 0x81, 0x00}, good[2:]...) // state 1 as two bytes
	e := encoder{b: []byte{recordVersion}}
	e.uvarint(uint64(base.StatePending))
	e.str("q")
	e.str("i")
	e.str("t")
	e.bytes(nil)
	e.varint(0)
	e.varint(0)
	e.varint(0)
	e.uvarint(1) // a deadline that is the zero time, written as a time
	e.varint(time.Time{}.Unix())
	e.uvarint(0)
	for name, rec := range map[string][]byte{"padded uvarint": padded, "zero time as a time": e.b, "truncated": good[:len(good)-1]} {
		if _, err := decodeTask(1, rec, nil); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// FuzzDecodeTask checks that decodeTask never panics and that encodeTask
// ∘ decodeTask is the identity on every record decode accepts (the
// invariant check of a store compares them). testdata/fuzz/FuzzDecodeTask
// keeps the inputs that once broke it.
func FuzzDecodeTask(f *testing.F) {
	f.Add(encodeTask(sampleTask()))
	minimal := &task{seq: 1, state: base.StatePending, m: base.TaskMessage{Queue: "q", ID: "i", Type: "t"}}
	minimal.msg = &minimal.m
	f.Add(encodeTask(minimal))
	f.Fuzz(func(t *testing.T, rec []byte) {
		tk, err := decodeTask(1, rec, nil)
		if err != nil {
			return
		}
		if again := encodeTask(tk); !bytes.Equal(again, rec) {
			t.Fatalf("record %q\nencodes back as %q", rec, again)
		}
		interned, err := decodeTask(1, rec, func(b []byte) string { return string(b) })
		if err != nil || !bytes.Equal(encodeTask(interned), rec) {
			t.Fatalf("decoding with intern differs: %v", err)
		}
	})
}
