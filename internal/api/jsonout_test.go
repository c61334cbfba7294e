package api

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/htqueue/htq"
)

// FuzzWriteEnqueued checks that the enqueue answer written by hand is,
// byte for byte and header for header, what writeJSON writes of the
// same answer: for any ID, queue, type, state and due time (strings
// with escapes, HTML characters, invalid UTF-8; times out of
// encoding/json's range).
func FuzzWriteEnqueued(f *testing.F) {
	f.Add("0b9c2a4e-1c1d-4f5e-9a6b-7c8d9e0f1a2b", "v1q", "htq:url", 3, int64(1796169600123456789), true)
	f.Add("id<&>\"\\\x01é\xff", "q", "t\u2028", 2, int64(0), false)
	f.Add("a", "b", "c", 1, int64(-1), true)
	f.Add("a", "b", "c", 1, int64(1<<62), true)
	f.Fuzz(func(t *testing.T, id, queue, typ string, state int, nanos int64, due bool) {
		info := &htq.TaskInfo{ID: id, Queue: queue, Type: typ, State: htq.TaskState(state)}
		if due {
			info.NextProcessAt = time.Unix(0, nanos).In(time.FixedZone("x", 3600))
			switch {
			case nanos < 0:
				info.NextProcessAt = info.NextProcessAt.AddDate(-3000, 0, 0) // before year 0
			case nanos > 1<<61:
				info.NextProcessAt = info.NextProcessAt.AddDate(8000, 0, 0) // after year 9999
			}
		}
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeEnqueued(got, http.StatusCreated, info)
		writeJSON(want, http.StatusCreated, newEnqueueResponse(info))
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("writeEnqueued: %d %q\nwriteJSON:    %d %q", got.Code, got.Body, want.Code, want.Body)
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Content-Encoding"} {
			if got.Header().Get(h) != want.Header().Get(h) {
				t.Fatalf("%s: %q, writeJSON %q", h, got.Header().Get(h), want.Header().Get(h))
			}
		}
	})
}
