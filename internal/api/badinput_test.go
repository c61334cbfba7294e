package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
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
