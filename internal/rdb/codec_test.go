package rdb

import (
	"bytes"
	"maps"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
)

func sameMessage(t *testing.T, got, want *base.TaskMessage) {
	t.Helper()
	if got.Type != want.Type || !bytes.Equal(got.Payload, want.Payload) || (got.Payload == nil) != (want.Payload == nil) ||
		got.MaxRetry != want.MaxRetry || got.Timeout != want.Timeout || !got.Deadline.Equal(want.Deadline) ||
		got.UniqueKey != want.UniqueKey || got.UniqueTTL != want.UniqueTTL || got.Retention != want.Retention ||
		got.GroupKey != want.GroupKey || !maps.Equal(got.Headers, want.Headers) || (got.Headers == nil) != (want.Headers == nil) ||
		got.Priority != want.Priority || got.Key != want.Key ||
		got.Workflow != want.Workflow || got.WorkflowTask != want.WorkflowTask {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte{0xff, 0, 'x'}, 1000)
	msgs := []*base.TaskMessage{
		{Type: "t"},
		{Type: "t", Payload: []byte{}},
		{Type: "email:send", Payload: []byte(`{"to":"a@b"}`), MaxRetry: 25, Timeout: 30 * time.Minute},
		{Type: "x", Payload: big, Deadline: time.Date(2031, 3, 14, 15, 9, 26, 535897932, time.UTC)},
		{Type: "x", Deadline: time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC), Timeout: -1},
		{Type: "u", UniqueKey: "k:1", UniqueTTL: time.Hour, Retention: 24 * time.Hour, GroupKey: "g"},
		{Type: "ünïcode", Payload: []byte("\x00\x01"), MaxRetry: 1 << 40},
		{Type: "traced", Payload: []byte("p"), GroupKey: "g", Headers: map[string]string{
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE", "b": ""}},
		{Type: "p", Priority: 9},
		{Type: "k", Key: "tenant-1", Retention: time.Hour},
		{Type: "both", Key: "k", Headers: map[string]string{"traceparent": "x"}},
		{Type: "w", Workflow: "order-42", WorkflowTask: "resize"},
		{Type: "w", GroupKey: "g", Workflow: "order-42", WorkflowTask: "resize", Headers: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}},
	}
	for _, m := range msgs {
		blob := string(encodeMessage(nil, m))
		var got base.TaskMessage
		if err := decodeMessage(blob, &got); err != nil {
			t.Fatalf("decode %+v: %v", m, err)
		}
		sameMessage(t, &got, m)
		if s := encodeString(m); s != blob {
			t.Errorf("encodeString differs from encodeMessage")
		}
		// Only a message with a field of the extension byte is written
		// as version 2: the others keep the bytes of version 1.
		want := byte(codecVersion)
		if m.Workflow != "" {
			want = codecVersionExt
		}
		if blob[0] != want {
			t.Errorf("%+v encodes as version %d, want %d", m, blob[0], want)
		}
	}
}

func TestCodecRejectsCorrupt(t *testing.T) {
	good := string(encodeMessage(nil, &base.TaskMessage{Type: "t", Payload: []byte("p"), UniqueKey: "u", UniqueTTL: time.Second}))
	bad := []string{"", "\x01", "\x02\x00\x01t\x00", good[:len(good)-1], good + "x", "\x01\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
		"\x01\x40\x01t\x00\x00\x00",                             // the lane flag with neither priority nor key
		"\x01\x40\x01t\x00\x0a\x00",                             // a priority above 9
		"\x01\x08\x01t\x00\x00\x02",                             // the unique flag with an empty key
		"\x01\x02\x01t\x00\x00",                                 // the timeout flag with a zero timeout
		"\x01\x10\x01t\x00\x00",                                 // the retention flag with zero retention
		"\x01\x20\x01t\x00\x00",                                 // the group flag with an empty key
		"\x01\x04\x01t\x00\x02\x80\x94\xeb\xdc\x03",             // a deadline's nanoseconds of one second
		"\x01\x00\x81\x00t\x00",                                 // a length not in its shortest form
		"\x01\x00\x01t\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", // MaxRetry over MaxInt
		"\x01\x00\x01t\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", // a varint over 64 bits
		"\x01\x80\x01t\x00\x00\x00\x01",                         // the headers flag with no header
		"\x01\x80\x01t\x00\x02\x01b\x00\x01a\x00\x00\x07",       // headers out of order
		"\x01\x80\x01t\x00\x02\x01a\x00\x01a\x00\x00\x07",       // a header twice
		"\x01\x80\x01t\x00\x05\x01a\x00\x00\x04",                // more headers than bytes
		"\x01\x80\x01t\x00\x01\x01a\x05xy\x00\x06",              // a value longer than the blob
		"\x01\x80\x01t\x00\x01\x01a\x00\x00\x03",                // a headers length that is not theirs
		"\x01\x80\x01t\x00\x01\x01a\x00",                        // no headers length
		"\x02\x00",                                              // version 2 without its extension byte
		"\x02\x00\x00\x01t\x00",                                 // an extension byte with no bit set
		"\x02\x00\x02\x01t\x00\x00",                             // an unknown extension bit
		"\x02\x00\x01\x01t\x00\x00\x01n",                        // the workflow bit with an empty workflow
		"\x03\x00\x01t\x00",                                     // an unknown version
	}
	for _, s := range bad {
		var m base.TaskMessage
		if err := decodeMessage(s, &m); err == nil {
			t.Errorf("decode %q succeeded", s)
		}
	}
}

