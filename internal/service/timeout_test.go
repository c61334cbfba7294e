package service_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestURLTaskTimeoutShown: a URL task's timeout_ms is the timeout its
// request really gets (its own timeout_ms, else its queue's
// dispatch_timeout_ms, else --dispatch-timeout; shorter when its timeout
// option is), not htq's 30-minute attempt timeout; and --dispatch-timeout
// is what a task of a queue without its own policy really gets.
func TestURLTaskTimeoutShown(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		cfg := testConfig(t, broker)
		cfg.DispatchTimeout = 400 * time.Millisecond
		svc := startService(t, cfg)
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		release := make(chan struct{})
		defer close(release)
		tg.setRespond(func(_ int, h hit, w http.ResponseWriter) {
			if strings.HasPrefix(h.path, "/slow") {
				select { // longer than the dispatch timeout
				case <-time.After(3 * time.Second):
				case <-release:
				}
			}
			io.WriteString(w, "ok")
		})
		c.createQueue("paused", "timing", map[string]any{"paused": true})
		c.createQueue("own", "timing", map[string]any{"paused": true, "dispatch_timeout_ms": 1500})
		timeoutMS := func(queue string, spec map[string]any) int64 {
			t.Helper()
			id := c.enqueue(queue, spec)
			var v struct {
				TimeoutMS int64 `json:"timeout_ms"`
			}
			c.must(http.StatusOK, "GET", "/v1/queues/"+queue+"/tasks/"+id, nil, &v)
			return v.TimeoutMS
		}
		for _, tc := range []struct {
			queue string
			spec  map[string]any
			want  int64
		}{
			{"paused", urlTask(tg.URL, nil), 400},
			{"own", urlTask(tg.URL, nil), 1500},
			{"own", urlTask(tg.URL, map[string]any{"timeout_ms": 700}), 700},
			{"own", urlTask(tg.URL, map[string]any{"timeout_ms": 700, "options": map[string]any{"timeout": "200ms"}}), 200},
		} {
			if got := timeoutMS(tc.queue, tc.spec); got != tc.want {
				t.Errorf("%s %v: timeout_ms %d, want %d", tc.queue, tc.spec, got, tc.want)
			}
		}
		// The dispatcher refuses requests over 30 minutes: so does the
		// enqueue, rather than archiving the task when it runs.
		if status, data := c.call("POST", "/v1/queues/paused/tasks", urlTask(tg.URL, map[string]any{"timeout_ms": 31 * 60 * 1000}), nil); status != http.StatusBadRequest {
			t.Errorf("timeout_ms over 30 min: %d %s", status, data)
		}
		if status, data := c.call("PATCH", "/v1/queues/own", map[string]any{"dispatch_timeout_ms": 31 * 60 * 1000}, nil); status != http.StatusBadRequest {
			t.Errorf("dispatch_timeout_ms over 30 min: %d %s", status, data)
		}

		// The slow target is cut off after --dispatch-timeout (400 ms),
		// not after a queue default of 30 s.
		id := c.enqueue("hooks", urlTask(tg.URL+"/slow", nil))
		start := time.Now()
		tv := c.waitTask("hooks", id, 10*time.Second, "a failed attempt", func(tv taskView, found bool) bool { return found && tv.State == "retry" })
		if d := time.Since(start); d > 2500*time.Millisecond || !strings.Contains(tv.LastError, "timeout") {
			t.Errorf("slow target: retry after %v with %q; want a timeout after about 400 ms", d, tv.LastError)
		}
	})
}
