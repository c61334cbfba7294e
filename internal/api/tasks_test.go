package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/model"
)

func TestEnqueueAndManageTasks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var got enqueueResponse
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", map[string]any{
			"type": "email:send", "payload": map[string]any{"to": "a@b.c"},
			"options": map[string]any{"max_retry": 3, "timeout": "90s", "retention": 60, "task_id": "t1"},
		}, &got)
		if got.ID != "t1" || got.Queue != "jobs" || got.State != "pending" {
			t.Fatalf("enqueue answer %+v", got)
		}
		var task taskJSON
		e.must(http.StatusOK, "GET", "/v1/queues/jobs/tasks/t1", nil, &task)
		if task.Type != "email:send" || string(task.Payload) != `{"to":"a@b.c"}` || task.MaxRetry != 3 ||
			task.TimeoutMS != 90000 || task.RetentionMS != 60000 || task.State != "pending" {
			t.Errorf("task %+v payload %s", task, task.Payload)
		}
		// The same ID again conflicts; nothing more is written.
		status, data := e.call("POST", "/v1/queues/jobs/tasks", map[string]any{"type": "x", "options": map[string]any{"task_id": "t1"}}, nil)
		if status != http.StatusConflict || errCode(data) != codeTaskIDConflict {
			t.Errorf("second t1: %d %s", status, data)
		}
		// Unique: the second copy is a duplicate.
		uniq := map[string]any{"type": "report", "payload_base64": base64.StdEncoding.EncodeToString([]byte{0, 1, 2}), "options": map[string]any{"unique": "1h"}}
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", uniq, nil)
		status, data = e.call("POST", "/v1/queues/jobs/tasks", uniq, nil)
		if status != http.StatusConflict || errCode(data) != codeDuplicateTask {
			t.Errorf("duplicate: %d %s", status, data)
		}
		// A delayed task is scheduled; run makes it pending, archive archives it.
		var later enqueueResponse
		e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "later", "options": map[string]any{"delay": "1h"}}, &later)
		if later.State != "scheduled" || later.NextProcessAt == nil || time.Until(*later.NextProcessAt) < 59*time.Minute {
			t.Errorf("delayed task %+v", later)
		}
		var list taskList
		e.must(http.StatusOK, "GET", "/v1/queues/jobs/tasks?state=scheduled", nil, &list)
		if len(list.Tasks) != 1 || list.Tasks[0].ID != later.ID || list.NextPage != 0 {
			t.Errorf("scheduled list %+v", list)
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+later.ID+"/run", nil, nil)
		status, data = e.call("POST", "/v1/queues/jobs/tasks/"+later.ID+"/run", nil, nil)
		if status != http.StatusConflict || errCode(data) != codeWrongState {
			t.Errorf("run of a pending task: %d %s", status, data)
		}
		status, data = e.call("POST", "/v1/queues/jobs/tasks/"+later.ID+"/cancel", nil, nil)
		if status != http.StatusConflict || errCode(data) != codeWrongState {
			t.Errorf("cancel of a pending task: %d %s", status, data)
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+later.ID+"/archive", nil, nil)
		e.must(http.StatusOK, "GET", "/v1/queues/jobs/tasks?state=archived", nil, &list)
		if len(list.Tasks) != 1 || list.Tasks[0].State != "archived" {
			t.Errorf("archived list %+v", list)
		}
		// Binary payloads come back as base64.
		e.must(http.StatusOK, "GET", "/v1/queues/jobs/tasks?state=pending&page_size=2", nil, &list)
		if len(list.Tasks) != 2 || list.NextPage != 2 || list.Tasks[1].PayloadBase64 != "AAEC" {
			t.Errorf("pending page 1 %+v", list)
		}
		list = taskList{}
		e.must(http.StatusOK, "GET", "/v1/queues/jobs/tasks?state=pending&page_size=2&page=2", nil, &list)
		if len(list.Tasks) != 0 || list.NextPage != 0 {
			t.Errorf("pending page 2 %+v", list)
		}
		e.must(http.StatusNoContent, "DELETE", "/v1/queues/jobs/tasks/t1", nil, nil)
		status, data = e.call("GET", "/v1/queues/jobs/tasks/t1", nil, nil)
		if status != http.StatusNotFound || errCode(data) != codeTaskNotFound {
			t.Errorf("deleted task: %d %s", status, data)
		}
		if n := e.queueSize("jobs"); n != 2 {
			t.Errorf("queue size %d, want 2 (unique + archived)", n)
		}
	})
}