// FuzzDecodeMessage checks that decodeMessage never panics and that
// encodeMessage ∘ decodeMessage is the identity on every blob decode
// accepts (so a stored message never changes when it is written back).
// testdata/fuzz/FuzzDecodeMessage keeps the inputs that once broke it.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(string(encodeMessage(nil, &base.TaskMessage{Type: "t", Payload: []byte("p"), Deadline: time.Unix(5, 6), GroupKey: "g"})))
	f.Add(string(encodeMessage(nil, &base.TaskMessage{Type: "u", Payload: []byte{}, MaxRetry: 3, Timeout: -time.Second,
		UniqueKey: "k", UniqueTTL: time.Hour, Retention: time.Minute})))
	f.Add("\x01\x3f")
	f.Add(string(encodeMessage(nil, &base.TaskMessage{Type: "w", Workflow: "f", WorkflowTask: "a", Key: "k"})))
	f.Add(string(encodeMessage(nil, &base.TaskMessage{Type: "h", Headers: map[string]string{"a": "1", "traceparent": "x"}})))
	f.Fuzz(func(t *testing.T, s string) {
		var m base.TaskMessage
		if decodeMessage(s, &m) != nil {
			return
		}
		if again := string(encodeMessage(nil, &m)); again != s {
			t.Fatalf("decoded %+v\nfrom  %q\nencodes %q", m, s, again)
		}
		var m2 base.TaskMessage
		if err := decodeMessage(s, &m2); err != nil {
			t.Fatalf("second decode: %v", err)
		}
		sameMessage(t, &m2, &m)
	})
}

// TestCodecOldMessages decodes messages as htq wrote them before
// propagated headers existed (the bytes were written by that encoder): they decode as they did, with nil Headers,
// and encode back to the same bytes.
func TestCodecOldMessages(t *testing.T) {
	old := []struct {
		blob string
		want base.TaskMessage
	}{
		// {Type: "email:send", Payload: {"to":"a@b"}, MaxRetry: 25, Timeout: 30m}
		{"\x01\x03\nemail:send\f{\"to\":\"a@b\"}\x19\x80\xc0\xe2\x85\xe3h",
			base.TaskMessage{Type: "email:send", Payload: []byte(`{"to":"a@b"}`), MaxRetry: 25, Timeout: 30 * time.Minute}},
		// every field: unique, retention and group included
		{"\x01?\x01u\x01p\x03\x02\n\x06\x03k:1\x80\x80\xc5\x8b\xc6\xd1\x01\x80\x80\xf8\x94\x92\xa5'\x01g",
			base.TaskMessage{Type: "u", Payload: []byte("p"), MaxRetry: 3, Timeout: 1, Deadline: time.Unix(5, 6),
				UniqueKey: "k:1", UniqueTTL: time.Hour, Retention: 24 * time.Hour, GroupKey: "g"}},
	}
	for _, o := range old {
		var got base.TaskMessage
		if err := decodeMessage(o.blob, &got); err != nil {
			t.Fatalf("decode %q: %v", o.blob, err)
		}
		sameMessage(t, &got, &o.want)
		if got.Headers != nil {
			t.Errorf("an old message decodes with Headers %v", got.Headers)
		}
		if again := string(encodeMessage(nil, &got)); again != o.blob {
			t.Errorf("re-encoded %q, want the old bytes %q", again, o.blob)
		}
	}
}

func BenchmarkCodec(b *testing.B) {
	m := &base.TaskMessage{Type: "email:send", Payload: bytes.Repeat([]byte("x"), 100), MaxRetry: 25, Timeout: time.Minute}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = encodeMessage(buf[:0], m)
		var got base.TaskMessage
		if err := decodeMessage(string(buf), &got); err != nil {
			b.Fatal(err)
		}
	}
}
