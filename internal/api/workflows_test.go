package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestWorkflowOverHTTP: a workflow of pull tasks stored over HTTP runs in
// order, each fetch answer carrying the task's workflow and its
// dependencies' outcomes and results; GET shows each task; cancel cancels
// what has not run.
func TestWorkflowOverHTTP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var wf workflowJSON
		e.must(http.StatusCreated, "POST", "/v1/workflows", map[string]any{"id": "ship-9", "tasks": []map[string]any{
			{"id": "pick", "queue": "wh", "type": "pick", "payload": map[string]int{"order": 9}},
			{"id": "label", "queue": "wh", "type": "label", "payload_base64": "AAE="},
			{"id": "pack", "queue": "wh", "type": "pack", "depends_on": []string{"pick", "label"}, "on_dependency_failure": "run",
				"options": map[string]any{"max_retry": 1, "retention": "1h"}},
			{"id": "notify", "queue": "wh", "type": "notify", "depends_on": []string{"pack"}},
		}}, &wf)
		if wf.ID != "ship-9" || wf.State != "running" || len(wf.Tasks) != 4 || wf.Tasks[2].State != "waiting" ||
			wf.Tasks[2].TaskID != "ship-9.pack" || wf.Tasks[0].State != "pending" {
			t.Fatalf("created workflow %+v", wf)
		}
		fetch := func() leasedTask {
			t.Helper()
			var got fetchResponse
			e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"wh"}, "wait_s": 5}, &got)
			if len(got.Tasks) != 1 {
				t.Fatalf("fetched %+v", got)
			}
			return got.Tasks[0]
		}
		var waiting taskList
		e.must(http.StatusOK, "GET", "/v1/queues/wh/tasks?state=waiting", nil, &waiting)
		var ids []string
		for _, w := range waiting.Tasks {
			if w.State != "waiting" || w.Workflow != "ship-9" {
				t.Fatalf("waiting task %+v", w)
			}
			ids = append(ids, w.ID)
		}
		slices.Sort(ids) // enqueued in the same millisecond: in any order
		if !slices.Equal(ids, []string{"ship-9.notify", "ship-9.pack"}) {
			t.Fatalf("waiting tasks %v", ids)
		}
		pick := fetch()
		if pick.Workflow == nil || pick.Workflow.ID != "ship-9" || pick.Workflow.Task != "pick" || len(pick.Workflow.Dependencies) != 0 {
			t.Fatalf("fetched pick %+v", pick.Workflow)
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/wh/tasks/"+pick.ID+"/ack", map[string]any{"token": pick.Token, "result": map[string]string{"bin": "A3"}}, nil)
		label := fetch()
		e.must(http.StatusOK, "POST", "/v1/queues/wh/tasks/"+label.ID+"/fail", map[string]any{"token": label.Token, "error": "printer jam", "skip_retry": true}, nil)
		pack := fetch()
		deps := pack.Workflow.Dependencies
		if len(deps) != 2 || deps[0].ID != "pick" || deps[0].Outcome != "succeeded" || string(deps[0].Result) != `{"bin":"A3"}` ||
			deps[1].ID != "label" || deps[1].Outcome != "failed" || deps[1].LastError != "printer jam" || deps[1].OnFailure != "run" {
			t.Fatalf("pack's dependencies %+v", deps)
		}
		var n map[string]int
		e.must(http.StatusOK, "POST", "/v1/workflows/ship-9/cancel", nil, &n)
		if n["canceled"] != 1 {
			t.Fatalf("cancel answered %v, want 1 (notify)", n)
		}
		e.must(http.StatusNoContent, "POST", "/v1/queues/wh/tasks/"+pack.ID+"/ack", map[string]any{"token": pack.Token}, nil)
		wf = workflowJSON{} // a fresh value: decoding leaves out what the answer omits
		e.must(http.StatusOK, "GET", "/v1/workflows/ship-9", nil, &wf)
		outcomes := make([]string, len(wf.Tasks))
		for i, task := range wf.Tasks {
			outcomes[i] = task.ID + "=" + task.Outcome
		}
		if wf.State != "canceled" || wf.FinishedAt == nil ||
			!slices.Equal(outcomes, []string{"pick=succeeded", "label=failed", "pack=succeeded", "notify=canceled"}) ||
			string(wf.Tasks[0].Result) != `{"bin":"A3"}` || wf.Tasks[3].State != "archived" || wf.Tasks[0].State != "" {
			tj, _ := json.Marshal(wf)
			t.Fatalf("workflow after the cancel %s", tj)
		}
		var task taskJSON
		e.must(http.StatusOK, "GET", "/v1/queues/wh/tasks/ship-9.notify", nil, &task)
		if task.Workflow != "ship-9" || task.WorkflowTask != "notify" || !strings.Contains(task.LastError, "canceled") {
			t.Fatalf("canceled task %+v", task)
		}
	})
}

