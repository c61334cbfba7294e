package api

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// strictDoc loads the OpenAPI document with every object schema that
// lists its properties closed (additionalProperties false), so that a
// field the server sends and the document does not describe fails the
// validation. The document itself leaves them open, for clients.
func strictDoc(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*openapi3.Schema]bool{}
	var closeSchema func(s *openapi3.SchemaRef)
	closeSchema = func(s *openapi3.SchemaRef) {
		if s == nil || s.Value == nil || seen[s.Value] {
			return
		}
		v := s.Value
		seen[v] = true
		if v.Type.Is("object") && len(v.Properties) > 0 && v.AdditionalProperties.Has == nil && v.AdditionalProperties.Schema == nil {
			no := false
			v.AdditionalProperties.Has = &no
		}
		for _, p := range v.Properties {
			closeSchema(p)
		}
		closeSchema(v.Items)
		closeSchema(v.AdditionalProperties.Schema)
		for _, l := range [][]*openapi3.SchemaRef{v.AllOf, v.OneOf, v.AnyOf} {
			for _, x := range l {
				closeSchema(x)
			}
		}
	}
	for _, s := range doc.Components.Schemas {
		closeSchema(s)
	}
	doc.Servers = nil // match the test server's address
	return doc
}

// validator checks each call's request and answer against the document.
type validator struct {
	e      *env
	router routers.Router
	// covered counts the operations whose answers were checked.
	covered map[string]int
}

func newValidator(t *testing.T, e *env) *validator {
	doc := strictDoc(t)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &validator{e: e, router: router, covered: map[string]int{}}
}

// call sends a request with the token and checks it and its answer
// against the document; the answer's status must be want.
func (v *validator) call(want int, method, path string, body any, out any) []byte {
	t := v.e.t
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, v.e.srv.URL+path, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in the document: %v", method, path, err)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true, SkipSettingDefaults: true}}
	if want < 400 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s: the request does not match the document: %s", method, path, short(err))
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	resp, err := v.e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %.500s", method, path, resp.StatusCode, want, data)
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: in.Options}
	rin.SetBodyBytes(data)
	if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
		t.Errorf("%s %s → %d: the answer does not match the document: %s\n%s", method, path, resp.StatusCode, short(err), data)
	}
	v.covered[route.Operation.OperationID]++
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return data
}

// short is a validation error without the schema and value it prints.
func short(err error) string {
	var b strings.Builder
	for _, line := range strings.Split(err.Error(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "Schema:") || strings.HasPrefix(strings.TrimSpace(line), "Value:") {
			break
		}
		b.WriteString(line + " ")
	}
	return b.String()
}

// TestResponsesMatchOpenAPI: the answers of the main endpoints, on each
// backend, are what the OpenAPI document says (its object schemas closed:
// no field the document does not describe), the requests that produce
// them are valid by the document too, and every status they answer is
// one the document lists.
func TestResponsesMatchOpenAPI(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) { testResponsesMatchOpenAPI(t, backend) })
	}
}

