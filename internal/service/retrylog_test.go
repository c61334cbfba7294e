package service_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the service's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// records returns the JSON log records written so far.
func (b *syncBuffer) records() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out
}

// TestRetryLogged: a URL task's failed attempt that will be retried is
// logged at info level with the target's status and the time of the next
// attempt.
func TestRetryLogged(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		var logs syncBuffer
		cfg := testConfig(t, broker)
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		svc := startService(t, cfg)
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		tg.setRespond(func(n int, _ hit, w http.ResponseWriter) {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		c.createQueue("flaky", "real_time", map[string]any{"min_backoff_ms": 300})
		id := c.enqueue("flaky", urlTask(tg.URL, nil))
		failedAt := tg.next(t, 10*time.Second).at
		tg.next(t, 10*time.Second)
		c.waitTask("flaky", id, 5*time.Second, "completed", inState("completed"))
		var found map[string]any
		for _, rec := range logs.records() {
			if rec["msg"] == "URL task attempt failed; it will be retried" && rec["id"] == id {
				found = rec
			}
		}
		if found == nil {
			t.Fatalf("no info record of the retry; logs:\n%s", logs.String())
		}
		next, err := time.Parse(time.RFC3339Nano, found["next_attempt"].(string))
		if found["level"] != "INFO" || found["status"] != float64(503) || found["queue"] != "flaky" || err != nil ||
			next.Before(failedAt.Add(250*time.Millisecond)) || next.After(failedAt.Add(2*time.Second)) {
			t.Errorf("retry record %v (next_attempt: %v); want INFO, status 503, next attempt about 300 ms after %v", found, err, failedAt)
		}
	})
}
