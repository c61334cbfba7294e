package embedded

import (
	"bytes"
	"encoding/hex"
	"maps"
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
	traced := sampleTask()
	traced.m.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "", "a": "b"}
	prio, keyed := sampleTask(), sampleTask()
	prio.m.Priority = 9
	keyed.m.Key = "tenant-1"
	keyed.m.Headers = traced.m.Headers
	for _, tk := range []*task{sampleTask(), traced, prio, keyed, {seq: 1, state: base.StatePending, m: base.TaskMessage{Queue: "q", ID: "i", Type: "t"}}} {
		tk.msg = &tk.m
		rec := encodeTask(tk)
		got, err := decodeTask(tk.seq, rec, nil)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if again := encodeTask(got); !bytes.Equal(again, rec) {
			t.Errorf("re-encoded record differs:\n%q\n%q", rec, again)
		}
		if got.msg.ID != tk.msg.ID || got.msg.UniqueTTL != tk.msg.UniqueTTL || !got.at.Equal(tk.at) || (got.result == nil) != (tk.result == nil) ||
			got.msg.Priority != tk.msg.Priority || got.msg.Key != tk.msg.Key ||
			!maps.Equal(got.msg.Headers, tk.msg.Headers) || (got.msg.Headers == nil) != (tk.msg.Headers == nil) {
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
	withTail := func(tail ...byte) []byte { return append(append([]byte{}, good...), tail...) }
	for name, rec := range map[string][]byte{"padded uvarint": padded, "zero time as a time": e.b, "truncated": good[:len(good)-1],
		"unknown optional tag":     withTail(9, 0),
		"tag 0":                    withTail(0),
		"headers without a header": withTail(tagHeaders, 0),
		"headers out of order":     withTail(tagHeaders, 2, 1, 'b', 0, 1, 'a', 0),
		"a header twice":           withTail(tagHeaders, 2, 1, 'a', 0, 1, 'a', 0),
		"more headers than bytes":  withTail(tagHeaders, 5, 1, 'a', 0),
		"headers given twice":      withTail(tagHeaders, 1, 1, 'a', 0, tagHeaders, 1, 1, 'b', 0),
		"a header value cut short": withTail(tagHeaders, 1, 1, 'a', 5, 'x'),
		"priority 0":               withTail(tagPriority, 0),
		"priority 10":              withTail(tagPriority, 10),
		"an empty key":             withTail(tagKey, 0),
		"key before priority":      withTail(tagKey, 1, 'k', tagPriority, 1),
	} {
		if _, err := decodeTask(1, rec, nil); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestRecordOld decodes a record as htq wrote it before optional fields
// existed (sampleTask, encoded by that version): it decodes with nil
// Headers and encodes back to the same bytes.
func TestRecordOld(t *testing.T) {
	old, err := hex.DecodeString("010101710369643105656d61696c087b2261223a317d320480e0ba84bf030180c8ceb40d0001758080c58bc6d101" +
		"ffa7d6b907016704626f6f6d0180c49fd50c01050180c49fd50c05077372762f6162630182c49fd50c000101a0fc9fd50cff93ebdc03")
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeTask(7, old, nil)
	if err != nil {
		t.Fatalf("decode the old record: %v", err)
	}
	want := sampleTask()
	if got.msg.ID != want.msg.ID || got.msg.LastErr != want.msg.LastErr || !got.uniqueUntil.Equal(want.uniqueUntil) || got.msg.Headers != nil {
		t.Errorf("decoded %+v, want %+v", got.msg, want.msg)
	}
	if again := encodeTask(got); !bytes.Equal(again, old) {
		t.Errorf("re-encoded %x, want the old bytes", again)
	}
	if now := encodeTask(want); !bytes.Equal(now, old) {
		t.Errorf("a task without optional fields encodes as %x, not as before", now)
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
	minimal.m.Headers = map[string]string{"traceparent": "x", "a": ""}
	f.Add(encodeTask(minimal))
	keyed := sampleTask()
	keyed.m.Key = "k"
	f.Add(encodeTask(keyed))
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