func testResponsesMatchOpenAPI(t *testing.T, backend string) {
	{
		e := newEnv(t, backend, func(o *Options) { o.CompletedRetention = time.Hour })
		v := newValidator(t, e)
		const (
			ok, created, noContent, multi = http.StatusOK, http.StatusCreated, http.StatusNoContent, http.StatusMultiStatus
		)
		v.call(created, "POST", "/v1/queues", map[string]any{"name": "mail", "mode": "real_time", "max_concurrency": 4, "max_attempts": 5, "completed_retention_s": 60}, nil)
		v.call(created, "POST", "/v1/queues", map[string]any{"name": "scan", "mode": "variable", "stepping_time_s": 30}, nil)
		v.call(ok, "GET", "/v1/queues", nil, nil)
		v.call(ok, "GET", "/v1/queues/mail", nil, nil)
		v.call(ok, "PATCH", "/v1/queues/mail", map[string]any{"rate_limit": 50, "paused": true}, nil)
		v.call(noContent, "POST", "/v1/queues/mail/resume", nil, nil)
		v.call(noContent, "POST", "/v1/queues/mail/pause", nil, nil)

		// Typed tasks: a JSON payload, none, bytes that are not JSON.
		v.call(created, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "email:send", "payload": map[string]string{"to": "a@b.c"}, "options": map[string]any{"task_id": "j1", "max_retry": 3}}, nil)
		v.call(created, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "ping", "options": map[string]any{"task_id": "j2"}}, nil)
		v.call(created, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "blob", "payload_base64": "AAEC", "options": map[string]any{"task_id": "j3"}}, nil)
		v.call(created, "POST", "/v1/queues/later/tasks", map[string]any{"type": "t", "options": map[string]any{"delay": "10m", "task_id": "l1", "deadline": "2099-01-01T00:00:00Z"}}, nil)
		v.call(created, "POST", "/v1/queues/jobs/tasks/batch", map[string]any{"tasks": []map[string]any{{"type": "resize", "payload": map[string]int{"id": 1}}, {"type": "resize", "options": map[string]any{"task_id": "r2"}}}}, nil)
		v.call(multi, "POST", "/v1/queues/jobs/tasks/batch", map[string]any{"tasks": []map[string]any{{"type": "resize"}, {"type": "resize", "payload": map[string]int{"id": 2}, "options": map[string]any{"task_id": "r2"}}}}, nil)
		// A URL task, and one whose body is bytes.
		v.call(created, "POST", "/v1/queues/mail/tasks", map[string]any{"url": "https://example.com/hook", "headers": map[string]string{"X-A": "1"}, "body": "hi", "timeout_ms": 2000, "options": map[string]any{"task_id": "u1"}}, nil)
		v.call(created, "POST", "/v1/queues/scan/tasks", map[string]any{"url": "https://example.com/scan", "method": "GET", "body_base64": "AAEC", "options": map[string]any{"task_id": "v1"}}, nil)
		for _, id := range []string{"jobs/tasks/j1", "jobs/tasks/j2", "jobs/tasks/j3", "later/tasks/l1", "mail/tasks/u1", "scan/tasks/v1"} {
			v.call(ok, "GET", "/v1/queues/"+id, nil, nil)
		}
		v.call(ok, "GET", "/v1/queues/jobs/tasks?state=pending&page_size=2", nil, nil)
		v.call(ok, "GET", "/v1/queues/later/tasks?state=scheduled", nil, nil)

		// Pull workers: fetch, heartbeat, ack with a result, fail.
		var got fetchResponse
		v.call(ok, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "count": 3, "lease_s": 60, "worker_id": "w1"}, &got)
		if len(got.Tasks) != 3 {
			t.Fatalf("fetched %d tasks", len(got.Tasks))
		}
		tok := map[string]string{}
		for _, lt := range got.Tasks {
			tok[lt.ID] = lt.Token
		}
		v.call(ok, "POST", "/v1/queues/jobs/tasks/j1/heartbeat", map[string]any{"token": tok["j1"], "lease_s": 30}, nil)
		v.call(noContent, "POST", "/v1/queues/jobs/tasks/j1/ack", map[string]any{"token": tok["j1"], "result": map[string]string{"url": "s3://x"}}, nil)
		v.call(noContent, "POST", "/v1/queues/jobs/tasks/j2/ack", map[string]any{"token": tok["j2"], "result_base64": "AAEC"}, nil)
		v.call(ok, "POST", "/v1/queues/jobs/tasks/j3/fail", map[string]any{"token": tok["j3"], "error": "boom", "retry_in_s": 60}, nil)
		v.call(ok, "GET", "/v1/queues/jobs/tasks/j1", nil, nil)
		v.call(ok, "GET", "/v1/queues/jobs/tasks/j2", nil, nil)
		v.call(ok, "GET", "/v1/queues/jobs/tasks?state=completed", nil, nil)
		v.call(ok, "GET", "/v1/queues/jobs/tasks?state=retry", nil, nil)
		v.call(ok, "POST", "/v1/fetch", map[string]any{"queues": []string{"empty"}}, nil)
		v.call(http.StatusConflict, "POST", "/v1/queues/jobs/tasks/j1/ack", map[string]any{"token": tok["j1"]}, nil)

		// Task management.
		v.call(noContent, "POST", "/v1/queues/jobs/tasks/j3/run", nil, nil)
		v.call(noContent, "POST", "/v1/queues/jobs/tasks/j3/archive", nil, nil)
		v.call(ok, "GET", "/v1/queues/jobs/tasks?state=archived", nil, nil)
		v.call(noContent, "DELETE", "/v1/queues/jobs/tasks/j3", nil, nil)
		v.call(http.StatusConflict, "POST", "/v1/queues/jobs/tasks/r2/cancel", nil, nil)
		v.call(http.StatusConflict, "POST", "/v1/queues/jobs/tasks/r2/run", nil, nil)

		// Schedules, with and without a payload.
		var s struct{ ID string }
		v.call(created, "POST", "/v1/schedules", map[string]any{"cron": "*/5 * * * *", "queue": "reports", "task": map[string]any{"type": "report", "payload": map[string]int{"k": 1}}}, &s)
		v.call(ok, "POST", "/v1/schedules", map[string]any{"cron": "*/5 * * * *", "queue": "reports", "task": map[string]any{"type": "report", "payload": map[string]int{"k": 1}}}, nil)
		var bare struct{ ID string }
		v.call(created, "POST", "/v1/schedules", map[string]any{"cron": "@daily", "queue": "reports", "task": map[string]any{"type": "tick"}}, &bare)
		v.call(created, "POST", "/v1/schedules", map[string]any{"cron": "@every 1h", "queue": "mail", "task": map[string]any{"url": "https://example.com/cron"}}, nil)
		v.call(ok, "GET", "/v1/schedules", nil, nil)
		v.call(ok, "GET", "/v1/schedules/"+bare.ID, nil, nil)
		v.call(noContent, "DELETE", "/v1/schedules/"+s.ID, nil, nil)

		// Workflows: a pull task whose dependency wrote a result, then a
		// cancel; refusals.
		v.call(created, "POST", "/v1/workflows", map[string]any{"id": "wf1", "retention": "1h", "tasks": []map[string]any{
			{"id": "a", "queue": "wfq", "type": "step", "payload": map[string]int{"n": 1}},
			{"id": "b", "queue": "wfq", "type": "step", "depends_on": []string{"a"}, "on_dependency_failure": "run", "options": map[string]any{"max_retry": 2}},
			{"id": "c", "queue": "wfq", "type": "step", "depends_on": []string{"b"}},
		}}, nil)
		v.call(ok, "GET", "/v1/queues/wfq/tasks?state=waiting", nil, nil)
		v.call(ok, "POST", "/v1/fetch", map[string]any{"queues": []string{"wfq"}}, &got)
		v.call(noContent, "POST", "/v1/queues/wfq/tasks/"+got.Tasks[0].ID+"/ack", map[string]any{"token": got.Tasks[0].Token, "result": map[string]int{"x": 1}}, nil)
		v.call(ok, "POST", "/v1/fetch", map[string]any{"queues": []string{"wfq"}}, &got)
		if len(got.Tasks) != 1 || got.Tasks[0].Workflow == nil || len(got.Tasks[0].Workflow.Dependencies) != 1 {
			t.Fatalf("fetched workflow task %+v", got.Tasks)
		}
		v.call(ok, "GET", "/v1/workflows/wf1", nil, nil)
		v.call(ok, "GET", "/v1/queues/wfq/tasks/wf1.a", nil, nil)
		v.call(ok, "POST", "/v1/workflows/wf1/cancel", nil, nil)
		v.call(http.StatusBadRequest, "POST", "/v1/workflows", map[string]any{"tasks": []map[string]any{
			{"id": "a", "queue": "wfq", "type": "t", "depends_on": []string{"b"}}, {"id": "b", "queue": "wfq", "type": "t", "depends_on": []string{"a"}}}}, nil)
		v.call(http.StatusNotFound, "GET", "/v1/workflows/nope", nil, nil)
		v.call(http.StatusConflict, "POST", "/v1/workflows", map[string]any{"id": "wf1", "tasks": []map[string]any{{"id": "x", "queue": "wfq", "type": "t"}}}, nil)

		// Errors.
		v.call(http.StatusBadRequest, "POST", "/v1/queues/jobs/tasks", `{"type":5}`, nil)
		v.call(http.StatusNotFound, "GET", "/v1/queues/jobs/tasks/nope", nil, nil)
		v.call(http.StatusNotFound, "GET", "/v1/queues/nope", nil, nil)
		v.call(http.StatusConflict, "POST", "/v1/queues", map[string]any{"name": "mail"}, nil)
		v.call(http.StatusConflict, "POST", "/v1/queues/mail/tasks", map[string]any{"type": "typed"}, nil)
		v.call(http.StatusConflict, "DELETE", "/v1/queues/jobs", nil, nil)
		v.call(noContent, "DELETE", "/v1/queues/jobs?force=true", nil, nil)
		v.call(ok, "GET", "/v1/openapi.json", nil, nil)

		for _, op := range []string{"createQueue", "listQueues", "getQueue", "updateQueue", "pauseQueue", "resumeQueue", "deleteQueue",
			"enqueue", "enqueueBatch", "getTask", "listTasks", "deleteTask", "runTask", "archiveTask", "cancelTask",
			"fetchTasks", "ackTask", "failTask", "heartbeatTask", "createSchedule", "listSchedules", "getSchedule", "deleteSchedule",
			"enqueueWorkflow", "getWorkflow", "cancelWorkflow"} {
			if v.covered[op] == 0 {
				t.Errorf("operation %s was not checked", op)
			}
		}
	}
}

// TestOperationNamesDoNotClash: a generated client names a type after
// each operation (oapi-codegen: <OperationId>Response, …Params,
// …JSONRequestBody, …JSONBody); none may be the name of a schema.
func TestOperationNamesDoNotClash(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			name := strings.ToUpper(op.OperationID[:1]) + op.OperationID[1:]
			for _, suffix := range []string{"Response", "Params", "JSONRequestBody", "JSONBody", "RequestBody"} {
				if _, clash := doc.Components.Schemas[name+suffix]; clash {
					t.Errorf("operation %s: a generated client's %s%s clashes with the schema of that name", op.OperationID, name, suffix)
				}
			}
		}
	}
}