func TestURLTasks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "hooks", "mode": "timing", "max_attempts": 4}, nil)
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		var got enqueueResponse
		e.must(http.StatusCreated, "POST", "/v1/queues/hooks/tasks", map[string]any{
			"url": "https://example.com/hook", "method": "put", "headers": map[string]string{"X-A": "1"},
			"body": "hello", "timeout_ms": 2500, "options": map[string]any{"process_at": at.Format(time.RFC3339)},
		}, &got)
		if got.Type != "htq:url" || got.State != "scheduled" || !got.NextProcessAt.Equal(at) {
			t.Fatalf("URL task %+v", got)
		}
		var task taskJSON
		e.must(http.StatusOK, "GET", "/v1/queues/hooks/tasks/"+got.ID, nil, &task)
		want := `{"url":"https://example.com/hook","method":"PUT","headers":{"X-A":"1"},"body":"hello","timeout_ms":2500}`
		if string(task.Payload) != want || task.MaxRetry != 3 {
			t.Errorf("payload %s max_retry %d; want %s and 3 (max_attempts 4)", task.Payload, task.MaxRetry, want)
		}
		// A URL task into a new queue defines it as real_time, with one
		// task at a time.
		e.must(http.StatusCreated, "POST", "/v1/queues/fresh/tasks", map[string]any{"url": "http://example.com/"}, nil)
		var q model.QueueView
		e.must(http.StatusOK, "GET", "/v1/queues/fresh", nil, &q)
		if q.Mode != "real_time" || q.Settings.MaxConcurrency != 1 || q.Stats.Pending != 1 {
			t.Errorf("fresh queue %+v %+v", q.Queue, q)
		}
		// A variable task gets its queue's variable state.
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "scan", "mode": "variable", "stepping_time_s": 10, "max_interval_s": 100}, nil)
		e.must(http.StatusCreated, "POST", "/v1/queues/scan/tasks", map[string]any{"url": "http://example.com/scan", "method": "GET", "options": map[string]any{"task_id": "v1"}}, nil)
		e.must(http.StatusOK, "GET", "/v1/queues/scan/tasks/v1", nil, &task)
		if !strings.Contains(string(task.Payload), `"variable":{"interval_s":0}`) {
			t.Errorf("variable task payload %s", task.Payload)
		}
	})
}

func TestBatch(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tasks := make([]map[string]any, 100)
		for i := range tasks {
			tasks[i] = map[string]any{"type": "bulk", "payload": i}
		}
		tasks[7]["options"] = map[string]any{"task_id": "seven", "max_retry": 1}
		var resp batchResponse
		e.must(http.StatusCreated, "POST", "/v1/queues/bulk/tasks/batch", map[string]any{"tasks": tasks}, &resp)
		if resp.Enqueued != 100 || resp.Failed != 0 || len(resp.Results) != 100 || resp.Results[7].ID != "seven" {
			t.Fatalf("batch answer: %d enqueued, %d failed", resp.Enqueued, resp.Failed)
		}
		if n := e.queueSize("bulk"); n != 100 {
			t.Fatalf("queue holds %d tasks", n)
		}
		// A conflict fails its own item only.
		e.must(http.StatusMultiStatus, "POST", "/v1/queues/bulk/tasks/batch", map[string]any{"tasks": []map[string]any{
			{"type": "bulk"}, {"type": "bulk", "options": map[string]any{"task_id": "seven"}},
		}}, &resp)
		if resp.Enqueued != 1 || resp.Failed != 1 || resp.Results[1].Error == nil || resp.Results[1].Error.Code != codeTaskIDConflict {
			t.Errorf("partial batch %+v", resp)
		}
		if n := e.queueSize("bulk"); n != 101 {
			t.Errorf("queue holds %d tasks, want 101", n)
		}
	})
}

