package service_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/htqueue/htq/webhook"
)

// A URL task reaches its target signed, with htq's headers and its own,
// and the answer is stored as the task's result.
func TestURLTaskDelivered(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		tg.setRespond(func(_ int, _ hit, w http.ResponseWriter) {
			w.Header().Set("X-Answer", "42")
			io.WriteString(w, `{"received":true}`)
		})

		id := c.enqueue("hooks", urlTask(tg.URL+"/hook?x=1", map[string]any{
			"method":  "PUT",
			"headers": map[string]string{"X-Custom": "yes", "Content-Type": "application/json"},
			"body":    `{"hello":"world"}`,
			"options": map[string]any{"retention": "1h"},
		}))
		h := tg.next(t, 10*time.Second)
		if h.method != "PUT" || h.path != "/hook?x=1" || string(h.body) != `{"hello":"world"}` {
			t.Errorf("target got %s %s %q", h.method, h.path, h.body)
		}
		for k, want := range map[string]string{
			"Htq-Task-Id": id, "Htq-Queue": "hooks", "Htq-Retry-Count": "0",
			"X-Custom": "yes", "Content-Type": "application/json", "Webhook-Id": id,
		} {
			if got := h.header.Get(k); got != want {
				t.Errorf("header %s = %q, want %q", k, got, want)
			}
		}
		v, err := webhook.NewVerifier(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(h.header, h.body); err != nil {
			t.Errorf("signature does not verify: %v", err)
		}
		other, _ := webhook.GenerateSecret()
		if err := must(webhook.NewVerifier(other)).Verify(h.header, h.body); err == nil {
			t.Error("signature verifies with another secret")
		}

		tv := c.waitTask("hooks", id, 10*time.Second, "completed", inState("completed"))
		var res struct {
			Status     int                 `json:"status"`
			Headers    map[string][]string `json:"headers"`
			Body       string              `json:"body"`
			Truncated  bool                `json:"truncated"`
			DurationMS *float64            `json:"duration_ms"`
		}
		if err := json.Unmarshal(tv.Result, &res); err != nil {
			t.Fatalf("result %s: %v", tv.Result, err)
		}
		if res.Status != 200 || res.Body != `{"received":true}` || res.Truncated || res.DurationMS == nil ||
			len(res.Headers["X-Answer"]) != 1 || res.Headers["X-Answer"][0] != "42" {
			t.Errorf("result = %s", tv.Result)
		}

		// The dispatch shows in /metrics.
		_, metrics := c.call("GET", "/metrics", nil, nil)
		if want := `htq_dispatch_duration_seconds_count{outcome="succeeded",queue="hooks"} 1`; !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	})
}

// 500 is retried with the queue's backoff, 404 archives the task at once,
// and a Retry-After longer than the backoff is honoured.
func TestURLTaskOutcomes(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		c.createQueue("outcomes", "real_time", map[string]any{"min_backoff_ms": 50, "max_backoff_ms": 200})

		t.Run("500 retried", func(t *testing.T) {
			tg := newTarget(t)
			tg.setRespond(func(n int, _ hit, w http.ResponseWriter) {
				if n == 1 {
					http.Error(w, "boom", http.StatusInternalServerError)
					return
				}
				io.WriteString(w, "fine")
			})
			id := c.enqueue("outcomes", urlTask(tg.URL, map[string]any{"options": map[string]any{"retention": "1h"}}))
			first := tg.next(t, 10*time.Second)
			second := tg.next(t, 10*time.Second)
			if got := second.header.Get("Htq-Retry-Count"); got != "1" {
				t.Errorf("second attempt Htq-Retry-Count = %q, want 1", got)
			}
			if first.header.Get("Webhook-Id") != second.header.Get("Webhook-Id") {
				t.Errorf("webhook-id changed across retries: %q then %q", first.header.Get("Webhook-Id"), second.header.Get("Webhook-Id"))
			}
			if gap := second.at.Sub(first.at); gap < 50*time.Millisecond || gap > 3*time.Second {
				t.Errorf("retry came %v after the failure; the queue's backoff is 50-200 ms", gap)
			}
			tv := c.waitTask("outcomes", id, 10*time.Second, "completed", inState("completed"))
			if tv.Retried != 1 {
				t.Errorf("retried = %d, want 1", tv.Retried)
			}
		})

		t.Run("404 archived", func(t *testing.T) {
			tg := newTarget(t)
			tg.setRespond(func(_ int, _ hit, w http.ResponseWriter) { http.NotFound(w, nil) })
			id := c.enqueue("outcomes", urlTask(tg.URL, nil))
			tg.next(t, 10*time.Second)
			tv := c.waitTask("outcomes", id, 10*time.Second, "archived", inState("archived"))
			if tv.Retried != 0 || tv.LastError == "" {
				t.Errorf("archived task: retried %d, last error %q", tv.Retried, tv.LastError)
			}
			var res struct{ Status int }
			if err := json.Unmarshal(tv.Result, &res); err != nil || res.Status != 404 {
				t.Errorf("result of the 404 = %s (%v)", tv.Result, err)
			}
			tg.none(t, 500*time.Millisecond)
		})

		t.Run("Retry-After honoured", func(t *testing.T) {
			tg := newTarget(t)
			tg.setRespond(func(n int, _ hit, w http.ResponseWriter) {
				if n == 1 {
					w.Header().Set("Retry-After", "2")
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				io.WriteString(w, "ok")
			})
			c.enqueue("outcomes", urlTask(tg.URL, nil))
			first := tg.next(t, 10*time.Second)
			second := tg.next(t, 10*time.Second)
			if gap := second.at.Sub(first.at); gap < 1900*time.Millisecond {
				t.Errorf("retried %v after a Retry-After: 2", gap)
			}
		})
	})
}

