package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/htqueue/htq/internal/dispatch"
)

// badCase is one request the API must refuse with status and code,
// writing nothing.
type badCase struct {
	name, method, path string
	body               any
	status             int
	code               string
	// in, when set, must appear in the error message.
	in string
}

// expectRefused sends each case and checks its status, code and message,
// and that the answer is valid JSON.
func expectRefused(t *testing.T, e *env, cases []badCase) {
	t.Helper()
	for _, tc := range cases {
		status, data := e.call(tc.method, tc.path, tc.body, nil)
		var b errorBody
		if err := json.Unmarshal(data, &b); err != nil {
			t.Errorf("%s: answer is not JSON: %v: %q", tc.name, err, data)
			continue
		}
		if status != tc.status || b.Error.Code != tc.code || !strings.Contains(b.Error.Message, tc.in) {
			t.Errorf("%s: got %d %s; want %d %s with %q", tc.name, status, data, tc.status, tc.code, tc.in)
		}
	}
}

// guardEnv is an env whose target check is htq serve's dispatcher guard
// (only public addresses).
func guardEnv(t *testing.T, backend string) *env {
	g, err := dispatch.NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(t, backend, func(o *Options) {
		o.CheckTarget = func(_ context.Context, u *url.URL) error { return g.CheckURL(u) }
	})
}

// A grouped task would wait for an aggregator htq serve does not run, so
// options.group is refused on every way in, and nothing is written: no
// task, no queue, no schedule.
func TestGroupRefusedOverHTTP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		const why = "Go-library feature"
		expectRefused(t, e, []badCase{
			{"typed", "POST", "/v1/queues/g1/tasks", `{"type":"a","options":{"group":"g"}}`, 400, codeInvalidArgument, why},
			{"URL", "POST", "/v1/queues/g2/tasks", `{"url":"http://example.com/","options":{"group":"g"}}`, 400, codeInvalidArgument, why},
			{"batch", "POST", "/v1/queues/g3/tasks/batch", `{"tasks":[{"type":"a"},{"type":"a","options":{"group":"g"}}]}`, 400, codeInvalidArgument, why},
			{"schedule", "POST", "/v1/schedules", `{"cron":"@daily","queue":"g4","task":{"type":"a","options":{"group":"g"}}}`, 400, codeInvalidArgument, why},
		})
		var list struct{ Queues []*queueJSON }
		e.must(http.StatusOK, "GET", "/v1/queues", nil, &list)
		for _, q := range list.Queues {
			t.Errorf("queue %s was created (size %d)", q.Name, e.queueSize(q.Name))
		}
		var schedules struct{ Schedules []json.RawMessage }
		if e.must(http.StatusOK, "GET", "/v1/schedules", nil, &schedules); len(schedules.Schedules) != 0 {
			t.Errorf("schedules written: %s", schedules.Schedules)
		}
	})
}

// Every field the URL worker would refuse at the first dispatch is
// refused at enqueue, with 400 for a malformed request and 422 only for a
// well-formed target the guard refuses; nothing is written.
func TestURLTaskRefusedAtEnqueue(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := guardEnv(t, backend)
			e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "u", "mode": "real_time"}, nil)
			expectRefused(t, e, []badCase{
				{"timeout above 30 min", "POST", "/v1/queues/u/tasks", `{"url":"http://example.com/","timeout_ms":1800001}`, 400, codeInvalidArgument, "timeout_ms 1800001"},
				{"negative timeout", "POST", "/v1/queues/u/tasks", `{"url":"http://example.com/","timeout_ms":-1}`, 400, codeInvalidArgument, "timeout_ms"},
				{"port 0", "POST", "/v1/queues/u/tasks", `{"url":"http://127.0.0.1:0/"}`, 400, codeInvalidArgument, "port"},
				{"port 70000", "POST", "/v1/queues/u/tasks", `{"url":"http://example.com:70000/"}`, 400, codeInvalidArgument, "port"},
				{"control byte in a header", "POST", "/v1/queues/u/tasks", `{"url":"http://example.com/","headers":{"X-A":"a\u0001b"}}`, 400, codeInvalidArgument, "X-A"},
				{"Expect header", "POST", "/v1/queues/u/tasks", `{"url":"http://example.com/","headers":{"Expect":"100-continue"}}`, 400, codeInvalidArgument, "Expect"},
				{"loopback target", "POST", "/v1/queues/u/tasks", `{"url":"http://127.0.0.1:8080/"}`, 422, codeTargetNotAllowed, "loopback"},
				{"in a batch", "POST", "/v1/queues/u/tasks/batch", `{"tasks":[{"url":"http://example.com/"},{"url":"http://example.com/","timeout_ms":3600000}]}`, 400, codeInvalidArgument, "task 1"},
				{"queue dispatch timeout", "POST", "/v1/queues", `{"name":"v","mode":"real_time","dispatch_timeout_ms":3600000}`, 400, codeInvalidArgument, "dispatch_timeout_ms"},
			})
			if n := e.queueSize("u"); n != 0 {
				t.Errorf("%d tasks written", n)
			}
			e.must(http.StatusCreated, "POST", "/v1/queues/u/tasks", `{"url":"http://example.com/","timeout_ms":1800000,"headers":{"X-A":"tab\tok"}}`, nil)
		})
	}
}