func TestQueues(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var q model.QueueView
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{
			"name": "mail", "mode": "real_time", "max_concurrency": 4, "rate_limit": 50, "rate_burst": 5, "lease_ms": 60000,
			"max_attempts": 5, "min_backoff_ms": 500, "max_backoff_ms": 60000, "dispatch_timeout_ms": 10000, "retry_4xx": true,
		}, &q)
		if q.Mode != "real_time" || q.Settings != (model.SettingsView{MaxConcurrency: 4, RateLimit: 50, RateBurst: 5, LeaseMS: 60000}) ||
			q.MaxAttempts != 5 || q.MinBackoffMS != 500 || !q.Retry4xx || q.CreatedAt.IsZero() {
			t.Errorf("created %+v %+v", q.Queue, q.Settings)
		}
		status, data := e.call("POST", "/v1/queues", map[string]any{"name": "mail", "mode": "pull"}, nil)
		if status != http.StatusConflict || errCode(data) != codeQueueExists {
			t.Errorf("second create: %d %s", status, data)
		}
		e.must(http.StatusOK, "PATCH", "/v1/queues/mail", map[string]any{"max_concurrency": 8, "max_attempts": 2, "paused": true}, &q)
		if q.Settings.MaxConcurrency != 8 || q.Settings.RateLimit != 50 || q.MaxAttempts != 2 || q.MinBackoffMS != 500 || !q.Paused {
			t.Errorf("updated %+v %+v paused=%v", q.Queue, q.Settings, q.Paused)
		}
		status, data = e.call("PATCH", "/v1/queues/mail", map[string]any{"mode": "pull"}, nil)
		if status != http.StatusConflict || errCode(data) != codeQueueModeMismatch {
			t.Errorf("mode change: %d %s", status, data)
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/mail/resume", nil, nil)
		e.must(http.StatusOK, "GET", "/v1/queues/mail", nil, &q)
		if q.Paused {
			t.Error("still paused after resume")
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/mail/pause", nil, nil)
		// A queue made by a Go client is a pull queue.
		if _, err := htq.NewClient(e.st).Enqueue(htq.NewTask("go", nil), htq.Queue("gojobs")); err != nil {
			t.Fatal(err)
		}
		var list struct{ Queues []*model.QueueView }
		e.must(http.StatusOK, "GET", "/v1/queues", nil, &list)
		if len(list.Queues) != 2 || list.Queues[0].Name != "gojobs" || list.Queues[0].Mode != "pull" || list.Queues[0].Stats.Pending != 1 ||
			list.Queues[1].Name != "mail" || !list.Queues[1].Paused {
			t.Errorf("list %s", e.must(http.StatusOK, "GET", "/v1/queues", nil, nil))
		}
		status, data = e.call("POST", "/v1/queues/gojobs/tasks", map[string]any{"url": "http://example.com/"}, nil)
		if status != http.StatusConflict || errCode(data) != codeQueueModeMismatch {
			t.Errorf("URL task into a Go client's queue: %d %s", status, data)
		}
		status, data = e.call("DELETE", "/v1/queues/gojobs", nil, nil)
		if status != http.StatusConflict || errCode(data) != codeQueueNotEmpty {
			t.Errorf("delete of a full queue: %d %s", status, data)
		}
		e.must(http.StatusNoContent, "DELETE", "/v1/queues/gojobs?force=true", nil, nil)
		e.must(http.StatusNoContent, "DELETE", "/v1/queues/mail", nil, nil)
		status, data = e.call("GET", "/v1/queues/mail", nil, nil)
		if status != http.StatusNotFound || errCode(data) != codeQueueNotFound {
			t.Errorf("deleted queue: %d %s", status, data)
		}
		status, data = e.call("POST", "/v1/queues/nope/pause", nil, nil)
		if status != http.StatusNotFound || errCode(data) != codeQueueNotFound {
			t.Errorf("pause of an unknown queue: %d %s", status, data)
		}
	})
}