// TestWorkflowPrioritiesAndKeys: workflow tasks take options.priority
// and options.key like any task: the highest priority is fetched first,
// and a task released by its dependency keeps its key.
func TestWorkflowPrioritiesAndKeys(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var wf workflowJSON
		e.must(http.StatusCreated, "POST", "/v1/workflows", map[string]any{"id": "pk", "tasks": []map[string]any{
			{"id": "a", "queue": "pq", "type": "a"},
			{"id": "hi", "queue": "pq", "type": "hi", "options": map[string]any{"priority": 8}},
			{"id": "k", "queue": "pq", "type": "k", "depends_on": []string{"a"}, "options": map[string]any{"key": "tenant-1"}},
		}}, &wf)
		fetch := func(want string) leasedTask {
			t.Helper()
			var got fetchResponse
			e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"pq"}, "wait_s": 5}, &got)
			if len(got.Tasks) != 1 || got.Tasks[0].ID != want {
				t.Fatalf("fetched %+v, want %s", got, want)
			}
			return got.Tasks[0]
		}
		hi := fetch("pk.hi")
		a := fetch("pk.a")
		for _, l := range []leasedTask{hi, a} {
			e.must(http.StatusNoContent, "POST", "/v1/queues/pq/tasks/"+l.ID+"/ack", map[string]any{"token": l.Token}, nil)
		}
		var info taskJSON
		e.must(http.StatusOK, "GET", "/v1/queues/pq/tasks/pk.k", nil, &info)
		if info.State != "pending" || info.Key != "tenant-1" {
			t.Fatalf("released task %+v, want pending with key tenant-1", info)
		}
		fetch("pk.k")
	})
}

