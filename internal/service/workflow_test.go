package service_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// A workflow of URL tasks: the second request goes out once the first
// answered, and carries the workflow's headers with the first task's
// outcome and its answer (status, body) as result.
func TestURLWorkflow(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		tg.setRespond(func(_ int, h hit, w http.ResponseWriter) {
			io.WriteString(w, `{"from":"`+h.path+`"}`)
		})
		var wf struct {
			ID    string `json:"id"`
			Tasks []struct {
				TaskID string `json:"task_id"`
			} `json:"tasks"`
		}
		c.must(http.StatusCreated, "POST", "/v1/workflows", map[string]any{"id": "hooks-1", "tasks": []map[string]any{
			{"id": "first", "queue": "wfhooks", "url": tg.URL + "/first"},
			{"id": "second", "queue": "wfhooks", "url": tg.URL + "/second", "depends_on": []string{"first"},
				"options": map[string]any{"retention": "1h"}},
		}}, &wf)
		first := tg.next(t, 10*time.Second)
		second := tg.next(t, 10*time.Second)
		if first.path != "/first" || second.path != "/second" {
			t.Fatalf("requests went to %s then %s", first.path, second.path)
		}
		if first.header.Get("Htq-Workflow") != "hooks-1" || first.header.Get("Htq-Workflow-Task") != "first" ||
			first.header.Get("Htq-Dependencies") != "[]" {
			t.Errorf("first request's workflow headers: %v", first.header)
		}
		var deps []struct {
			ID        string `json:"id"`
			TaskID    string `json:"task_id"`
			OnFailure string `json:"on_failure"`
			Outcome   string `json:"outcome"`
			Result    struct {
				Status int    `json:"status"`
				Body   string `json:"body"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(second.header.Get("Htq-Dependencies")), &deps); err != nil {
			t.Fatalf("Htq-Dependencies %q: %v", second.header.Get("Htq-Dependencies"), err)
		}
		if len(deps) != 1 || deps[0].ID != "first" || deps[0].TaskID != "hooks-1.first" || deps[0].Outcome != "succeeded" ||
			deps[0].OnFailure != "cancel" || deps[0].Result.Status != 200 || deps[0].Result.Body != `{"from":"/first"}` {
			t.Fatalf("second request's dependencies: %s", second.header.Get("Htq-Dependencies"))
		}
		c.waitTask("wfhooks", wf.Tasks[1].TaskID, 10*time.Second, "completed", inState("completed"))
		var got struct {
			State string `json:"state"`
		}
		c.must(http.StatusOK, "GET", "/v1/workflows/hooks-1", nil, &got)
		if got.State != "succeeded" {
			t.Fatalf("workflow state %s", got.State)
		}
	})
}
