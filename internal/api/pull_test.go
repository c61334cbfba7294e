package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
)

func TestPullWorkerRoundTrip(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "resize", "payload": map[string]int{"w": 10}, "options": map[string]any{"retention": "1h", "max_retry": 1}}, nil)
		var got fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"empty", "jobs"}, "count": 5, "lease_s": 30}, &got)
		if len(got.Tasks) != 1 {
			t.Fatalf("fetched %d tasks", len(got.Tasks))
		}
		lt := got.Tasks[0]
		if lt.Type != "resize" || string(lt.Payload) != `{"w":10}` || lt.Token == "" || time.Until(lt.LeaseDeadline) < 20*time.Second {
			t.Fatalf("leased task %+v", lt)
		}
		base := "/v1/queues/jobs/tasks/" + lt.ID
		var hb heartbeatResponse
		e.must(http.StatusOK, "POST", base+"/heartbeat", map[string]any{"token": lt.Token, "lease_s": 60}, &hb)
		if time.Until(hb.LeaseDeadline) < 50*time.Second || hb.Canceled {
			t.Errorf("heartbeat %+v", hb)
		}
		status, data := e.call("POST", base+"/heartbeat", map[string]any{"token": "wrong"}, nil)
		if status != http.StatusConflict || errCode(data) != codeLeaseLost {
			t.Errorf("heartbeat with a wrong token: %d %s", status, data)
		}
		e.must(http.StatusNoContent, "POST", base+"/ack", map[string]any{"token": lt.Token, "result": map[string]string{"url": "s3://x"}}, nil)
		var task taskJSON
		e.must(http.StatusOK, "GET", base, nil, &task)
		if task.State != "completed" || string(task.Result) != `{"url":"s3://x"}` {
			t.Errorf("acked task %+v result %s", task, task.Result)
		}
		status, data = e.call("POST", base+"/ack", map[string]any{"token": lt.Token}, nil)
		if status != http.StatusConflict || errCode(data) != codeLeaseLost {
			t.Errorf("second ack: %d %s", status, data)
		}

		// fail: retry while retries are left, then archive.
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "flaky", "options": map[string]any{"max_retry": 1, "task_id": "f"}}, nil)
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}}, &got)
		var fr failResponse
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/tasks/f/fail", map[string]any{"token": got.Tasks[0].Token, "error": "boom", "retry_in_s": 0}, &fr)
		if fr.State != "retry" {
			t.Fatalf("first fail: %+v", fr)
		}
		// The retry is due at once; the next fetch forwards and leases it.
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "wait_s": 5}, &got)
		if len(got.Tasks) != 1 || got.Tasks[0].ID != "f" || got.Tasks[0].Retried != 1 {
			t.Fatalf("refetch after retry: %+v", got)
		}
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/tasks/f/fail", map[string]any{"token": got.Tasks[0].Token, "error": "boom again"}, &fr)
		if fr.State != "archived" {
			t.Fatalf("second fail: %+v", fr)
		}
		e.must(http.StatusOK, "GET", "/v1/queues/jobs/tasks/f", nil, &task)
		if task.State != "archived" || task.LastError != "boom again" {
			t.Errorf("failed task %+v", task)
		}
	})
}

func TestPullLongPollWakesOnEnqueue(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		done := make(chan fetchResponse, 1)
		start := time.Now()
		go func() {
			var got fetchResponse
			status, data := e.call("POST", "/v1/fetch", map[string]any{"queues": []string{"lp"}, "wait_s": 10}, &got)
			if status != http.StatusOK {
				t.Errorf("fetch: %d %s", status, data)
			}
			done <- got
		}()
		// Let the fetch start waiting; it must not matter if it has not
		// (the enqueue is then found by its first look).
		time.Sleep(200 * time.Millisecond)
		if _, err := htq.NewClient(e.st).Enqueue(htq.NewTask("lp", nil), htq.Queue("lp")); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-done:
			if len(got.Tasks) != 1 {
				t.Fatalf("long poll answered %+v", got)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("long poll took %v", d)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("long poll not woken")
		}
		// An empty wait answers after wait_s with no task.
		var got fetchResponse
		start = time.Now()
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"lp"}, "wait_s": 0.3}, &got)
		if len(got.Tasks) != 0 || time.Since(start) < 250*time.Millisecond {
			t.Errorf("empty wait: %+v after %v", got, time.Since(start))
		}
	})
}

// TestPullWorkerVanishes: a worker that takes a task and stops sending
// heartbeats loses its lease; the task is recovered to retry and runs
// again.
func TestPullWorkerVanishes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.must(http.StatusCreated, "POST", "/v1/queues/crash/tasks", map[string]any{"type": "long", "options": map[string]any{"task_id": "c"}}, nil)
		var got fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"crash"}, "lease_s": 1}, &got)
		if len(got.Tasks) != 1 {
			t.Fatalf("fetched %+v", got)
		}
		lost := got.Tasks[0]
		// The worker vanishes: wait (for real, the lease runs on the
		// storage clock) until its lease has run out.
		time.Sleep(time.Until(lost.LeaseDeadline) + 100*time.Millisecond)
		// The next fetch of the queue recovers the task.
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"crash"}}, &got)
		var task taskJSON
		e.must(http.StatusOK, "GET", "/v1/queues/crash/tasks/c", nil, &task)
		if task.State != "retry" || task.Retried != 1 || !strings.Contains(task.LastError, "lease expired") {
			t.Fatalf("recovered task %+v", task)
		}
		status, data := e.call("POST", "/v1/queues/crash/tasks/c/ack", map[string]any{"token": lost.Token}, nil)
		if status != http.StatusConflict || errCode(data) != codeLeaseLost {
			t.Errorf("late ack of the vanished worker: %d %s", status, data)
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/crash/tasks/c/run", nil, nil)
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"crash"}, "wait_s": 5}, &got)
		if len(got.Tasks) != 1 || got.Tasks[0].ID != "c" || got.Tasks[0].Retried != 1 {
			t.Fatalf("task not run again: %+v", got)
		}
		// A cancel reaches the worker through its heartbeat. Cancel events
		// are hints that may be lost (e.g. before the handler's
		// subscription is live), so the test asks again while it waits.
		deadline := time.Now().Add(5 * time.Second)
		for {
			e.must(http.StatusAccepted, "POST", "/v1/queues/crash/tasks/c/cancel", nil, nil)
			var hb heartbeatResponse
			e.must(http.StatusOK, "POST", "/v1/queues/crash/tasks/c/heartbeat", map[string]any{"token": got.Tasks[0].Token}, &hb)
			if hb.Canceled {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("cancel never reached the heartbeat")
			}
			time.Sleep(50 * time.Millisecond) // the cancel event is asynchronous
		}
	})
}
