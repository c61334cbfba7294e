package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/service"
)

// storageTimeout is the storage timeout of the outage tests' services:
// long enough that a loaded machine meets it while Redis is up.
const storageTimeout = 1500 * time.Millisecond

// answer is one HTTP answer of htq serve, as a client saw it.
type answer struct {
	status     int
	body       []byte
	retryAfter string
	took       time.Duration
	err        error // the request itself failed (no answer)
}

// outageClient sends requests to a service and records every answer.
type outageClient struct {
	base string
	hc   *http.Client
}

func newOutageClient(t *testing.T, base string) *outageClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	// The client's own timeout is far above what the service must answer
	// within: a hang shows as a slow answer, not as a client error.
	return &outageClient{base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

// do sends a request: a JSON body with the token (and an Idempotency-Key
// when key is not empty), or HTQ's form when form is not nil.
func (c *outageClient) do(method, path string, body any, key string, form url.Values) answer {
	var rd io.Reader
	ctype := ""
	switch {
	case form != nil:
		rd, ctype = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	case body != nil:
		b, _ := json.Marshal(body)
		rd, ctype = bytes.NewReader(b), "application/json"
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		return answer{err: err}
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if form == nil {
		req.Header.Set("Authorization", "Bearer "+testToken)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return answer{err: err, took: time.Since(start)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: data, retryAfter: resp.Header.Get("Retry-After"), took: time.Since(start), err: err}
}

// checkUnavailable fails unless a is the answer of an outage: within the
// storage timeout and a second, 503 with Retry-After and a JSON body
// (the native error, or HTQ's error_code 1001).
func checkUnavailable(t *testing.T, what string, a answer) {
	t.Helper()
	switch {
	case a.err != nil:
		t.Errorf("%s: no answer after %v: %v", what, a.took, a.err)
		return
	case a.took > 2*storageTimeout+time.Second:
		// A request may make two storage calls in a row (GET of a queue
		// reads its record and its counts), each bounded by the timeout.
		t.Errorf("%s: answered after %v, more than twice the storage timeout %v + 1 s", what, a.took, storageTimeout)
	case a.status != http.StatusServiceUnavailable || a.retryAfter == "":
		t.Errorf("%s: %d (Retry-After %q) %s; want 503 with Retry-After", what, a.status, a.retryAfter, a.body)
	}
	var body map[string]any
	if err := json.Unmarshal(a.body, &body); err != nil {
		t.Errorf("%s: the body is not JSON (%v): %q", what, err, a.body)
		return
	}
	if e, ok := body["error"].(map[string]any); ok {
		if e["code"] != "unavailable" {
			t.Errorf("%s: error code %v, want unavailable", what, e["code"])
		}
	} else if body["error_code"] != float64(1001) {
		t.Errorf("%s: body %s is neither the native error nor HTQ's 1001", what, a.body)
	}
}

// namedRequest is one request of the outage tests.
type namedRequest struct {
	what string
	do   func() answer
}

// outageRequests are the requests of the outage tests, in order: an
// enqueue with an Idempotency-Key (key is that request's key), a batch
// with one (into another queue), listing queues, reading the queue of the
// enqueue, and HTQ's addTask.
func outageRequests(c *outageClient, key string) []namedRequest {
	form := url.Values{
		"app_key": {"legacy-app"}, "app_token": {"legacy-app-token-0123456789"},
		"queue_name": {"legacy"}, "url": {"http://127.0.0.1:1/never"}, "execute_time": {"2099-01-01 00:00:00"},
	}
	return []namedRequest{
		{"POST /v1/queues/jobs/tasks", func() answer {
			return c.do("POST", "/v1/queues/jobs/tasks", map[string]any{"type": "work", "payload": key}, key, nil)
		}},
		{"POST /v1/queues/bulk/tasks/batch", func() answer {
			return c.do("POST", "/v1/queues/bulk/tasks/batch", map[string]any{"tasks": []any{
				map[string]any{"type": "work", "payload": key}, map[string]any{"type": "work", "payload": key + "/2"},
			}}, "batch-"+key, nil)
		}},
		{"GET /v1/queues", func() answer { return c.do("GET", "/v1/queues", nil, "", nil) }},
		{"GET /v1/queues/jobs", func() answer { return c.do("GET", "/v1/queues/jobs", nil, "", nil) }},
		{"POST /api/addTask", func() answer { return c.do("POST", "/api/addTask", nil, "", form) }},
	}
}

// outageService starts htq serve on the Redis at addr with the test's
// storage timeout, and checks that every request succeeds.
func outageService(t *testing.T, addr string) (*service.Service, *outageClient) {
	t.Helper()
	cfg := testConfig(t, "redis://"+addr+"/0")
	cfg.StorageTimeout = storageTimeout
	cfg.HTQAppKey, cfg.HTQAppToken = "legacy-app", "legacy-app-token-0123456789"
	svc := startService(t, cfg)
	c := newOutageClient(t, svc.URL())
	for _, r := range outageRequests(c, "before") {
		if a := r.do(); a.err != nil || a.status >= 300 {
			t.Fatalf("%s before the outage: %d %s %v", r.what, a.status, a.body, a.err)
		}
	}
	return svc, c
}

// waitServing waits until every request succeeds again and says how long
// that took.
func waitServing(t *testing.T, c *outageClient, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		var bad []string
		for _, r := range outageRequests(c, "after") {
			if a := r.do(); a.err != nil || a.status >= 300 {
				bad = append(bad, fmt.Sprintf("%s: %d %s %v", r.what, a.status, a.body, a.err))
			}
		}
		if len(bad) == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("requests still fail %v after Redis is back: %v", limit, bad)
		}
		time.Sleep(100 * time.Millisecond) // polling the recovery
	}
}

// queueSize reads the number of tasks in a queue.
func queueSize(t *testing.T, c *outageClient, queue string) int {
	t.Helper()
	a := c.do("GET", "/v1/queues/"+queue, nil, "", nil)
	var q struct {
		Stats struct {
			Size int `json:"size"`
		} `json:"stats"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &q) != nil {
		t.Fatalf("GET /v1/queues/%s: %d %s %v", queue, a.status, a.body, a.err)
	}
	return q.Stats.Size
}

// TestServiceOutageAnswers503 cuts the Redis of a real htq serve off for
// four storage timeouts, frozen (SIGSTOP) or crashed (SIGKILL, restarted
// on its data), while HTTP clients enqueue with an Idempotency-Key, list
// the queues, read one and add HTQ tasks (issue 10 point 4: after 2 to 3
// s every call hung until Redis came back, then the connection closed
// with no answer). Every answer comes within the storage timeout + 1 s,
// 503 with Retry-After and a JSON body; once Redis is back, requests
// succeed again; and each enqueue repeated with its key until it got 201
// is stored once.
func TestServiceOutageAnswers503(t *testing.T) {
	for _, how := range []string{"frozen", "crashed"} {
		t.Run(how, func(t *testing.T) {
			rs := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "everysec")
			_, c := outageService(t, rs.Addr)
			switch how {
			case "frozen":
				if err := rs.Freeze(); err != nil {
					t.Fatal(err)
				}
			case "crashed":
				if err := rs.Crash(); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			var keys []string // the keys of every enqueue sent
			answers, longest, slowest := 0, time.Duration(0), ""
			end := time.Now().Add(4 * storageTimeout)
			var wg sync.WaitGroup
			for g := range 3 {
				wg.Go(func() {
					for i := 0; time.Now().Before(end); i++ {
						key := fmt.Sprintf("%s-%d-%d", how, g, i)
						for _, r := range outageRequests(c, key) {
							a := r.do()
							checkUnavailable(t, r.what, a)
							mu.Lock()
							answers++
							if a.took > longest {
								longest, slowest = a.took, r.what
							}
							if r.what == "POST /v1/queues/jobs/tasks" {
								keys = append(keys, key)
							}
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d answers during the outage, all 503 with Retry-After, the slowest after %v (%s)", how, answers, longest, slowest)
			switch how {
			case "frozen":
				if err := rs.Thaw(); err != nil {
					t.Fatal(err)
				}
			case "crashed":
				if err := rs.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s: requests succeed %v after Redis is back", how, waitServing(t, c, 10*time.Second))
			// The clients repeat every enqueue and batch that got 503,
			// with its key.
			for _, key := range keys {
				for _, r := range outageRequests(c, key)[:2] {
					if a := r.do(); a.status != http.StatusCreated {
						t.Fatalf("%s with key %s repeated after the outage: %d %s %v", r.what, key, a.status, a.body, a.err)
					}
				}
			}
			// One task per key (two per batch key): those of before and
			// after, and those of the outage (some of them stored while
			// Redis was frozen or before it died, though their answer was
			// 503).
			if n, want := queueSize(t, c, "jobs"), 2+len(keys); n != want {
				t.Errorf("queue jobs holds %d tasks, want %d (one per Idempotency-Key)", n, want)
			}
			if n, want := queueSize(t, c, "bulk"), 2*(2+len(keys)); n != want {
				t.Errorf("queue bulk holds %d tasks, want %d (two per Idempotency-Key)", n, want)
			}
		})
	}
}

// TestServiceLoadingAnswers503 restarts the Redis of a real htq serve on
// a dataset it takes seconds to read back: while Redis answers LOADING
// (it was a 500 for 46 of 127 enqueues), every request is a 503 with
// Retry-After within the storage timeout (or, for one that began as
// loading ended, a success after it), and requests succeed once it has
// loaded.
func TestServiceLoadingAnswers503(t *testing.T) {
	rs := redistest.Start(t, "--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024")
	_, c := outageService(t, rs.Addr)
	tasks := make([]map[string]any, 1000)
	for i := range tasks {
		tasks[i] = map[string]any{"type": "filler", "payload": i}
	}
	for range 40 { // about 4 s of loading at 100 µs a key
		if a := c.do("POST", "/v1/queues/filler/tasks/batch", map[string]any{"tasks": tasks}, "", nil); a.status != http.StatusCreated {
			t.Fatalf("batch: %d %.300s %v", a.status, a.body, a.err)
		}
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.Addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	err = rc.Do(context.Background(), rc.B().Save().Build()).Error()
	rc.Close()
	if err != nil {
		t.Fatalf("SAVE: %v", err)
	}
	if err := rs.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := rs.RestartLoading(); err != nil {
		t.Fatal(err)
	}
	rc, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{rs.Addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// loading tells whether Redis still reads its dataset back.
	loading := func() bool {
		info, err := rc.Do(context.Background(), rc.B().Info().Section("persistence").Build()).ToString()
		if err != nil {
			return strings.Contains(err.Error(), "LOADING")
		}
		return strings.Contains(info, "loading:1")
	}
	start := time.Now()
	answers := 0
	// A request retries within the storage timeout, so one that began
	// while Redis loaded may end after it has loaded, and succeed: a
	// success is right only once Redis has stopped loading, and ends the
	// outage.
outage:
	for i := 0; time.Since(start) < 2*time.Second; i++ {
		for _, r := range outageRequests(c, fmt.Sprint("loading-", i)) {
			a := r.do()
			if a.err == nil && a.status < 300 {
				if loading() {
					t.Errorf("%s succeeded (%d %s) while Redis still loads", r.what, a.status, a.body)
				}
				break outage
			}
			checkUnavailable(t, r.what+" while Redis loads", a)
			answers++
		}
	}
	if answers == 0 {
		t.Fatal("no request was answered while Redis loaded: the dataset loads too fast for this test")
	}
	t.Logf("%d answers while Redis loads, all 503 with Retry-After; requests succeed %v later", answers, waitServing(t, c, 30*time.Second))
}
