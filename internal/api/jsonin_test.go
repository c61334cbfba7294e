package api

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// TestEmptyArrayForObject: PHP's json_encode writes an empty array as [],
// so HTQ clients in PHP send [] where they have no headers, options or
// data. Every decoder takes it as the empty object: the enqueue's fast
// path and encoding/json path (the \u0062 escape sends a body to the
// latter), the batch, the schedule, and HTQ's addTask form.
func TestEmptyArrayForObject(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "hooks", "mode": "timing"}, nil)
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "scan", "mode": "variable"}, nil)
		for _, tc := range []struct{ path, body, wantType, wantPayload string }{
			{"/v1/queues/jobs/tasks", `{"type":"ab","payload":{"x":1},"options":[]}`, "ab", `{"x":1}`},
			{"/v1/queues/jobs/tasks", `{"type":"a\u0062","payload":{"x":1},"options":[ ]}`, "ab", `{"x":1}`},
			{"/v1/queues/jobs/tasks", `{"type":"ab","payload":[],"options":[]}`, "ab", `[]`},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/h","headers":[],"options":[]}`, "htq:url", `{"url":"http://example.com/h","method":"POST"}`},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/\u0068","headers":[],"options":[]}`, "htq:url", `{"url":"http://example.com/h","method":"POST"}`},
			{"/v1/queues/scan/tasks", `{"url":"http://example.com/v","variable":[],"headers":[]}`, "htq:url", `{"url":"http://example.com/v","method":"POST","variable":{"interval_s":0}}`},
		} {
			var got enqueueResponse
			e.must(http.StatusCreated, "POST", tc.path, tc.body, &got)
			var task taskJSON
			e.must(http.StatusOK, "GET", tc.path+"/"+got.ID, nil, &task)
			if task.Type != tc.wantType || string(task.Payload) != tc.wantPayload {
				t.Errorf("%s: stored %s %s; want %s %s", tc.body, task.Type, task.Payload, tc.wantType, tc.wantPayload)
			}
		}
		var batch batchResponse
		for _, body := range []string{
			`{"tasks":[{"type":"b","options":[]},{"type":"b","options":{"max_retry":2}}]}`,
			`{"tasks":[{"type":"\u0062","options":[]},{"type":"b","options":{"max_retry":2}}]}`,
		} {
			e.must(http.StatusCreated, "POST", "/v1/queues/jobs/tasks/batch", body, &batch)
			if batch.Enqueued != 2 {
				t.Errorf("batch %s: %+v", body, batch)
			}
		}
		e.must(http.StatusCreated, "POST", "/v1/schedules", `{"cron":"@daily","queue":"hooks","task":{"url":"http://example.com/s","headers":[],"options":[]}}`, nil)

		// HTQ's addTask: header=[] and data=[] are no headers and no data.
		status, data, _ := e.form("/api/addTask", false, creds(map[string]string{
			"queue_name": "php", "url": "http://example.com/p", "method": "POST", "header": "[]", "data": "[]",
		}), nil)
		if status != http.StatusOK || string(data) != `{"error_code":0,"message":"添加成功"}` {
			t.Errorf("addTask with header=[] data=[]: %d %s", status, data)
		}
		var list taskList
		e.must(http.StatusOK, "GET", "/v1/queues/php/tasks", nil, &list)
		if len(list.Tasks) != 1 || string(list.Tasks[0].Payload) != `{"url":"http://example.com/p","method":"POST"}` {
			t.Errorf("addTask stored %+v", list.Tasks)
		}
	})
}

// goType matches what a Go type looks like in a message.
var goType = regexp.MustCompile(`map\[|\[\]|interface \{|\b(int|uint|float)(8|16|32|64)?\b|\b(api|model|base|htq|time|json|http)\.[A-Z]|\b[A-Z]\w*\.[a-z]|Go (value|struct)|UnmarshalJSON|json: `)

