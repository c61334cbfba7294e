package service_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/service"
	"github.com/htqueue/htq/webhook"
)

// callbackOf checks that h is a signed callback about task id and returns
// its body.
func callbackOf(t *testing.T, h hit, id string) service.CallbackBody {
	t.Helper()
	if err := webhook.Verify(testSecret, h.header, h.body); err != nil {
		t.Errorf("callback not signed: %v", err)
	}
	if h.method != http.MethodPost || h.header.Get("Content-Type") != "application/json" || h.header.Get("Htq-Callback-Of") != id {
		t.Errorf("callback %s with Content-Type %q and Htq-Callback-Of %q, want a JSON POST about %s",
			h.method, h.header.Get("Content-Type"), h.header.Get("Htq-Callback-Of"), id)
	}
	var b service.CallbackBody
	if err := json.Unmarshal(h.body, &b); err != nil {
		t.Fatalf("callback body %s: %v", h.body, err)
	}
	if b.TaskID != id {
		t.Errorf("callback about task %q, want %q", b.TaskID, id)
	}
	return b
}

// TestCallbacks runs URL tasks with callbacks against real loopback
// targets: the callback gets the outcome of a success, the failure
// callback that of a task archived after its last retry or at once, each
// signed, once, and a callback is itself retried when its target fails.
func TestCallbacks(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		c.createQueue("cb", "real_time", map[string]any{"min_backoff_ms": 50, "max_backoff_ms": 100})
		tg, ok, failed := newTarget(t), newTarget(t), newTarget(t)
		opts := map[string]any{"callback": ok.URL + "/ok", "failure_callback": failed.URL + "/failed", "max_retry": 1}

		t.Run("success", func(t *testing.T) {
			tg.setRespond(func(_ int, _ hit, w http.ResponseWriter) { io.WriteString(w, "hello \xff") })
			id := c.enqueue("cb", urlTask(tg.URL, map[string]any{"options": opts}))
			tg.next(t, 10*time.Second)
			b := callbackOf(t, ok.next(t, 10*time.Second), id)
			want := service.CallbackBody{TaskID: id, Queue: "cb", State: "completed", Status: 200, BodyBase64: "aGVsbG8g/w==", Attempts: 1}
			if b != want {
				t.Errorf("callback %+v, want %+v", b, want)
			}
			c.waitTask("cb", id, 10*time.Second, "completed", inState("completed"))
			failed.none(t, 300*time.Millisecond)
			ok.none(t, 0)
			// GET of the task names both callbacks; the one made links its
			// task, completed; the failure callback has none.
			tv := c.waitTask("cb", id+"~callback", 10*time.Second, "the callback's task completed", inState("completed"))
			if tv.Type != "htq:url" {
				t.Errorf("the callback's task %+v, want a URL task", tv)
			}
			tv, _ = c.task("cb", id)
			if len(tv.Callbacks) != 2 {
				t.Fatalf("callbacks %+v, want callback and failure_callback", tv.Callbacks)
			}
			cb, fcb := tv.Callbacks[0], tv.Callbacks[1]
			if cb.Kind != "callback" || cb.URL != ok.URL+"/ok" || cb.TaskID != id+"~callback" || cb.Task == nil || cb.Task.State != "completed" {
				t.Errorf("callback %+v (task %+v), want %s/ok made by the completed task %s~callback", cb, cb.Task, ok.URL, id)
			}
			if fcb.Kind != "failure_callback" || fcb.URL != failed.URL+"/failed" || fcb.TaskID != id+"~failure_callback" || fcb.Task != nil {
				t.Errorf("failure callback %+v (task %+v), want %s/failed and no task", fcb, fcb.Task, failed.URL)
			}
		})

		t.Run("archived after the last retry", func(t *testing.T) {
			tg.setRespond(func(_ int, _ hit, w http.ResponseWriter) { http.Error(w, "down", http.StatusServiceUnavailable) })
			id := c.enqueue("cb", urlTask(tg.URL, map[string]any{"options": opts}))
			tg.next(t, 10*time.Second)
			tg.next(t, 10*time.Second)
			b := callbackOf(t, failed.next(t, 10*time.Second), id)
			if b.State != "archived" || b.Status != 503 || b.Body != "down\n" || b.Attempts != 2 || !strings.Contains(b.Error, "503") {
				t.Errorf("failure callback %+v, want archived after 2 attempts with the 503 and its error", b)
			}
			c.waitTask("cb", id, 10*time.Second, "archived", inState("archived"))
			ok.none(t, 300*time.Millisecond)
		})

		t.Run("archived at once", func(t *testing.T) {
			tg.setRespond(func(_ int, _ hit, w http.ResponseWriter) { http.NotFound(w, nil) })
			id := c.enqueue("cb", urlTask(tg.URL, map[string]any{"options": opts}))
			b := callbackOf(t, failed.next(t, 10*time.Second), id)
			if b.State != "archived" || b.Status != 404 || b.Attempts != 1 || b.Error == "" {
				t.Errorf("failure callback %+v, want archived after 1 attempt with the 404", b)
			}
			tg.next(t, time.Second)
		})

		t.Run("a failing callback is retried", func(t *testing.T) {
			tg.setRespond(nil)
			ok.setRespond(func(n int, _ hit, w http.ResponseWriter) {
				if n == 2 { // the first callback of this subtest
					http.Error(w, "not yet", http.StatusBadGateway)
				}
			})
			id := c.enqueue("cb", urlTask(tg.URL, map[string]any{"options": opts}))
			first, second := ok.next(t, 10*time.Second), ok.next(t, 10*time.Second)
			callbackOf(t, first, id)
			callbackOf(t, second, id)
			tv := c.waitTask("cb", id, 10*time.Second, "its callback's task completed", func(tv taskView, found bool) bool {
				return found && len(tv.Callbacks) > 0 && tv.Callbacks[0].Task != nil && tv.Callbacks[0].Task.State == "completed"
			})
			if ct := tv.Callbacks[0].Task; ct.Retried != 1 || !strings.Contains(ct.LastError, "502") {
				t.Errorf("the callback's task %+v, want 1 retry after its 502", ct)
			}
			if first.header.Get("Webhook-Id") != second.header.Get("Webhook-Id") || second.header.Get("Htq-Retry-Count") != "1" {
				t.Errorf("retried callback: webhook-id %q then %q, Htq-Retry-Count %q",
					first.header.Get("Webhook-Id"), second.header.Get("Webhook-Id"), second.header.Get("Htq-Retry-Count"))
			}
			tg.next(t, time.Second)
		})
	})
}

