package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/model"
)

// Typed and URL tasks racing to be the first of a new queue: one kind wins
// the queue's mode, the other is refused with 409, and every acknowledged
// task is of the winning kind: none sits in a queue whose record would
// keep it from running.
func TestFirstTaskRaceMixedKinds(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		for round := 0; round < 6; round++ {
			queue := fmt.Sprintf("mixed%d", round)
			var (
				mu     sync.Mutex
				acked  = map[string]string{} // ID → kind
				status = map[int]int{}
				wg     sync.WaitGroup
			)
			start := make(chan struct{})
			for g := 0; g < 16; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					kind, body := "typed", `{"type":"job"}`
					if g%2 == 1 {
						kind, body = "url", `{"url":"http://example.com/x"}`
					}
					<-start
					code, id := rawEnqueue(e, queue, body)
					mu.Lock()
					defer mu.Unlock()
					status[code]++
					if code == http.StatusCreated {
						acked[id] = kind
					}
				}()
			}
			close(start)
			wg.Wait()
			if status[http.StatusCreated]+status[http.StatusConflict] != 16 {
				t.Fatalf("round %d: statuses %v", round, status)
			}
			var q model.QueueView
			e.must(http.StatusOK, "GET", "/v1/queues/"+queue, nil, &q)
			want := "typed"
			if q.Mode.IsURL() {
				want = "url"
			}
			for id, kind := range acked {
				if kind != want {
					t.Errorf("round %d: acknowledged %s task %s in a %s queue", round, kind, id, q.Mode)
				}
			}
			if n := e.queueSize(queue); n != len(acked) {
				t.Errorf("round %d: queue holds %d tasks, %d acknowledged", round, n, len(acked))
			}
		}
	})
}

func rawEnqueue(e *env, queue, body string) (int, string) {
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/queues/"+queue+"/tasks", bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(data, &out)
	return resp.StatusCode, out.ID
}

// An operator repairs a queue whose mode is wrong with PATCH ?force=true:
// the tasks stay, the record takes the new mode and its default settings.
func TestRepairQueueMode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		// URL tasks in a queue without a record (as the race of issue 10
		// left them): the API shows a pull queue.
		e.must(http.StatusCreated, "POST", "/v1/queues/broken/tasks", map[string]any{"url": "http://example.com/"}, nil)
		if err := e.meta.DeleteMeta(t.Context(), "queue/broken"); err != nil {
			t.Fatal(err)
		}
		var q model.QueueView
		e.must(http.StatusOK, "GET", "/v1/queues/broken", nil, &q)
		if q.Mode != "pull" {
			t.Fatalf("mode %s, want pull", q.Mode)
		}
		status, data := e.call("PATCH", "/v1/queues/broken", map[string]any{"mode": "real_time"}, nil)
		if status != http.StatusConflict || errCode(data) != codeQueueModeMismatch || !bytes.Contains(data, []byte("force=true")) {
			t.Errorf("mode change without force: %d %s", status, data)
		}
		e.must(http.StatusOK, "PATCH", "/v1/queues/broken?force=true", map[string]any{"mode": "real_time"}, &q)
		if q.Mode != "real_time" || q.Settings.MaxConcurrency != 1 || q.Stats.Size != 1 || q.MinBackoffMS == 0 {
			t.Errorf("after repair: %+v %+v %+v", q.Queue, q.Settings, q.Stats)
		}
		e.must(http.StatusCreated, "POST", "/v1/queues/broken/tasks", map[string]any{"url": "http://example.com/2"}, nil)
		// And back, dropping the URL policies; a bad mode is a 400.
		q = model.QueueView{} // absent fields must read as zero
		e.must(http.StatusOK, "PATCH", "/v1/queues/broken?force=1", map[string]any{"mode": "pull"}, &q)
		if q.Mode != "pull" || q.Settings.MaxConcurrency != 0 || q.MinBackoffMS != 0 {
			t.Errorf("back to pull: %+v %+v", q.Queue, q.Settings)
		}
		if status, data := e.call("PATCH", "/v1/queues/broken?force=true", map[string]any{"mode": "nope"}, nil); status != http.StatusBadRequest {
			t.Errorf("bad mode: %d %s", status, data)
		}
		if n, err := htq.NewInspector(e.st).GetQueueInfo("broken"); err != nil || n.Size != 2 {
			t.Errorf("tasks after the repairs: %+v %v", n, err)
		}
	})
}
