package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// scrape reads /metrics with the given Authorization header ("" for none).
func (e *env) scrape(auth string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.srv.URL+"/metrics", nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestMetricsAuth: with MetricsAuth, /metrics answers only with the
// token, as /v1 does; without it, to anyone.
func TestMetricsAuth(t *testing.T) {
	e := newEnv(t, "embedded", func(o *Options) { o.MetricsAuth = true })
	if status, body := e.scrape(""); status != http.StatusUnauthorized || errCode([]byte(body)) != codeUnauthorized {
		t.Errorf("/metrics without the token: %d %.200s", status, body)
	}
	if status, _ := e.scrape("Bearer wrong"); status != http.StatusUnauthorized {
		t.Errorf("/metrics with a wrong token: %d", status)
	}
	if status, body := e.scrape("Bearer " + testToken); status != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics with the token: %d %.200s", status, body)
	}
	open := newEnv(t, "embedded", nil)
	if status, _ := open.scrape(""); status != http.StatusOK {
		t.Errorf("/metrics without MetricsAuth: %d", status)
	}
}

// TestRequestAndPullMetrics: the API counts its requests by route pattern
// (never the raw path) and status class, and its pull workers' fetches,
// leases, acks, failures and lost leases.
func TestRequestAndPullMetrics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "a", "options": map[string]any{"task_id": "a"}}, nil)
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "b", "options": map[string]any{"task_id": "b", "max_retry": 3}}, nil)
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "c", "options": map[string]any{"task_id": "c"}}, nil)
		e.must(http.StatusNotFound, "GET", "/v1/queues/jobs/tasks/nope", nil, nil)
		e.must(http.StatusNotFound, "GET", "/nowhere", nil, nil)
		var got fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "count": 2}, &got)
		if len(got.Tasks) != 2 || got.Tasks[0].ID != "a" || got.Tasks[1].ID != "b" {
			t.Fatalf("fetched %+v", got.Tasks)
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/a/ack", map[string]any{"token": got.Tasks[0].Token}, nil)
		e.must(http.StatusConflict, "POST", "/v1/queues/jobs/tasks/a/ack", map[string]any{"token": got.Tasks[0].Token}, nil)
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/tasks/b/fail", map[string]any{"token": got.Tasks[1].Token, "error": "x", "retry_in_s": 60}, nil)
		// c's worker vanishes: its lease runs out and a fetch recovers it.
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "lease_s": 0.5}, &got)
		if len(got.Tasks) != 1 || got.Tasks[0].ID != "c" {
			t.Fatalf("fetched %+v", got.Tasks)
		}
		time.Sleep(1100 * time.Millisecond) // the lease runs on the storage's clock; recovery checks once a second
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}}, nil)

		_, body := e.scrape("")
		for _, want := range []string{
			`htq_http_requests_total{code="2xx",route="POST /v1/queues/{queue}/tasks"} 3`,
			`htq_http_requests_total{code="4xx",route="GET /v1/queues/{queue}/tasks/{id}"} 1`,
			`htq_http_requests_total{code="4xx",route="unmatched"} 1`,
			`htq_http_requests_total{code="2xx",route="POST /v1/fetch"} 3`,
			`htq_http_requests_total{code="4xx",route="POST /v1/queues/{queue}/tasks/{id}/ack"} 1`,
			`htq_http_request_duration_seconds_count{route="POST /v1/queues/{queue}/tasks/{id}/fail"} 1`,
			`htq_pull_fetches_total{result="tasks"} 2`,
			`htq_pull_tasks_leased_total{queue="jobs"} 3`,
			`htq_pull_acks_total{queue="jobs"} 1`,
			`htq_pull_fails_total{queue="jobs",state="retry"} 1`,
			`htq_pull_leases_lost_total{how="refused",queue="jobs"} 1`,
			`htq_pull_leases_lost_total{how="expired",queue="jobs"} 1`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
		if strings.Contains(body, `route="/v1/queues/jobs`) || strings.Contains(body, `route="GET /v1/queues/jobs`) {
			t.Error("a raw path is a route label")
		}
		if !strings.Contains(body, `htq_pull_fetches_total{result="empty"}`) {
			t.Error("/metrics lacks the empty fetches")
		}
	})
}