func TestSchedules(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		changed := 0
		e = newEnv(t, "embedded", func(o *Options) { o.SchedulesChanged = func() { changed++ } })
		body := map[string]any{"cron": "*/5 * * * *", "queue": "reports",
			"task": map[string]any{"type": "report:daily", "payload": map[string]any{"k": 1}, "options": map[string]any{"max_retry": 2}}}
		var s model.Schedule
		e.must(http.StatusCreated, "POST", "/v1/schedules", body, &s)
		if s.ID == "" || s.TaskType != "report:daily" || string(s.Payload) != `{"k":1}` || changed != 1 {
			t.Fatalf("schedule %+v (changed %d)", s, changed)
		}
		var again model.Schedule
		e.must(http.StatusOK, "POST", "/v1/schedules", body, &again)
		if again.ID != s.ID {
			t.Errorf("same schedule twice got IDs %s and %s", s.ID, again.ID)
		}
		// LoadSchedules gives what the service registers, under the same ID.
		list, err := model.LoadSchedules(context.Background(), e.meta)
		if err != nil || len(list) != 1 {
			t.Fatalf("LoadSchedules = %v, %v", list, err)
		}
		task, opts, err := list[0].Build()
		if err != nil {
			t.Fatal(err)
		}
		id, err := htq.NewScheduler(e.st, nil).Register(list[0].Cron, task, opts...)
		if err != nil || id != s.ID {
			t.Errorf("Register = %s, %v; want ID %s", id, err, s.ID)
		}
		status, data := e.call("POST", "/v1/schedules", map[string]any{"cron": "61 * * * *", "queue": "reports", "task": map[string]any{"type": "x"}}, nil)
		if status != http.StatusBadRequest || !strings.Contains(string(data), "minute") {
			t.Errorf("bad cron: %d %s", status, data)
		}
		var all struct{ Schedules []model.Schedule }
		e.must(http.StatusOK, "GET", "/v1/schedules", nil, &all)
		if len(all.Schedules) != 1 {
			t.Errorf("list %+v", all)
		}
		e.must(http.StatusOK, "GET", "/v1/schedules/"+s.ID, nil, nil)
		e.must(http.StatusNoContent, "DELETE", "/v1/schedules/"+s.ID, nil, nil)
		status, data = e.call("DELETE", "/v1/schedules/"+s.ID, nil, nil)
		if status != http.StatusNotFound || errCode(data) != codeNotFound || changed != 2 {
			t.Errorf("second delete: %d %s (changed %d)", status, data, changed)
		}
	})
}

