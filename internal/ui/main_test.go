package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/service"
)

func TestMain(m *testing.M) { leaktest.Main(m, redistest.StopShared) }

// testToken is the API token of the test services.
const testToken = "ui-test-token-0123456789"

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startService starts htq serve on broker (a free loopback port, loopback
// targets allowed, the API token testToken) and stops it at the end of
// the test.
func startService(t testing.TB, broker string, readOnly bool) *service.Service {
	t.Helper()
	return startConfig(t, service.Config{Storage: broker, Token: testToken, UIReadOnly: readOnly})
}

// startConfig starts htq serve as cfg says, on a free loopback port with
// loopback targets allowed, and stops it at the end of the test.
func startConfig(t testing.TB, cfg service.Config) *service.Service {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg.Addr = "127.0.0.1:0"
	cfg.AllowTargets = []string{"127.0.0.0/8"}
	cfg.TimeZone = "UTC"
	cfg.Logger = slog.New(slog.NewTextHandler(logWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg.Stdout = io.Discard
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
	return svc
}

// client calls a service over HTTP without following redirects.
type client struct {
	t    testing.TB
	base string
	hc   *http.Client
}

func newClient(t testing.TB, base string) *client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &client{t: t, base: base, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do sends a request: body is JSON unless it is a string (sent as a
// form); hdr are extra headers ("Authorization" from bearer()).
func (c *client) do(method, path string, body any, hdr map[string]string) (*http.Response, []byte) {
	c.t.Helper()
	var rd io.Reader
	ctype := ""
	switch b := body.(type) {
	case nil:
	case string:
		rd, ctype = strings.NewReader(b), "application/x-www-form-urlencoded"
	default:
		data, err := json.Marshal(b)
		if err != nil {
			c.t.Fatal(err)
		}
		rd, ctype = bytes.NewReader(data), "application/json"
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp, data
}

var bearer = map[string]string{"Authorization": "Bearer " + testToken}

// must sends a request with the bearer token and fails the test unless
// the status is want; out (when not nil) receives the JSON answer.
func (c *client) must(want int, method, path string, body, out any) {
	c.t.Helper()
	resp, data := c.do(method, path, body, bearer)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, data, err)
		}
	}
}

// enqueue adds a task to queue and returns its ID.
func (c *client) enqueue(queue string, spec map[string]any) string {
	c.t.Helper()
	var out struct {
		ID string `json:"id"`
	}
	c.must(http.StatusCreated, "POST", "/v1/queues/"+queue+"/tasks", spec, &out)
	return out.ID
}

// lease fetches one task of queue for a pull worker and returns its ID
// and lease token.
func (c *client) lease(queue string) (id, token string) {
	c.t.Helper()
	var out struct {
		Tasks []struct {
			ID    string `json:"id"`
			Token string `json:"token"`
		} `json:"tasks"`
	}
	c.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{queue}, "lease_s": 60}, &out)
	if len(out.Tasks) != 1 {
		c.t.Fatalf("fetch %s: %d tasks, want 1", queue, len(out.Tasks))
	}
	return out.Tasks[0].ID, out.Tasks[0].Token
}

// taskState reads a task's state ("" when it does not exist).
func (c *client) taskState(queue, id string) string {
	c.t.Helper()
	resp, data := c.do("GET", "/v1/queues/"+queue+"/tasks/"+id, nil, bearer)
	if resp.StatusCode == http.StatusNotFound {
		return ""
	}
	var out struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		c.t.Fatalf("task %s/%s: %d %s", queue, id, resp.StatusCode, data)
	}
	return out.State
}

// queueStats reads a queue's paused flag and counts by state.
func (c *client) queueStats(queue string) (paused bool, counts map[string]int) {
	c.t.Helper()
	var out struct {
		Paused bool           `json:"paused"`
		Stats  map[string]any `json:"stats"`
	}
	c.must(http.StatusOK, "GET", "/v1/queues/"+queue, nil, &out)
	counts = make(map[string]int)
	for k, v := range out.Stats {
		if f, ok := v.(float64); ok {
			counts[k] = int(f)
		}
	}
	return out.Paused, counts
}

// backends runs fn on the embedded store and on Redis.
func backends(t *testing.T, fn func(t *testing.T, broker string)) {
	t.Run("embedded", func(t *testing.T) { fn(t, "file:"+t.TempDir()) })
	t.Run("redis", func(t *testing.T) { fn(t, redistest.URL(t)) })
}
