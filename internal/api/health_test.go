package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/metrics"
)

func TestHealthReadyMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		get := func(path string) (int, string) {
			resp, err := e.srv.Client().Get(e.srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(data)
		}
		if status, body := get("/healthz"); status != 200 || !strings.Contains(body, "ok") {
			t.Errorf("healthz %d %s", status, body)
		}
		if status, body := get("/readyz"); status != 200 {
			t.Errorf("readyz %d %s", status, body)
		}
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "hooks", "mode": "real_time"}, nil)
		e.must(http.StatusCreated, "POST", "/v1/queues/hooks/tasks", map[string]any{"url": "http://example.com/"}, nil)
		e.opts.Metrics.ObserveDispatch("hooks", metrics.OutcomeSucceeded, 20*time.Millisecond)
		e.opts.Metrics.ObserveLateness("hooks", 3*time.Millisecond)
		status, body := get("/metrics")
		for _, want := range []string{
			`htq_queue_tasks{queue="hooks",state="pending"} 1`,
			`htq_queue_info{mode="real_time",queue="hooks"} 1`,
			`htq_tasks_processed_total{queue="hooks"} 0`,
			`htq_tasks_failed_total{queue="hooks"} 0`,
			`htq_queue_paused{queue="hooks"} 0`,
			`htq_dispatch_duration_seconds_count{outcome="succeeded",queue="hooks"} 1`,
			`htq_dispatch_lateness_seconds_count{queue="hooks"} 1`,
			`go_goroutines`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics (%d) lacks %s", status, want)
			}
		}
	})
	e := newEnv(t, "embedded", func(o *Options) {
		o.Ready = func(ctx context.Context) error { return errors.New("draining") }
	})
	resp, err := e.srv.Client().Get(e.srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || errCode(data) != codeUnavailable {
		t.Errorf("readyz when not ready: %d %s", resp.StatusCode, data)
	}
}
