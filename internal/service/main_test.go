package service_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/service"
	"github.com/htqueue/htq/webhook"
)

func TestMain(m *testing.M) {
	leaktest.Main(m, redistest.StopShared)
}

// backends runs fn once per storage backend, each on empty storage: Redis
// (a private redis-server, or HTQ_TEST_REDIS) and the embedded store in a
// temporary directory.
func backends(t *testing.T, fn func(t *testing.T, broker string)) {
	t.Run("redis", func(t *testing.T) { fn(t, redistest.URL(t)) })
	t.Run("embedded", func(t *testing.T) { fn(t, "file:"+t.TempDir()) })
}

// testSecret is the signing secret of the test services.
var testSecret = func() string {
	s, err := webhook.GenerateSecret()
	if err != nil {
		panic(err)
	}
	return s
}()

// testToken is the API token of the test services.
const testToken = "test-token-0123456789abcdef"

// testLogger logs warnings and errors through t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// testConfig is the configuration of a test service on broker: a free
// loopback port, loopback targets allowed, quick refreshes.
func testConfig(t testing.TB, broker string) service.Config {
	return service.Config{
		Addr:                   "127.0.0.1:0",
		Storage:                broker,
		Token:                  testToken,
		SigningSecrets:         []string{testSecret},
		AllowTargets:           []string{"127.0.0.0/8"},
		TimeZone:               "UTC",
		Concurrency:            20,
		ShutdownTimeout:        5 * time.Second,
		QueueRefreshInterval:   time.Second,
		ScheduleReloadInterval: time.Second,
		Logger:                 testLogger(t),
		Stdout:                 io.Discard,
	}
}

// startService starts a service and shuts it down at the end of the test.
func startService(t testing.TB, cfg service.Config) *service.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("service.Start: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	select {
	case <-svc.Ready():
	default:
		t.Fatal("Ready not closed after Start returned")
	}
	return svc
}

// apiClient calls the native API of a service over HTTP.
type apiClient struct {
	t     testing.TB
	base  string
	token string
	hc    *http.Client
}

func newClient(t testing.TB, baseURL, token string) *apiClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	t.Cleanup(tr.CloseIdleConnections)
	return &apiClient{t: t, base: baseURL, token: token, hc: &http.Client{Transport: tr, Timeout: 40 * time.Second}}
}

// call sends a JSON request and decodes a JSON answer into out (when not
// nil); it returns the status and the raw body.
func (c *apiClient) call(method, path string, body, out any) (int, []byte) {
	c.t.Helper()
	return c.callHeader(nil, method, path, body, out)
}

// callHeader is call with the request headers hdr added.
func (c *apiClient) callHeader(hdr http.Header, method, path string, body, out any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatalf("marshal %s %s: %v", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, data
}

// must calls and fails the test unless the status is want.
func (c *apiClient) must(want int, method, path string, body, out any) []byte {
	c.t.Helper()
	got, data := c.call(method, path, body, out)
	if got != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, want, data)
	}
	return data
}

// createQueue defines a queue with the given fields (name and mode set).
func (c *apiClient) createQueue(name, mode string, fields map[string]any) {
	c.t.Helper()
	body := map[string]any{"name": name, "mode": mode}
	for k, v := range fields {
		body[k] = v
	}
	c.must(http.StatusCreated, "POST", "/v1/queues", body, nil)
}

type enqueued struct {
	ID    string `json:"id"`
	Queue string `json:"queue"`
	State string `json:"state"`
}

// enqueue enqueues one task spec into queue and returns its ID.
func (c *apiClient) enqueue(queue string, spec map[string]any) string {
	c.t.Helper()
	var out enqueued
	c.must(http.StatusCreated, "POST", "/v1/queues/"+queue+"/tasks", spec, &out)
	if out.ID == "" {
		c.t.Fatalf("enqueue into %s: no id in the answer", queue)
	}
	return out.ID
}