// A real_time queue runs its tasks one at a time (HTQ's semantics) while
// another queue runs beside it.
func TestRealTimeOneAtATime(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		var running, peak, total atomic.Int32
		tg := newTarget(t)
		tg.setRespond(func(_ int, _ hit, w http.ResponseWriter) {
			n := running.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			time.Sleep(50 * time.Millisecond)
			running.Add(-1)
			total.Add(1)
			io.WriteString(w, "ok")
		})
		const n = 6
		for i := 0; i < n; i++ {
			c.enqueue("serial", urlTask(tg.URL+"/serial/"+strconv.Itoa(i), nil))
		}
		for i := 0; i < n; i++ {
			tg.next(t, 10*time.Second)
		}
		if p := peak.Load(); p != 1 {
			t.Errorf("a real_time queue ran %d tasks at once, want 1", p)
		}

		// Two real_time queues run side by side: their tasks overlap.
		peak.Store(0)
		for i := 0; i < 3; i++ {
			c.enqueue("side-a", urlTask(tg.URL+"/a", nil))
			c.enqueue("side-b", urlTask(tg.URL+"/b", nil))
		}
		for i := 0; i < 6; i++ {
			tg.next(t, 10*time.Second)
		}
		if p := peak.Load(); p != 2 {
			t.Errorf("two real_time queues ran %d tasks at once at most, want 2", p)
		}
	})
}

// A timing queue's task starts at its time.
func TestTimingQueue(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		c.createQueue("at", "timing", nil)
		tg := newTarget(t)
		at := time.Now().Add(1500 * time.Millisecond).Truncate(time.Millisecond)
		c.enqueue("at", urlTask(tg.URL, map[string]any{"options": map[string]any{"process_at": at.Format(time.RFC3339Nano)}}))
		h := tg.next(t, 10*time.Second)
		late := h.at.Sub(at)
		t.Logf("started %v after its time", late)
		if late < 0 || late > 500*time.Millisecond {
			t.Errorf("task started %v after its time (goal: within 50 ms at p99)", late)
		}
	})
}

// A variable queue's task repeats, each interval one stepping time longer
// up to the maximum, until the target answers "done".
func TestVariableQueue(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		c.createQueue("poll", "variable", map[string]any{"stepping_time_s": 1, "max_interval_s": 2})
		tg := newTarget(t)
		tg.setRespond(func(n int, _ hit, w http.ResponseWriter) {
			if n == 4 {
				io.WriteString(w, "done")
				return
			}
			io.WriteString(w, "not yet")
		})
		id := c.enqueue("poll", urlTask(tg.URL, nil))
		var hits []hit
		for i := 0; i < 4; i++ {
			hits = append(hits, tg.next(t, 10*time.Second))
		}
		want := []time.Duration{time.Second, 2 * time.Second, 2 * time.Second}
		for i := 1; i < len(hits); i++ {
			gap := hits[i].at.Sub(hits[i-1].at)
			if gap < want[i-1]-50*time.Millisecond || gap > want[i-1]+time.Second {
				t.Errorf("run %d came %v after run %d, want ~%v", i+1, gap, i, want[i-1])
			}
		}
		ids := []string{id, id + "~1", id + "~2", id + "~3"}
		for i, h := range hits {
			if got := h.header.Get("Htq-Task-Id"); got != ids[i] {
				t.Errorf("run %d: Htq-Task-Id %q, want %q", i+1, got, ids[i])
			}
		}
		tg.none(t, 2500*time.Millisecond)
		if _, found := c.task("poll", id+"~4"); found {
			t.Error("a run was scheduled after the target answered done")
		}
	})
}

