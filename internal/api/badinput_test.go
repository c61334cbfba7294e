package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/internal/model"
	"github.com/htqueue/htq/internal/storage"
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
		var list struct{ Queues []*model.QueueView }
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

// A body that is not UTF-8 is refused (400) on every way in, the fast
// enqueue scanner's included, and nothing is written: stored, such bytes
// would make every answer that echoes them invalid JSON.
func TestInvalidUTF8Refused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "p", "mode": "pull"}, nil)
		const why = "UTF-8"
		expectRefused(t, e, []badCase{
			{"payload (fast path)", "POST", "/v1/queues/p/tasks", "{\"type\":\"a\",\"payload\":{\"s\":\"\xff\"}}", 400, codeInvalidArgument, why},
			{"payload (encoding/json)", "POST", "/v1/queues/p/tasks", "{\"type\":\"\\u0061\",\"payload\":\"a\xc3\"}", 400, codeInvalidArgument, why},
			{"payload in a batch", "POST", "/v1/queues/p/tasks/batch", "{\"tasks\":[{\"type\":\"a\"},{\"type\":\"a\",\"payload\":[\"\xed\xa0\x80\"]}]}", 400, codeInvalidArgument, why},
			{"URL task body", "POST", "/v1/queues/u/tasks", "{\"url\":\"http://example.com/\",\"body\":\"\xff\"}", 400, codeInvalidArgument, why},
			{"URL task header", "POST", "/v1/queues/u/tasks", "{\"url\":\"http://example.com/\",\"headers\":{\"X-A\":\"\xff\"}}", 400, codeInvalidArgument, why},
			{"schedule", "POST", "/v1/schedules", "{\"cron\":\"@daily\",\"queue\":\"p\",\"task\":{\"type\":\"a\",\"payload\":\"\xff\"}}", 400, codeInvalidArgument, why},
			{"queue", "POST", "/v1/queues", "{\"name\":\"q\xff\",\"mode\":\"pull\"}", 400, codeInvalidArgument, why},
		})
		if n := e.queueSize("p"); n != 0 {
			t.Errorf("%d tasks written", n)
		}
		var enq enqueueResponse
		e.must(http.StatusCreated, "POST", "/v1/queues/p/tasks", map[string]any{"type": "a"}, &enq)
		var fr fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"p"}}, &fr)
		if len(fr.Tasks) != 1 {
			t.Fatalf("fetched %d tasks", len(fr.Tasks))
		}
		path := "/v1/queues/p/tasks/" + enq.ID
		expectRefused(t, e, []badCase{
			{"ack result", "POST", path + "/ack", "{\"token\":\"" + fr.Tasks[0].Token + "\",\"result\":{\"r\":\"\xff\"}}", 400, codeInvalidArgument, why},
			{"fail message", "POST", path + "/fail", "{\"token\":\"" + fr.Tasks[0].Token + "\",\"error\":\"\xff\"}", 400, codeInvalidArgument, why},
		})
		var got taskJSON
		if e.must(http.StatusOK, "GET", path, nil, &got); got.State != "active" || got.Result != nil || got.LastError != "" {
			t.Errorf("task after refused calls: %+v", got)
		}
	})
}

// Bytes that reach the storage another way (a Go client, a Go handler's
// result or error) are answered as valid JSON: a payload or result that
// is not UTF-8 JSON as base64, text through encoding/json's replacement
// of bad bytes. A strict pull worker can parse every answer.
func TestStoredBytesAnswerValidJSON(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		payload := []byte("{\"s\":\"\xff\"}") // valid JSON syntax, not UTF-8
		client := htq.NewClient(e.st)
		var ids []string
		for range 2 {
			info, err := client.Enqueue(htq.NewTask("t\u00e9", payload), htq.Queue("p"), htq.Retention(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, info.ID)
		}
		strict := func(what string, data []byte) {
			t.Helper()
			if !utf8.Valid(data) || !json.Valid(data) {
				t.Errorf("%s: answer is not valid JSON: %q", what, data)
			}
		}
		_, data := e.call("POST", "/v1/fetch", map[string]any{"queues": []string{"p"}, "count": 2}, nil)
		strict("fetch", data)
		var fr fetchResponse
		if err := json.Unmarshal(data, &fr); err != nil || len(fr.Tasks) != 2 {
			t.Fatalf("fetch: %s, %v", data, err)
		}
		for _, lt := range fr.Tasks {
			if (lt.Payload != nil && string(lt.Payload) != "null") || lt.PayloadBase64 != base64.StdEncoding.EncodeToString(payload) {
				t.Errorf("fetched payload %s / %q", lt.Payload, lt.PayloadBase64)
			}
		}
		b := storage.BrokerOf(e.st)
		ctx := context.Background()
		byID := map[string]string{fr.Tasks[0].ID: fr.Tasks[0].Token, fr.Tasks[1].ID: fr.Tasks[1].Token}
		done := broker.LeaseRef{Queue: "p", ID: ids[0], Token: byID[ids[0]]}
		if err := b.WriteResult(ctx, done, payload); err != nil {
			t.Fatal(err)
		}
		if errs := b.Complete(ctx, []broker.LeaseRef{done}); errs[0] != nil {
			t.Fatal(errs[0])
		}
		failed := broker.LeaseRef{Queue: "p", ID: ids[1], Token: byID[ids[1]]}
		if err := b.Retry(ctx, broker.RetryParams{Lease: failed, Delay: time.Hour, ErrMsg: "bad \xff byte", IsFailure: true}); err != nil {
			t.Fatal(err)
		}
		var got taskJSON
		data = e.must(http.StatusOK, "GET", "/v1/queues/p/tasks/"+ids[0], nil, &got)
		strict("completed task", data)
		if got.Result != nil || got.ResultBase64 != base64.StdEncoding.EncodeToString(payload) || got.PayloadBase64 == "" {
			t.Errorf("completed task: %s", data)
		}
		data = e.must(http.StatusOK, "GET", "/v1/queues/p/tasks/"+ids[1], nil, &got)
		strict("retry task", data)
		if got.LastError != "bad \uFFFD byte" {
			t.Errorf("last_error %q", got.LastError)
		}
		for _, state := range []string{"completed", "retry"} {
			strict(state+" list", e.must(http.StatusOK, "GET", "/v1/queues/p/tasks?state="+state, nil, nil))
		}
	})
}