// TestJSONErrorsNameNoGoType: a body of the wrong shape gets 400 with a
// message that names the field and the JSON wanted, never a Go type, on
// the fast path and the encoding/json path, in the native API and in
// HTQ's forms.
func TestJSONErrorsNameNoGoType(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "hooks", "mode": "timing"}, nil)
		for _, tc := range []struct{ path, body, want string }{
			{"/v1/queues/jobs/tasks", `{"type":"a","options":"x"}`, "field options: want an object, got a string"},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":[1]}`, "field options: want an object, got an array"},
			{"/v1/queues/jobs/tasks", `{"type":"\u0061","options":[1]}`, "field options: want an object, got an array"},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":{"max_retry":"3"}}`, "field options.max_retry: want a whole number in range, got a string"},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":{"max_retry":1.5}}`, "field options.max_retry: want a whole number in range, got 1.5"},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":{"delay":"soon"}}`, `field options.delay: want a duration (a string such as "90s" or "1m30s", or a number of seconds), got the string "soon"`},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":{"delay":true}}`, "field options.delay: want a duration"},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":{"process_at":5}}`, `field options.process_at: want a time in RFC 3339 (such as "2026-11-29T10:00:00Z"), got 5`},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":{"deadline":"tomorrow"}}`, `field options.deadline: want a time in RFC 3339`},
			{"/v1/queues/jobs/tasks", `{"type":"a","options":{"retries":1}}`, `options: unknown field "retries"`},
			{"/v1/queues/jobs/tasks", `{"type":5}`, "field type: want a string, got a number"},
			{"/v1/queues/jobs/tasks", `[]`, "request body: want an object, got an array"},
			{"/v1/queues/jobs/tasks", `"x"`, "request body: want an object, got a string"},
			{"/v1/queues/jobs/tasks", `{"type":"a","payload_base64":7}`, "field payload_base64: want a string, got a number"},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/","headers":{"A":1}}`, "field headers.A: want a string, got 1"},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/","headers":"A: 1"}`, "field headers: want an object, got a string"},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/","headers":["A"]}`, "field headers: want an object, got an array"},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/","variable":{"interval_s":"1"}}`, "field variable.interval_s: want a number, got a string"},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/","variable":{"x":1}}`, `variable: unknown field "x"`},
			{"/v1/queues/hooks/tasks", `{"url":"http://example.com/","timeout_ms":"5"}`, "field timeout_ms: want a whole number in range, got a string"},
			{"/v1/queues/jobs/tasks/batch", `{"tasks":{"type":"a"}}`, "field tasks: want an array, got an object"},
			{"/v1/queues/jobs/tasks/batch", `{"tasks":[{"type":"a","options":{"unique":[]}}]}`, "field tasks.options.unique: want a duration"},
			{"/v1/queues", `{"name":"q","max_concurrency":"4"}`, "field max_concurrency: want a whole number in range, got a string"},
			{"/v1/queues", `{"name":"q","retry_4xx":"yes"}`, "field retry_4xx: want true or false, got a string"},
			{"/v1/queues", `{"name":"q","rate_limit":"fast"}`, "field rate_limit: want a number, got a string"},
			{"/v1/fetch", `{"queues":"jobs"}`, "field queues: want an array, got a string"},
			{"/v1/fetch", `{"queues":[1]}`, "field queues: want a string, got a number"},
			{"/v1/schedules", `{"cron":"@daily","queue":"jobs","task":{"type":"a","options":{"timeout":{}}}}`, "field task.options.timeout: want a duration"},
			{"/v1/queues/jobs/tasks/x/heartbeat", `{"token":"t","lease_s":"60"}`, "field lease_s: want a number, got a string"},
			{"/v1/queues/jobs/tasks/x/fail", `{"token":"t","skip_retry":1}`, "field skip_retry: want true or false, got a number"},
		} {
			status, data := e.call("POST", tc.path, tc.body, nil)
			var eb errorBody
			_ = json.Unmarshal(data, &eb)
			if status != http.StatusBadRequest || eb.Error.Code != codeInvalidArgument || !strings.Contains(eb.Error.Message, tc.want) {
				t.Errorf("POST %s %s:\n got %d %s\nwant 400 invalid_argument with %q", tc.path, tc.body, status, data, tc.want)
			}
			if m := goType.FindString(eb.Error.Message); m != "" {
				t.Errorf("POST %s %s: the message names a Go type (%q): %s", tc.path, tc.body, m, eb.Error.Message)
			}
		}
		for _, tc := range []struct{ field, value, want string }{
			{"header", "[1]", "header: want a JSON object of header names and values: want an object, got an array"},
			{"header", `"x"`, "header: want a JSON object of header names and values: want an object, got a string"},
			{"header", `{"A":[1]}`, `header "A": want a string value`},
			{"data", "[1]", "data: want a JSON object: want an object, got an array"},
			{"data", "7", "data: want a JSON object: want an object, got a number"},
			{"data", "{", "data: want a JSON object: unexpected end of JSON input"},
		} {
			status, data, _ := e.form("/api/addTask", false, creds(map[string]string{
				"queue_name": "php", "url": "http://example.com/p", tc.field: tc.value,
			}), nil)
			var reply struct{ Message string }
			_ = json.Unmarshal(data, &reply)
			msg := reply.Message
			if status != http.StatusOK || !strings.HasPrefix(string(data), `{"error_code":1001,`) || !strings.Contains(msg, tc.want) {
				t.Errorf("addTask %s=%s:\n got %d %s\nwant 1001 with %q", tc.field, tc.value, status, msg, tc.want)
			}
			if m := goType.FindString(msg); m != "" {
				t.Errorf("addTask %s=%s: the message names a Go type (%q): %s", tc.field, tc.value, m, msg)
			}
		}
	})
}