type taskView struct {
	ID         string          `json:"id"`
	Queue      string          `json:"queue"`
	Type       string          `json:"type"`
	State      string          `json:"state"`
	Retried    int             `json:"retried"`
	MaxRetry   int             `json:"max_retry"`
	LastError  string          `json:"last_error"`
	Result     json.RawMessage `json:"result"`
	Payload    json.RawMessage `json:"payload"`
	NextAt     *time.Time      `json:"next_process_at"`
	Completed  *time.Time      `json:"completed_at"`
	Retention  int64           `json:"retention_ms"`
	IsOrphaned bool            `json:"is_orphaned"`
	Callbacks  []callbackView  `json:"callbacks"`
}

// callbackView is one of a URL task's callbacks as GET of the task shows it.
type callbackView struct {
	Kind   string `json:"kind"`
	URL    string `json:"url"`
	TaskID string `json:"task_id"`
	Task   *struct {
		State     string `json:"state"`
		Retried   int    `json:"retried"`
		LastError string `json:"last_error"`
	} `json:"task"`
}

// task reads a task; ok is false when the API answers 404.
func (c *apiClient) task(queue, id string) (taskView, bool) {
	c.t.Helper()
	var tv taskView
	status, data := c.call("GET", "/v1/queues/"+queue+"/tasks/"+id, nil, &tv)
	switch status {
	case http.StatusOK:
		return tv, true
	case http.StatusNotFound:
		return tv, false
	}
	c.t.Fatalf("GET task %s/%s: status %d: %s", queue, id, status, data)
	return tv, false
}

// waitTask polls a task until cond holds (the API has no push for task
// states; the poll is 20 ms).
func (c *apiClient) waitTask(queue, id string, d time.Duration, what string, cond func(tv taskView, found bool) bool) taskView {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		tv, found := c.task(queue, id)
		if cond(tv, found) {
			return tv
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s/%s: timed out after %v waiting for %s; last seen: found=%v %+v", queue, id, d, what, found, tv)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func inState(state string) func(taskView, bool) bool {
	return func(tv taskView, found bool) bool { return found && tv.State == state }
}

// hit is one request a target received.
type hit struct {
	at     time.Time
	method string
	path   string
	header http.Header
	body   []byte
}

// target is an httptest server standing for a URL task's target. Each
// request is recorded on hits; respond decides the answer (default 200
// "ok").
type target struct {
	*httptest.Server
	hits chan hit

	mu      sync.Mutex
	respond func(n int, h hit, w http.ResponseWriter)
	n       int
}

func newTarget(t testing.TB) *target {
	tg := &target{hits: make(chan hit, 1000)}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h := hit{at: time.Now(), method: r.Method, path: r.URL.RequestURI(), header: r.Header.Clone(), body: body}
		tg.mu.Lock()
		tg.n++
		n, respond := tg.n, tg.respond
		tg.mu.Unlock()
		if respond != nil {
			respond(n, h, w)
		} else {
			io.WriteString(w, "ok")
		}
		tg.hits <- h
	}))
	t.Cleanup(tg.Close)
	return tg
}

// setRespond sets how the target answers its n-th request (from 1).
func (tg *target) setRespond(fn func(n int, h hit, w http.ResponseWriter)) {
	tg.mu.Lock()
	tg.respond = fn
	tg.mu.Unlock()
}

// next waits for the target's next request.
func (tg *target) next(t testing.TB, d time.Duration) hit {
	t.Helper()
	select {
	case h := <-tg.hits:
		return h
	case <-time.After(d):
		t.Fatalf("target: no request within %v", d)
		return hit{}
	}
}

// none checks that the target gets no request for d.
func (tg *target) none(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case h := <-tg.hits:
		t.Fatalf("target: unexpected request %s %s (Htq-Task-Id %s)", h.method, h.path, h.header.Get("Htq-Task-Id"))
	case <-time.After(d):
	}
}

func urlTask(url string, extra map[string]any) map[string]any {
	m := map[string]any{"url": url}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("must: %v", err))
	}
	return v
}

// backendRedis returns the URL of an empty Redis database.
func backendRedis(t *testing.T) string { return redistest.URL(t) }