// A typed task is fetched by a pull worker over HTTP, acknowledged with a
// result, and shows as completed with it.
func TestPullWorker(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		id := c.enqueue("jobs", map[string]any{"type": "email:send", "payload": map[string]any{"to": "ada@example.com"},
			"options": map[string]any{"retention": "1h"}})
		var fetched struct {
			Tasks []struct {
				ID      string          `json:"id"`
				Queue   string          `json:"queue"`
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
				Token   string          `json:"token"`
			} `json:"tasks"`
		}
		c.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "count": 5, "wait_s": 5}, &fetched)
		if len(fetched.Tasks) != 1 {
			t.Fatalf("fetched %d tasks, want 1", len(fetched.Tasks))
		}
		ft := fetched.Tasks[0]
		if ft.ID != id || ft.Type != "email:send" || string(ft.Payload) != `{"to":"ada@example.com"}` || ft.Token == "" {
			t.Fatalf("fetched %+v", ft)
		}
		if tv, _ := c.task("jobs", id); tv.State != "active" {
			t.Errorf("fetched task is %s, want active", tv.State)
		}
		c.must(http.StatusOK, "POST", "/v1/queues/jobs/tasks/"+id+"/heartbeat", map[string]any{"token": ft.Token, "lease_s": 60}, nil)
		c.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+id+"/ack", map[string]any{"token": ft.Token, "result": map[string]any{"sent": true}}, nil)
		tv := c.waitTask("jobs", id, 5*time.Second, "completed", inState("completed"))
		if string(tv.Result) != `{"sent":true}` {
			t.Errorf("result %s", tv.Result)
		}
		// A second ack with the same token is refused: the lease is gone.
		if status, body := c.call("POST", "/v1/queues/jobs/tasks/"+id+"/ack", map[string]any{"token": ft.Token}, nil); status != http.StatusConflict {
			t.Errorf("second ack: %d %s, want 409", status, body)
		}

		// A long poll returns as soon as a task arrives.
		done := make(chan time.Duration, 1)
		go func() {
			start := time.Now()
			var out struct{ Tasks []json.RawMessage }
			c2 := newClient(t, svc.URL(), testToken)
			c2.call("POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "count": 1, "wait_s": 10}, &out)
			if len(out.Tasks) != 1 {
				done <- -1
				return
			}
			done <- time.Since(start)
		}()
		time.Sleep(300 * time.Millisecond) // let the long poll start waiting
		c.enqueue("jobs", map[string]any{"type": "email:send", "payload": map[string]any{}})
		select {
		case d := <-done:
			if d < 0 || d > 5*time.Second {
				t.Errorf("long poll returned after %v", d)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("long poll did not return")
		}
	})
}

// A schedule stored through the API enqueues its task at every tick, and
// stops once deleted.
func TestSchedules(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		var sched struct {
			ID string `json:"id"`
		}
		c.must(http.StatusCreated, "POST", "/v1/schedules", map[string]any{
			"cron": "@every 1s", "queue": "ticks", "task": map[string]any{"url": tg.URL + "/tick"},
		}, &sched)
		first := tg.next(t, 5*time.Second)
		second := tg.next(t, 5*time.Second)
		if gap := second.at.Sub(first.at); gap < 700*time.Millisecond || gap > 1500*time.Millisecond {
			t.Errorf("ticks %v apart, want ~1s", gap)
		}
		c.must(http.StatusNoContent, "DELETE", "/v1/schedules/"+sched.ID, nil, nil)
		// A tick enqueued just before the delete may still arrive.
		time.Sleep(300 * time.Millisecond)
		for len(tg.hits) > 0 {
			<-tg.hits
		}
		tg.none(t, 2500*time.Millisecond)
	})
}