// A fetch's answer is bounded: it holds fewer tasks than asked for (at
// least one, however large) rather than more than MaxFetchBytes, and the
// tasks left out go back to the front of the queue, in order, without an
// attempt counted.
func TestFetchAnswerBounded(t *testing.T) {
	const limit = 64 << 10
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			e := newEnv(t, backend, func(o *Options) { o.MaxFetchBytes = limit })
			client := htq.NewClient(e.st)
			enqueue := func(n, size int) []string {
				var ids []string
				for i := range n {
					payload := bytes.Repeat([]byte{0xff, byte(i)}, size/2) // binary: answered as base64
					info, err := client.Enqueue(htq.NewTask("big", payload), htq.Queue("p"))
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, info.ID)
				}
				return ids
			}
			fetch := func(count int) ([]string, int) {
				var fr fetchResponse
				data := e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"p"}, "count": count}, &fr)
				var ids []string
				for _, lt := range fr.Tasks {
					ids = append(ids, lt.ID)
					if lt.Retried != 0 {
						t.Errorf("task %s: retried %d", lt.ID, lt.Retried)
					}
				}
				return ids, len(data)
			}
			// 40 KiB each, 53 KiB as base64: one per answer.
			want := enqueue(4, 40<<10)
			var got []string
			for range 4 {
				ids, n := fetch(10)
				if len(ids) != 1 {
					t.Fatalf("fetch of 40 KiB tasks answered %d tasks (%d bytes)", len(ids), n)
				}
				got = append(got, ids...)
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("fetched in the order %v, want %v", got, want)
			}
			// One task larger than the bound still comes, alone.
			want = enqueue(2, 100<<10)
			if ids, n := fetch(2); len(ids) != 1 || ids[0] != want[0] || n < 100<<10 {
				t.Errorf("fetch of 100 KiB tasks: %v, %d bytes", ids, n)
			}
			if ids, _ := fetch(2); len(ids) != 1 || ids[0] != want[1] {
				t.Errorf("second fetch of 100 KiB tasks: %v", ids)
			}
			// Small tasks all fit.
			enqueue(20, 1<<10)
			if ids, n := fetch(20); len(ids) != 20 || n > limit {
				t.Errorf("fetch of 1 KiB tasks: %d tasks, %d bytes", len(ids), n)
			}
			if n := e.queueSize("p"); n != 26 {
				t.Errorf("queue holds %d tasks, want the 26 leased", n)
			}
		})
	}
}