// TestBadRequests: each bad request gets its documented status and code,
// and writes no task.
func TestBadRequests(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, func(o *Options) {
				o.MaxBodyBytes = 16 << 10
				o.CheckTarget = func(ctx context.Context, u *url.URL) error {
					if u.Hostname() == "blocked.example" {
						return fmt.Errorf("target %s is private", u.Host)
					}
					return nil
				}
			})
			e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "pullq", "mode": "pull"}, nil)
			e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "urlq", "mode": "real_time"}, nil)
			big := strings.Repeat("x", 32<<10)
			past := time.Now().Add(-time.Hour).Format(time.RFC3339)
			for _, tc := range []struct {
				name, method, path, auth string
				body                     any
				status                   int
				code                     string
			}{
				{"no token", "POST", "/v1/queues/pullq/tasks", "-", `{"type":"a"}`, 401, codeUnauthorized},
				{"wrong token", "POST", "/v1/queues/pullq/tasks", "Bearer nope", `{"type":"a"}`, 401, codeUnauthorized},
				{"basic auth", "POST", "/v1/queues/pullq/tasks", "Basic " + testToken, `{"type":"a"}`, 401, codeUnauthorized},
				{"bad JSON", "POST", "/v1/queues/pullq/tasks", "", `{"type":`, 400, codeInvalidArgument},
				{"not JSON", "POST", "/v1/queues/pullq/tasks", "", `type=a`, 400, codeInvalidArgument},
				{"empty body", "POST", "/v1/queues/pullq/tasks", "", ``, 400, codeInvalidArgument},
				{"trailing data", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a"} {}`, 400, codeInvalidArgument},
				{"unknown field", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","priority":1}`, 400, codeInvalidArgument},
				{"unknown option", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"retries":1}}`, 400, codeInvalidArgument},
				{"wrong type", "POST", "/v1/queues/pullq/tasks", "", `{"type":5}`, 400, codeInvalidArgument},
				{"wrong option type", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"max_retry":"3"}}`, 400, codeInvalidArgument},
				{"missing type", "POST", "/v1/queues/pullq/tasks", "", `{"payload":{"a":1}}`, 400, codeInvalidArgument},
				{"nothing", "POST", "/v1/queues/pullq/tasks", "", `{}`, 400, codeInvalidArgument},
				{"typed and URL", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","url":"http://x/"}`, 400, codeInvalidArgument},
				{"bad base64", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","payload_base64":"%%"}`, 400, codeInvalidArgument},
				{"bad delay", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"delay":"soon"}}`, 400, codeInvalidArgument},
				{"negative delay", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"delay":-5}}`, 400, codeInvalidArgument},
				{"bad time", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"process_at":"2026-13-01 10:00"}}`, 400, codeInvalidArgument},
				{"delay and process_at", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"delay":1,"process_at":"` + past + `"}}`, 400, codeInvalidArgument},
				{"past deadline", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"deadline":"` + past + `"}}`, 400, codeInvalidArgument},
				{"negative max_retry", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"max_retry":-1}}`, 400, codeInvalidArgument},
				{"short unique", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","options":{"unique":"10ms"}}`, 400, codeInvalidArgument},
				{"bad queue name", "POST", "/v1/queues/a:b/tasks", "", `{"type":"a"}`, 400, codeInvalidArgument},
				{"oversized body", "POST", "/v1/queues/pullq/tasks", "", `{"type":"a","payload":"` + big + `"}`, 413, codePayloadTooLarge},
				{"oversized batch", "POST", "/v1/queues/pullq/tasks/batch", "", `{"tasks":[{"type":"a","payload":"` + big + `"}]}`, 413, codePayloadTooLarge},
				{"URL task into pull queue", "POST", "/v1/queues/pullq/tasks", "", `{"url":"http://example.com/"}`, 409, codeQueueModeMismatch},
				{"typed task into URL queue", "POST", "/v1/queues/urlq/tasks", "", `{"type":"a"}`, 409, codeQueueModeMismatch},
				{"bad scheme", "POST", "/v1/queues/urlq/tasks", "", `{"url":"ftp://example.com/"}`, 400, codeInvalidArgument},
				{"bad method", "POST", "/v1/queues/urlq/tasks", "", `{"url":"http://example.com/","method":"TRACE"}`, 400, codeInvalidArgument},
				{"reserved header", "POST", "/v1/queues/urlq/tasks", "", `{"url":"http://example.com/","headers":{"Host":"x"}}`, 400, codeInvalidArgument},
				{"variable outside variable queue", "POST", "/v1/queues/urlq/tasks", "", `{"url":"http://example.com/","variable":{"interval_s":1}}`, 400, codeInvalidArgument},
				{"disallowed target", "POST", "/v1/queues/urlq/tasks", "", `{"url":"http://blocked.example/"}`, 422, codeTargetNotAllowed},
				{"disallowed target in new queue", "POST", "/v1/queues/newq/tasks", "", `{"url":"http://blocked.example/"}`, 422, codeTargetNotAllowed},
				{"bad task in new queue", "POST", "/v1/queues/newq/tasks", "", `{"url":"gopher://x/"}`, 400, codeInvalidArgument},
				{"empty batch", "POST", "/v1/queues/pullq/tasks/batch", "", `{"tasks":[]}`, 400, codeInvalidArgument},
				{"one bad task in batch", "POST", "/v1/queues/pullq/tasks/batch", "", `{"tasks":[{"type":"a"},{"type":"b","options":{"max_retry":-1}}]}`, 400, codeInvalidArgument},
				{"mixed batch", "POST", "/v1/queues/pullq/tasks/batch", "", `{"tasks":[{"type":"a"},{"url":"http://example.com/"}]}`, 409, codeQueueModeMismatch},
				{"unknown queue", "GET", "/v1/queues/nope/tasks", "", nil, 404, codeQueueNotFound},
				{"unknown task", "GET", "/v1/queues/pullq/tasks/nope", "", nil, 404, codeTaskNotFound},
				{"bad state", "GET", "/v1/queues/pullq/tasks?state=done", "", nil, 400, codeInvalidArgument},
				{"bad page", "GET", "/v1/queues/pullq/tasks?page=0", "", nil, 400, codeInvalidArgument},
				{"unknown route", "GET", "/v1/nothing", "", nil, 404, codeNotFound},
				{"bad mode", "POST", "/v1/queues", "", `{"name":"q2","mode":"fast"}`, 400, codeInvalidArgument},
				{"bad policy", "POST", "/v1/queues", "", `{"name":"q2","mode":"variable","stepping_time_s":10,"max_interval_s":5}`, 400, codeInvalidArgument},
				{"bad cron", "POST", "/v1/schedules", "", `{"cron":"every day","queue":"pullq","task":{"type":"a"}}`, 400, codeInvalidArgument},
				{"stale schedule option", "POST", "/v1/schedules", "", `{"cron":"@daily","queue":"pullq","task":{"type":"a","options":{"task_id":"x"}}}`, 400, codeInvalidArgument},
				{"fetch from URL queue", "POST", "/v1/fetch", "", `{"queues":["urlq"]}`, 409, codeQueueModeMismatch},
				{"fetch too long", "POST", "/v1/fetch", "", `{"queues":["pullq"],"wait_s":31}`, 400, codeInvalidArgument},
				{"fetch no queues", "POST", "/v1/fetch", "", `{"queues":[]}`, 400, codeInvalidArgument},
				{"ack without token", "POST", "/v1/queues/pullq/tasks/x/ack", "", `{}`, 400, codeInvalidArgument},
				{"ack of a lost lease", "POST", "/v1/queues/pullq/tasks/x/ack", "", `{"token":"nope"}`, 409, codeLeaseLost},
			} {
				t.Run(tc.name, func(t *testing.T) {
					auth := "Bearer " + testToken
					switch tc.auth {
					case "-":
						auth = ""
					case "":
					default:
						auth = tc.auth
					}
					status, data := e.callAuth(tc.method, tc.path, auth, tc.body, nil)
					if status != tc.status || errCode(data) != tc.code {
						t.Errorf("got %d %s; want %d %s", status, data, tc.status, tc.code)
					}
					if !strings.Contains(string(data), `"message":"`) {
						t.Errorf("no message in %s", data)
					}
				})
			}
			for _, q := range []string{"pullq", "urlq", "newq", "q2"} {
				if n := e.queueSize(q); n != 0 {
					t.Errorf("queue %s holds %d tasks after bad requests", q, n)
				}
			}
			var list struct{ Queues []*model.QueueView }
			e.must(http.StatusOK, "GET", "/v1/queues", nil, &list)
			if len(list.Queues) != 2 {
				for _, q := range list.Queues {
					t.Errorf("queue %s exists", q.Name)
				}
			}
			var schedules struct{ Schedules []model.Schedule }
			if e.must(http.StatusOK, "GET", "/v1/schedules", nil, &schedules); len(schedules.Schedules) != 0 {
				t.Errorf("schedules written: %+v", schedules)
			}
		})
	}
}