// TestCallbackMadeOnce stores a task under the ID the callback of a task
// will take, as an earlier run of the task would have before htq stopped:
// the task then completes without a second callback.
func TestCallbackMadeOnce(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg, ok := newTarget(t), newTarget(t)
		c.createQueue("once", "real_time", nil)
		c.must(http.StatusNoContent, "POST", "/v1/queues/once/pause", nil, nil)
		id := c.enqueue("once", urlTask(tg.URL, map[string]any{"options": map[string]any{"callback": ok.URL, "task_id": "t1"}}))
		c.enqueue("once", urlTask(ok.URL, map[string]any{"body": "stored by the first run", "options": map[string]any{"task_id": id + "~callback"}}))
		c.must(http.StatusNoContent, "POST", "/v1/queues/once/resume", nil, nil)
		tg.next(t, 10*time.Second)
		if h := ok.next(t, 10*time.Second); string(h.body) != "stored by the first run" {
			t.Errorf("the callback target got %q, want the stored callback", h.body)
		}
		c.waitTask("once", id, 10*time.Second, "completed", inState("completed"))
		ok.none(t, 500*time.Millisecond)
	})
}

// TestCallbackRefused checks the refusals at enqueue: a callback the
// target guard refuses or that is not an http(s) URL is a 400 naming its
// field, and a typed task takes no callback.
func TestCallbackRefused(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		for _, tc := range []struct {
			queue string
			spec  map[string]any
			field string
		}{
			{"hooks", urlTask(tg.URL, map[string]any{"options": map[string]any{"callback": "http://10.1.2.3/cb"}}), "options.callback"},
			{"hooks", urlTask(tg.URL, map[string]any{"options": map[string]any{"failure_callback": "http://169.254.169.254/"}}), "options.failure_callback"},
			{"hooks", urlTask(tg.URL, map[string]any{"options": map[string]any{"callback": "ftp://example.com/"}}), "options.callback"},
			{"hooks", urlTask(tg.URL, map[string]any{"options": map[string]any{"failure_callback": "http://user:pw@example.com/"}}), "options.failure_callback"},
			{"jobs", map[string]any{"type": "job", "options": map[string]any{"callback": tg.URL}}, "options.callback"},
		} {
			status, body := c.call("POST", "/v1/queues/"+tc.queue+"/tasks", tc.spec, nil)
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			_ = json.Unmarshal(body, &e)
			if status != http.StatusBadRequest || e.Error.Code != "invalid_argument" || !strings.Contains(e.Error.Message, tc.field) {
				t.Errorf("enqueue %v: %d %s, want 400 invalid_argument naming %s", tc.spec, status, body, tc.field)
			}
		}
		tg.none(t, 300*time.Millisecond)
	})
}
