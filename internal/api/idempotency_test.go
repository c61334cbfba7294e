package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// callKey is call with an Idempotency-Key header (none when key is nil).
func (e *env) callKey(key *string, method, path string, body any, out any) (int, []byte) {
	e.t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(data))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	if key != nil {
		req.Header.Set(IdempotencyKeyHeader, *key)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out2, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(out2, out); err != nil {
			e.t.Fatalf("%s %s: decode %.300s: %v", method, path, out2, err)
		}
	}
	return resp.StatusCode, out2
}

var uuidForm = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// A POST repeated with the same Idempotency-Key answers as the first (201,
// the same ID) and stores one task, for typed, Unique and delayed URL
// tasks and for batches; the key with another body is a conflict, and a
// bad key or one given with options.task_id is refused.
func TestIdempotencyKey(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		key := func(s string) *string { return &s }
		post := func(k *string, queue string, body any) enqueueResponse {
			t.Helper()
			var got enqueueResponse
			if status, data := e.callKey(k, "POST", "/v1/queues/"+queue+"/tasks", body, &got); status != http.StatusCreated {
				t.Fatalf("POST with key %v: %d %s", *k, status, data)
			}
			return got
		}
		typed := map[string]any{"type": "email:send", "payload": map[string]any{"to": "a@b.c"}}
		first := post(key("order-42"), "jobs", typed)
		if !uuidForm.MatchString(first.ID) || first.State != "pending" {
			t.Fatalf("first answer %+v: want a version 8 UUID, pending", first)
		}
		for range 2 {
			// next_process_at is the request's own (now, for a pending task).
			if again := post(key("order-42"), "jobs", typed); again.ID != first.ID || again.Queue != first.Queue ||
				again.Type != first.Type || again.State != first.State {
				t.Errorf("repeat answered %+v, want %+v", again, first)
			}
		}
		if n := e.queueSize("jobs"); n != 1 {
			t.Errorf("jobs holds %d tasks after three POSTs with one key, want 1", n)
		}
		// Another key, or the key in another queue: another task.
		if other := post(key("order-43"), "jobs", typed); other.ID == first.ID {
			t.Error("two keys gave the same ID")
		}
		if other := post(key("order-42"), "mail", typed); other.ID == first.ID {
			t.Error("one key in two queues gave the same ID")
		}
		// The key with another body: 409, nothing stored.
		status, data := e.callKey(key("order-42"), "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "email:send", "payload": map[string]any{"to": "x@y.z"}}, nil)
		if status != http.StatusConflict || errCode(data) != codeTaskIDConflict {
			t.Errorf("the key with another body: %d %s, want 409 %s", status, data, codeTaskIDConflict)
		}
		if n := e.queueSize("jobs"); n != 2 {
			t.Errorf("jobs holds %d tasks, want 2", n)
		}

		// A Unique task repeated is not a duplicate of itself.
		uniq := map[string]any{"type": "report", "options": map[string]any{"unique": "1h"}}
		if a, b := post(key("u-1"), "jobs", uniq), post(key("u-1"), "jobs", uniq); a.ID != b.ID {
			t.Errorf("Unique task repeated: IDs %s and %s", a.ID, b.ID)
		}
		// A URL task with a delay: the repeat comes later, and is the same task.
		hook := map[string]any{"url": "http://example.com/hook", "body": "hi", "options": map[string]any{"delay": "1h"}}
		a := post(key("hook-1"), "hooks", hook)
		b := post(key("hook-1"), "hooks", hook)
		if a.ID != b.ID || a.State != "scheduled" {
			t.Errorf("URL task with a delay repeated: %+v then %+v", a, b)
		}
		if n := e.queueSize("hooks"); n != 1 {
			t.Errorf("hooks holds %d tasks after two POSTs with one key, want 1", n)
		}

		// A batch: one ID per key and index, stable across repeats.
		batch := map[string]any{"tasks": []any{typed, map[string]any{"type": "b"}, typed}}
		var r1, r2 batchResponse
		if status, data := e.callKey(key("batch-1"), "POST", "/v1/queues/bulk/tasks/batch", batch, &r1); status != http.StatusCreated {
			t.Fatalf("batch: %d %s", status, data)
		}
		if status, data := e.callKey(key("batch-1"), "POST", "/v1/queues/bulk/tasks/batch", batch, &r2); status != http.StatusCreated {
			t.Fatalf("batch repeated: %d %s", status, data)
		}
		ids := map[string]bool{}
		for i := range r1.Results {
			if r1.Results[i].ID != r2.Results[i].ID {
				t.Errorf("batch task %d: ID %s, then %s", i, r1.Results[i].ID, r2.Results[i].ID)
			}
			ids[r1.Results[i].ID] = true
		}
		if len(ids) != 3 || r2.Enqueued != 3 || e.queueSize("bulk") != 3 {
			t.Errorf("batch: %d distinct IDs, repeat enqueued %d, queue holds %d; want 3, 3, 3", len(ids), r2.Enqueued, e.queueSize("bulk"))
		}

		// Refusals: 400 invalid_argument, nothing stored.
		for name, c := range map[string]struct {
			key  *string
			body any
		}{
			"empty key":          {key(""), typed},
			"key too long":       {key(strings.Repeat("k", 256)), typed},
			"key with a newline": {key("a\tb"), typed},
			"key and task_id":    {key("k"), map[string]any{"type": "t", "options": map[string]any{"task_id": "mine"}}},
		} {
			status, data := e.callKey(c.key, "POST", "/v1/queues/refused/tasks", c.body, nil)
			if status != http.StatusBadRequest || errCode(data) != codeInvalidArgument {
				t.Errorf("%s: %d %s, want 400 %s", name, status, data, codeInvalidArgument)
			}
		}
		if n := e.queueSize("refused"); n != 0 {
			t.Errorf("refused requests stored %d tasks", n)
		}
	})
}
