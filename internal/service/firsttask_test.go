package service_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// Many clients sending the first URL tasks of new queues at once: every
// task acknowledged is delivered, due now or due later, and no client is
// refused (issue 10 point 0: a losing first caller used to delete the
// queue's record, leaving acknowledged tasks in a queue the URL worker
// never served).
func TestFirstTasksOfNewQueueRace(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, testConfig(t, broker))
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)

		const clients, perClient, queues = 12, 4, 4
		for _, scenario := range []struct {
			name  string
			delay string
		}{{"due-now", ""}, {"due-later", "1500ms"}} {
			t.Run(scenario.name, func(t *testing.T) {
				var (
					mu    sync.Mutex
					acked = map[string]bool{}
					bad   []string
					wg    sync.WaitGroup
				)
				start := make(chan struct{})
				hc := &http.Client{Timeout: 30 * time.Second}
				for q := 0; q < queues; q++ {
					queue := fmt.Sprintf("first-%s-%d", scenario.name, q)
					for cl := 0; cl < clients; cl++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							<-start
							for i := 0; i < perClient; i++ {
								spec := map[string]any{"url": tg.URL + "/hit"}
								if scenario.delay != "" {
									spec["options"] = map[string]any{"delay": scenario.delay}
								}
								path, body := "/v1/queues/"+queue+"/tasks", any(spec)
								if i%2 == 1 { // half of them as batches of two
									path, body = path+"/batch", map[string]any{"tasks": []any{spec, spec}}
								}
								ids, status, data := post(hc, svc.URL()+path, body)
								mu.Lock()
								if status != http.StatusCreated {
									bad = append(bad, fmt.Sprintf("%s: %d %s", path, status, data))
								}
								for _, id := range ids {
									acked[id] = true
								}
								mu.Unlock()
							}
						}()
					}
				}
				close(start)
				wg.Wait()
				for _, b := range bad {
					t.Errorf("refused: %s", b)
				}
				want := queues * clients * (perClient/2 + perClient) // singles + batches of two
				if len(acked) != want {
					t.Fatalf("%d tasks acknowledged, want %d", len(acked), want)
				}
				for q := 0; q < queues; q++ {
					var qv struct {
						Mode string `json:"mode"`
					}
					c.must(http.StatusOK, "GET", fmt.Sprintf("/v1/queues/first-%s-%d", scenario.name, q), nil, &qv)
					if qv.Mode != "real_time" {
						t.Errorf("queue %d has mode %q, want real_time", q, qv.Mode)
					}
				}
				seen := map[string]int{}
				deadline := time.After(60 * time.Second)
				for len(seen) < len(acked) {
					select {
					case h := <-tg.hits:
						seen[h.header.Get("Htq-Task-Id")]++
					case <-deadline:
						t.Fatalf("%d of %d acknowledged tasks delivered within 60 s", len(seen), len(acked))
					}
				}
				for id, n := range seen {
					if !acked[id] {
						t.Errorf("delivered task %s was never acknowledged", id)
					}
					if n > 1 {
						t.Errorf("task %s delivered %d times", id, n)
					}
				}
			})
		}
	})
}

// post sends a JSON body with the test token and returns the IDs of the
// tasks the answer acknowledges (a single enqueue or a batch).
func post(hc *http.Client, url string, body any) (ids []string, status int, data []byte) {
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	data, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return nil, resp.StatusCode, data
	}
	var one struct {
		ID      string `json:"id"`
		Results []struct {
			ID string `json:"id"`
		} `json:"results"`
	}
	if err := json.Unmarshal(data, &one); err != nil {
		return nil, -1, data
	}
	if one.ID != "" {
		ids = append(ids, one.ID)
	}
	for _, r := range one.Results {
		if r.ID != "" {
			ids = append(ids, r.ID)
		}
	}
	return ids, resp.StatusCode, data
}
