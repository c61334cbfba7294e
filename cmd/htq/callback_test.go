package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// callbackTarget records the bodies it is sent; with hangFirst, its first
// request hangs (until the test ends) after saying so on arrived.
type callbackTarget struct {
	*httptest.Server
	arrived chan struct{}
	bodies  chan []byte
}

func newCallbackTarget(t *testing.T, answer string, hangFirst bool) *callbackTarget {
	ct := &callbackTarget{arrived: make(chan struct{}, 1), bodies: make(chan []byte, 10)}
	release := make(chan struct{})
	var mu sync.Mutex
	n := 0
	ct.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n++
		first := hangFirst && n == 1
		mu.Unlock()
		if first {
			ct.arrived <- struct{}{}
			<-release
			return
		}
		ct.bodies <- body
		io.WriteString(w, answer)
	}))
	t.Cleanup(func() { close(release); ct.Close() })
	return ct
}

// waitArrived waits for the first (hanging) request.
func (ct *callbackTarget) waitArrived(t *testing.T) {
	t.Helper()
	select {
	case <-ct.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("no request arrived")
	}
}

// next waits for a request after the first.
func (ct *callbackTarget) next(t *testing.T, d time.Duration) map[string]any {
	t.Helper()
	select {
	case b := <-ct.bodies:
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("callback body %s: %v", b, err)
		}
		return m
	case <-time.After(d):
		t.Fatalf("no request within %v", d)
		return nil
	}
}

// barrier returns once every change the service made so far is durable:
// an enqueue answers after its write is, and the embedded store writes
// changes in order, so the lease of a task being dispatched is on disk
// once a later enqueue returns (else a kill could leave the task pending,
// to be run again, instead of active, to be recovered).
func barrier(t *testing.T, p *proc) {
	t.Helper()
	p.do(t, binToken, "POST", "/v1/queues/barrier/tasks", map[string]any{"type": "barrier"}, http.StatusCreated, nil)
}

// TestBinaryCallbackSurvivesKill kills `htq serve` (SIGKILL) at the two
// moments a callback could be lost, and checks that the restarted service
// makes it: (1) the task's outcome is written and its callback's request
// is in flight; (2) the worker dies during the task's last attempt, which
// the Recoverer then archives: the failure callback reports the lost
// attempt.
func TestBinaryCallbackSurvivesKill(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		args := []string{"--token", binToken, "--signing-secrets", binSecret}
		p := startBinary(t, broker, args...)
		p.do(t, binToken, "POST", "/v1/queues", map[string]any{"name": "cb", "mode": "real_time", "lease_ms": 1000,
			"min_backoff_ms": 50, "max_backoff_ms": 100}, http.StatusCreated, nil)
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "done") }))
		t.Cleanup(target.Close)
		ok := newCallbackTarget(t, "", true)
		var task struct{ ID string }
		p.do(t, binToken, "POST", "/v1/queues/cb/tasks", map[string]any{"url": target.URL,
			"options": map[string]any{"callback": ok.URL, "task_id": "t1"}}, http.StatusCreated, &task)
		ok.waitArrived(t)
		var view struct{ State string }
		p.do(t, binToken, "GET", "/v1/queues/cb/tasks/t1", nil, http.StatusOK, &view)
		if view.State != "completed" {
			t.Fatalf("task %s while its callback is in flight, want completed", view.State)
		}
		barrier(t, p)
		_ = p.cmd.Process.Kill()
		p.wait(t, 10*time.Second)

		// The killed worker's leases must run out (1 s, on the storage's
		// clock) before the restarted service's Recoverer, which looks at
		// start, can take the tasks back.
		time.Sleep(1100 * time.Millisecond)
		p = startBinary(t, broker, args...)
		got := ok.next(t, 20*time.Second)
		if got["task_id"] != "t1" || got["state"] != "completed" || got["status"] != 200.0 || got["body"] != "done" {
			t.Errorf("callback after the restart: %v", got)
		}

		// A worker lost during the last attempt.
		hang := newCallbackTarget(t, "late", true)
		failed := newCallbackTarget(t, "", false)
		p.do(t, binToken, "POST", "/v1/queues/cb/tasks", map[string]any{"url": hang.URL,
			"options": map[string]any{"failure_callback": failed.URL, "max_retry": 0, "task_id": "t2"}}, http.StatusCreated, nil)
		hang.waitArrived(t)
		barrier(t, p)
		_ = p.cmd.Process.Kill()
		p.wait(t, 10*time.Second)
		time.Sleep(1100 * time.Millisecond) // as above
		startBinary(t, broker, args...)
		got = failed.next(t, 20*time.Second)
		if got["task_id"] != "t2" || got["state"] != "archived" || got["status"] != 0.0 || got["attempts"] != 1.0 ||
			!strings.Contains(got["error"].(string), "lease expired") {
			t.Errorf("failure callback of the lost attempt: %v", got)
		}
	})
}
