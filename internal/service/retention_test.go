package service_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// fetchOne leases the next task of queue and returns its ID and token.
func (c *apiClient) fetchOne(queue string) (id, token string) {
	c.t.Helper()
	var out struct {
		Tasks []struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		} `json:"tasks"`
	}
	c.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{queue}, "wait_s": 5}, &out)
	if len(out.Tasks) != 1 {
		c.t.Fatalf("fetch from %s: %d tasks, want 1", queue, len(out.Tasks))
	}
	return out.Tasks[0].ID, out.Tasks[0].Token
}

// TestCompletedTasksKept: a result someone sends does not vanish. A task
// enqueued without a retention of its own is kept after it completes,
// with its result, for the service's --completed-retention (24 h by
// default) or its queue's completed_retention_s; a task's own retention
// and a queue's -1 still decide for themselves.
func TestCompletedTasksKept(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		ack := func(queue string, spec map[string]any, result any) string {
			t.Helper()
			id := c.enqueue(queue, spec)
			if got, token := c.fetchOne(queue); got != id {
				t.Fatalf("fetched %s, want %s", got, id)
			} else {
				c.must(http.StatusNoContent, "POST", "/v1/queues/"+queue+"/tasks/"+id+"/ack", map[string]any{"token": token, "result": result}, nil)
			}
			return id
		}

		// The default: 24 h, the result readable.
		id := ack("jobs", map[string]any{"type": "resize", "payload": map[string]int{"id": 1}}, map[string]string{"url": "s3://x"})
		tv, found := c.task("jobs", id)
		if !found || tv.State != "completed" || string(tv.Result) != `{"url":"s3://x"}` || tv.Completed == nil {
			t.Fatalf("acked task: found=%v %+v", found, tv)
		}
		if tv.Retention != (24 * time.Hour).Milliseconds() {
			t.Errorf("retention_ms %d, want 24 h", tv.Retention)
		}
		// The task's own retention wins: "0s" keeps nothing.
		id = ack("jobs", map[string]any{"type": "resize", "options": map[string]any{"retention": "0s"}}, "r")
		if _, found := c.task("jobs", id); found {
			t.Error("a task with retention 0s was kept")
		}
		// A queue's policy: 2 s, then gone; -1 keeps none.
		c.createQueue("short", "pull", map[string]any{"completed_retention_s": 2})
		id = ack("short", map[string]any{"type": "t"}, "r")
		if tv, found := c.task("short", id); !found || tv.Retention != 2000 || string(tv.Result) != `"r"` {
			t.Fatalf("task of a queue keeping 2 s: found=%v %+v", found, tv)
		}
		c.createQueue("none", "pull", map[string]any{"completed_retention_s": -1})
		id = ack("none", map[string]any{"type": "t"}, "r")
		if _, found := c.task("none", id); found {
			t.Error("a task of a queue keeping none was kept")
		}
		var q struct {
			CompletedRetentionS int64 `json:"completed_retention_s"`
		}
		c.must(http.StatusOK, "PATCH", "/v1/queues/none", map[string]any{"completed_retention_s": 60}, &q)
		if q.CompletedRetentionS != 60 {
			t.Errorf("PATCH completed_retention_s: %+v", q)
		}
		if status, data := c.call("POST", "/v1/queues", map[string]any{"name": "bad", "completed_retention_s": -2}, nil); status != http.StatusBadRequest {
			t.Errorf("completed_retention_s -2: %d %s", status, data)
		}

		// A URL task's answer is its result, kept as well.
		tg := newTarget(t)
		id = c.enqueue("hooks", urlTask(tg.URL+"/done", nil))
		tg.next(t, 10*time.Second)
		tv = c.waitTask("hooks", id, 10*time.Second, "completed", inState("completed"))
		var res struct {
			Status int    `json:"status"`
			Body   string `json:"body"`
		}
		if err := json.Unmarshal(tv.Result, &res); err != nil || res.Status != 200 || res.Body != "ok" {
			t.Errorf("URL task result %s (%v)", tv.Result, err)
		}

		// An expired completed task of a pull queue is deleted by the
		// fetches (no Go Server runs its janitor).
		c.must(http.StatusOK, "PATCH", "/v1/queues/short", map[string]any{"completed_retention_s": 1}, nil)
		id = ack("short", map[string]any{"type": "t"}, "r")
		time.Sleep(1500 * time.Millisecond) // the retention runs on the storage's clock
		c.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"short"}}, nil)
		if _, found := c.task("short", id); found {
			t.Error("a completed task past its retention was not deleted")
		}
	})
}

// TestCompletedRetentionSetting: --completed-retention decides for the
// tasks whose queue and options do not; negative keeps none.
func TestCompletedRetentionSetting(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		cfg := testConfig(t, broker)
		cfg.CompletedRetention = -1
		svc := startService(t, cfg)
		c := newClient(t, svc.URL(), testToken)
		id := c.enqueue("jobs", map[string]any{"type": "t"})
		_, token := c.fetchOne("jobs")
		c.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+id+"/ack", map[string]any{"token": token, "result": 1}, nil)
		if _, found := c.task("jobs", id); found {
			t.Error("completed task kept with --completed-retention 0")
		}
		id = c.enqueue("jobs", map[string]any{"type": "t", "options": map[string]any{"retention": "1h"}})
		_, token = c.fetchOne("jobs")
		c.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+id+"/ack", map[string]any{"token": token, "result": 1}, nil)
		if tv, found := c.task("jobs", id); !found || string(tv.Result) != "1" {
			t.Errorf("a task's own retention: found=%v %+v", found, tv)
		}
	})
}