// TestEnqueueOutlivesItsRequest checks that a task whose request has been
// read is stored even when the request's context ends before the storage
// call (the client went away): the write is not abandoned halfway, and
// the task is stored as if the client had waited for the answer
// (model.EnqueueContext). One task by /v1, a batch of two and one by HTQ's
// addTask, on each backend.
func TestEnqueueOutlivesItsRequest(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, nil)
			e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "gone", "mode": "pull"}, nil)
			if status, body, _ := e.form("/api/addQueue", true, map[string]string{"app_key": "key", "app_token": "tok", "queue_name": "gone-htq", "type": "real_time"}, nil); status != http.StatusOK || !strings.Contains(string(body), `"error_code":0`) {
				t.Fatalf("addQueue: %d %s", status, body)
			}
			var form bytes.Buffer
			mw := multipart.NewWriter(&form)
			for _, kv := range [][2]string{{"app_key", "key"}, {"app_token", "tok"}, {"queue_name", "gone-htq"},
				{"url", "http://example.com/x"}, {"method", "POST"}} {
				_ = mw.WriteField(kv[0], kv[1])
			}
			_ = mw.Close()
			ended, cancel := context.WithCancel(context.Background())
			cancel()
			for _, c := range []struct {
				queue, path, ctype, body string
				status, stored           int
			}{
				{"gone", "/v1/queues/gone/tasks", "application/json", `{"type":"t","payload":{"a":1}}`, http.StatusCreated, 1},
				{"gone", "/v1/queues/gone/tasks/batch", "application/json", `{"tasks":[{"type":"t"},{"type":"t"}]}`, http.StatusCreated, 3},
				{"gone-htq", "/api/addTask", mw.FormDataContentType(), form.String(), http.StatusOK, 1},
			} {
				r := httptest.NewRequestWithContext(ended, "POST", c.path, strings.NewReader(c.body))
				r.Header.Set("Content-Type", c.ctype)
				r.Header.Set("Authorization", "Bearer "+testToken)
				w := httptest.NewRecorder()
				e.h.ServeHTTP(w, r)
				if w.Code != c.status || strings.Contains(w.Body.String(), `"error_code":1`) {
					t.Errorf("%s with its context ended: %d %s, want %d", c.path, w.Code, w.Body, c.status)
				}
				if n := e.queueSize(c.queue); n != c.stored {
					t.Errorf("%s with its context ended: queue %s holds %d tasks, want %d", c.path, c.queue, n, c.stored)
				}
			}
		})
	}
}