// The HTQ-compatible API: addTask with HTQ's form fields reaches the
// target (the data object as a form body), and a malformed execute_time
// is refused.
func TestHTQCompatibleAddTask(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		cfg := testConfig(t, broker)
		cfg.HTQAppKey, cfg.HTQAppToken = "legacy-app", "legacy-app-token-0123456789"
		svc := startService(t, cfg)
		tg := newTarget(t)
		post := func(form url.Values) (int, map[string]any) {
			t.Helper()
			resp, err := http.PostForm(svc.URL()+"/api/addTask", form)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatalf("addTask answer: %v", err)
			}
			return resp.StatusCode, out
		}
		form := url.Values{
			"app_key": {"legacy-app"}, "app_token": {"legacy-app-token-0123456789"},
			"queue_name": {"legacy"}, "url": {tg.URL + "/php"}, "method": {"POST"},
			"header": {`{"X-From":"htq"}`}, "data": {`{"order":"17"}`}, "execute_time": {"0"},
		}
		if _, out := post(form); out["error_code"] != float64(0) {
			t.Fatalf("addTask: %v", out)
		}
		h := tg.next(t, 10*time.Second)
		if h.method != "POST" || h.path != "/php" || string(h.body) != "order=17" || h.header.Get("X-From") != "htq" {
			t.Errorf("target got %s %s %q (X-From %q)", h.method, h.path, h.body, h.header.Get("X-From"))
		}
		form.Set("execute_time", "tomorrow at noon")
		if _, out := post(form); out["error_code"] == float64(0) {
			t.Errorf("a malformed execute_time was accepted: %v", out)
		}
		form.Set("execute_time", "0")
		form.Set("app_token", "wrong")
		if _, out := post(form); out["error_code"] != float64(1000) {
			t.Errorf("wrong app_token: %v, want error_code 1000", out)
		}
		tg.none(t, 300*time.Millisecond)
	})
}

// A run of a variable task that runs again (as when its worker died after
// enqueuing the next run but before completing) does not start a second
// chain: the next run's ID is taken, even once that run has completed.
func TestVariableRepeatedRunNoDouble(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		c.createQueue("chain", "variable", map[string]any{"stepping_time_s": 1, "max_interval_s": 1})
		tg := newTarget(t)
		tg.setRespond(func(_ int, h hit, w http.ResponseWriter) {
			if h.header.Get("Htq-Task-Id") == "c~3" {
				io.WriteString(w, "done")
				return
			}
			io.WriteString(w, "again")
		})
		// retention 0s: c is deleted as it completes, so it can be sent again.
		spec := urlTask(tg.URL, map[string]any{"options": map[string]any{"task_id": "c", "retention": "0s"}})
		c.enqueue("chain", spec)
		count := map[string]int{}
		next := func() string {
			id := tg.next(t, 10*time.Second).header.Get("Htq-Task-Id")
			count[id]++
			return id
		}
		for next() != "c~1" {
		}
		// c~1 ran; replay c (completed and deleted, so its ID is free).
		c.waitTask("chain", "c~1", 5*time.Second, "c~1 completed", inState("completed"))
		c.enqueue("chain", spec)
		for next() != "c~3" {
		}
		tg.none(t, 2500*time.Millisecond)
		for id, want := range map[string]int{"c": 2, "c~1": 1, "c~2": 1, "c~3": 1} {
			if count[id] != want {
				t.Errorf("run %s: %d requests, want %d (all: %v)", id, count[id], want, count)
			}
		}
	})
}

// A URL task that waits (delay or process_at) reports how late it started
// in htq_dispatch_lateness_seconds; one due at once does not.
func TestDispatchLateness(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		c.enqueue("late", urlTask(tg.URL+"/now", nil))
		tg.next(t, 10*time.Second)
		c.enqueue("late", urlTask(tg.URL+"/later", map[string]any{"options": map[string]any{"delay": "300ms"}}))
		if h := tg.next(t, 10*time.Second); h.path != "/later" {
			t.Fatalf("target got %s", h.path)
		}
		deadline := time.Now().Add(5 * time.Second)
		want := `htq_dispatch_lateness_seconds_count{queue="late"} 1` + "\n"
		for {
			_, metrics := c.call("GET", "/metrics", nil, nil)
			if strings.Contains(string(metrics), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/metrics lacks %s", want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