// Status codes: a wrong method is 405 with Allow and a JSON error on
// every path; ack, fail and heartbeat of a task the caller does not hold
// answer alike (409 lease_lost), whether the task is unknown, deleted or
// leased to someone else; readyz shows its reason only with the token.
func TestStatusCodes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, tc := range []struct {
			method, path, allow string
		}{
			{"PUT", "/v1/queues", "GET, HEAD, POST"},
			{"DELETE", "/v1/fetch", "POST"},
			{"GET", "/v1/queues/q/tasks/x/ack", "POST"},
			{"POST", "/v1/queues/q/tasks/x", "GET, HEAD, DELETE"},
			{"POST", "/healthz", "GET, HEAD"},
			{"GET", "/api/addQueue", "POST"},
		} {
			req, _ := http.NewRequest(tc.method, e.srv.URL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || errCode(data) != codeMethodNotAllowed {
				t.Errorf("%s %s: %d Allow %q %s; want 405 Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), data, tc.allow)
			}
		}
		expectRefused(t, e, []badCase{
			{"unknown path", "GET", "/nothing", nil, 404, codeNotFound, "no route"},
			{"unknown /v1 path", "PUT", "/v1/nothing", nil, 404, codeNotFound, "no route"},
			{"empty queue name", "POST", "/v1/queues//tasks", `{"type":"a"}`, 404, codeNotFound, "clean form"},
			{"dot segment", "GET", "/v1/queues/q/tasks/..", nil, 404, codeNotFound, "clean form"},
			{"/v1", "GET", "/v1", nil, 404, codeNotFound, "clean form"},
		})
		if status, _ := e.callAuth("PUT", "/v1/queues", "", nil, nil); status != http.StatusUnauthorized {
			t.Errorf("PUT /v1/queues without the token: %d, want 401", status)
		}

		// One task leased, one deleted, one never there.
		e.must(http.StatusCreated, "POST", "/v1/queues/p/tasks", map[string]any{"type": "a", "options": map[string]any{"task_id": "held"}}, nil)
		e.must(http.StatusCreated, "POST", "/v1/queues/p/tasks", map[string]any{"type": "a", "options": map[string]any{"task_id": "gone"}}, nil)
		var fr fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"p"}, "count": 2}, &fr)
		tokens := map[string]string{}
		for _, lt := range fr.Tasks {
			tokens[lt.ID] = lt.Token
		}
		if err := storage.BrokerOf(e.st).Requeue(context.Background(), broker.LeaseRef{Queue: "p", ID: "gone", Token: tokens["gone"]}); err != nil {
			t.Fatal(err)
		}
		e.must(http.StatusNoContent, "DELETE", "/v1/queues/p/tasks/gone", nil, nil)
		var cases []badCase
		for _, target := range []struct{ what, path, token string }{
			{"unknown task", "/v1/queues/p/tasks/never", "tok"},
			{"unknown queue", "/v1/queues/nope/tasks/never", "tok"},
			{"deleted task", "/v1/queues/p/tasks/gone", tokens["gone"]},
			{"another's lease", "/v1/queues/p/tasks/held", "not-the-token"},
		} {
			for _, op := range []string{"ack", "fail", "heartbeat"} {
				cases = append(cases, badCase{op + " of " + target.what, "POST", target.path + "/" + op,
					map[string]any{"token": target.token}, 409, codeLeaseLost, ""})
			}
			cases = append(cases, badCase{"ack with a result of " + target.what, "POST", target.path + "/ack",
				map[string]any{"token": target.token, "result": map[string]int{"n": 1}}, 409, codeLeaseLost, ""})
		}
		expectRefused(t, e, cases)
		var held taskJSON
		if e.must(http.StatusOK, "GET", "/v1/queues/p/tasks/held", nil, &held); held.State != "active" || held.Result != nil {
			t.Errorf("held task after refused calls: %+v", held)
		}
	})

	e := newEnv(t, "embedded", func(o *Options) {
		o.Ready = func(ctx context.Context) error { return errors.New("dial redis://10.1.2.3:6379: refused") }
	})
	for _, auth := range []string{"", "Bearer nope", "Bearer " + testToken} {
		status, data := e.callAuth("GET", "/readyz", auth, nil, nil)
		leaks := strings.Contains(string(data), "10.1.2.3")
		if status != http.StatusServiceUnavailable || errCode(data) != codeUnavailable || leaks != (auth == "Bearer "+testToken) {
			t.Errorf("readyz with %q: %d %s", auth, status, data)
		}
	}
}

// A form that does not parse fails with the endpoint's own HTQ code and
// message, and no HTQ answer allows credentials beside origin "*".
func TestHTQFailuresPerEndpoint(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for path, want := range map[string]string{
			"/api/addQueue":    `{"error_code":1001,"message":"添加失败: `,
			"/api/addTask":     `{"error_code":1001,"message":"添加失败: `,
			"/api/deleteQueue": `{"error_code":1004,"message":"删除失败: `,
			"/api/allQueue":    `{"error_code":1005,"message":"查询失败: `,
			"/api/countQueue":  `{"error_code":1005,"message":"查询失败: `,
		} {
			resp, err := e.srv.Client().Post(e.srv.URL+path, "application/x-www-form-urlencoded",
				strings.NewReader("app_key=key&app_token=tok&queue_name=%zz"))
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(string(data), want) || !json.Valid(data) {
				t.Errorf("%s with a bad form: %d %s; want %s…", path, resp.StatusCode, data, want)
			}
			if got := resp.Header.Values("Access-Control-Allow-Credentials"); len(got) != 0 || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("%s: CORS headers %v", path, resp.Header)
			}
			_, _, hdr := e.form(path, false, creds(map[string]string{"queue_name": "q"}), nil)
			if got := hdr.Values("Access-Control-Allow-Credentials"); len(got) != 0 {
				t.Errorf("%s: Access-Control-Allow-Credentials %v", path, got)
			}
		}
	})
}