// TestWorkflowRefusals: every refusal is a JSON error naming the task,
// and writes nothing.
func TestWorkflowRefusals(t *testing.T) {
	e := newEnv(t, "embedded", nil)
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		tasks  []string
		msg    string
	}{
		{"cycle", `{"tasks":[{"id":"a","queue":"q","type":"t","depends_on":["c"]},{"id":"b","queue":"q","type":"t","depends_on":["a"]},{"id":"c","queue":"q","type":"t","depends_on":["b"]}]}`,
			400, codeInvalidArgument, []string{"a", "c", "b"}, `cycle "a" → "c" → "b" → "a"`},
		{"missing", `{"tasks":[{"id":"a","queue":"q","type":"t","depends_on":["zz"]}]}`, 400, codeInvalidArgument, []string{"a", "zz"}, `"zz"`},
		{"duplicate", `{"tasks":[{"id":"a","queue":"q","type":"t"},{"id":"a","queue":"q","type":"t"}]}`, 400, codeInvalidArgument, []string{"a"}, "twice"},
		{"no queue", `{"tasks":[{"id":"a","type":"t"}]}`, 400, codeInvalidArgument, []string{"a"}, "queue is empty"},
		{"bad option", `{"tasks":[{"id":"ok","queue":"q","type":"t"},{"id":"b","queue":"q","type":"t","options":{"max_retry":-1}}]}`, 400, codeInvalidArgument, []string{"b"}, `task "b"`},
		{"bad policy", `{"tasks":[{"id":"a","queue":"q","type":"t"},{"id":"b","queue":"q","type":"t","depends_on":["a"],"on_dependency_failure":"maybe"}]}`, 400, codeInvalidArgument, []string{"b"}, "maybe"},
		{"both kinds", `{"tasks":[{"id":"a","queue":"q","type":"t","url":"https://example.com/"}]}`, 400, codeInvalidArgument, []string{"a"}, "not both"},
		{"mode mismatch", `{"tasks":[{"id":"a","queue":"q","type":"t"},{"id":"b","queue":"q","url":"https://example.com/"}]}`, 409, codeQueueModeMismatch, []string{"b"}, "pull queue"},
		{"unknown field", `{"tasks":[{"id":"a","queue":"q","type":"t","dependson":["x"]}]}`, 400, codeInvalidArgument, nil, "dependson"},
		{"empty", `{"tasks":[]}`, 400, codeInvalidArgument, nil, "tasks is empty"},
		{"priority and key", `{"tasks":[{"id":"a","queue":"q","type":"t"},{"id":"b","queue":"q","type":"t","options":{"priority":3,"key":"k"}}]}`, 400, codeInvalidArgument, []string{"b"}, "key"},
		{"group", `{"tasks":[{"id":"a","queue":"q","type":"t","options":{"group":"g"}}]}`, 400, codeInvalidArgument, []string{"a"}, "group"},
	}
	for _, c := range cases {
		status, data := e.call("POST", "/v1/workflows", c.body, nil)
		var b errorBody
		_ = json.Unmarshal(data, &b)
		if status != c.status || b.Error.Code != c.code || !slices.Equal(b.Error.Tasks, c.tasks) || !strings.Contains(b.Error.Message, c.msg) {
			t.Errorf("%s: %d %s; want %d %s naming %v with %q", c.name, status, data, c.status, c.code, c.tasks, c.msg)
		}
	}
	if e.queueSize("q") != 0 {
		t.Fatal("a refused workflow stored tasks")
	}
	if qs, _ := e.insp.Queues(); len(qs) != 0 {
		t.Fatalf("refused workflows left queues %v", qs)
	}
	status, data := e.call("GET", "/v1/workflows/nope", nil, nil)
	if status != http.StatusNotFound || errCode(data) != codeWorkflowNotFound {
		t.Fatalf("GET of an unknown workflow: %d %s", status, data)
	}
}

// TestWorkflowIdempotencyKey: a workflow POSTed again with the same
// Idempotency-Key answers with the same IDs and stores nothing more; the
// same key with other tasks is a conflict.
func TestWorkflowIdempotencyKey(t *testing.T) {
	e := newEnv(t, "redis", nil)
	key := "wf-key-1"
	body := map[string]any{"tasks": []map[string]any{
		{"id": "a", "queue": "iq", "url": "https://example.com/a", "options": map[string]any{"delay": "1h"}},
		{"id": "b", "queue": "iq", "url": "https://example.com/b", "depends_on": []string{"a"}},
	}}
	var first, again workflowJSON
	if status, data := e.callKey(&key, "POST", "/v1/workflows", body, &first); status != http.StatusCreated {
		t.Fatalf("first POST: %d %s", status, data)
	}
	if status, data := e.callKey(&key, "POST", "/v1/workflows", body, &again); status != http.StatusCreated {
		t.Fatalf("repeat: %d %s", status, data)
	}
	if first.ID == "" || again.ID != first.ID || again.Tasks[1].TaskID != first.Tasks[1].TaskID {
		t.Fatalf("repeat answered %+v, first %+v", again, first)
	}
	if n := e.queueSize("iq"); n != 2 {
		t.Fatalf("queue holds %d tasks, want 2", n)
	}
	body["tasks"].([]map[string]any)[1]["depends_on"] = []string{}
	status, data := e.callKey(&key, "POST", "/v1/workflows", body, nil)
	if status != http.StatusConflict || errCode(data) != codeWorkflowConflict {
		t.Fatalf("same key, other tasks: %d %s", status, data)
	}
	status, data = e.callKey(&key, "POST", "/v1/workflows", map[string]any{"id": "x", "tasks": body["tasks"]}, nil)
	if status != http.StatusBadRequest {
		t.Fatalf("id and key: %d %s", status, data)
	}
}
