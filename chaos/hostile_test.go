package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/service"
)

// hostileAddr is the loopback address the hostile targets listen on, the
// one address the target guard of the service under test allows. The
// canaries listen on every other loopback address the tests reach.
const hostileAddr = "127.0.0.2"

// TestHostileTargets is suite 9: a real htq serve (internal/service, the
// embedded store) runs URL tasks against targets that misbehave — a body
// dripped a byte at a time, headers trickled, a listener that never
// answers, an endless body, endless headers, a redirect loop, redirects to
// the cloud metadata address and to a canary, 429 and 503 storms — while
// canary listeners on the other loopback addresses count every connection
// they get. The target guard allows only 127.0.0.2. Every attempt must end
// within its timeout (1 s) plus 1 s, read at most the documented 64 KiB
// of a body, follow no redirect off its host, and no canary may see a
// connection. During the storms the API keeps answering, and no task is
// tried more often than its backoff and the target's Retry-After allow.
func TestHostileTargets(t *testing.T) {
	skipShort(t)
	canaries := startCanaries(t)
	tg := newHostile(t, canaries.port)
	cfg := service.Config{
		Addr: "127.0.0.1:0", Storage: "file:" + t.TempDir(), Token: "chaos-token-0123456789",
		AllowTargets: []string{hostileAddr + "/32"}, Concurrency: 64, ShutdownTimeout: 5 * time.Second,
		QueueRefreshInterval: time.Second, Logger: quietLogger(), Stdout: io.Discard,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	svc, err := service.Start(ctx, cfg)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	}()
	api := &apiClient{t: t, base: svc.URL(), token: cfg.Token}
	// One attempt per task: its outcome is final at once.
	api.mustCall("POST", "/v1/queues", map[string]any{"name": "hostile", "mode": "real_time", "max_concurrency": 32, "max_attempts": 1}, 201)

	const timeout = time.Second
	const slack = time.Second
	type tcase struct {
		name, url  string
		state      string // the task's final state
		errSays    string // in its last error
		slowTarget bool   // the target holds the request until htq gives up
	}
	cases := []tcase{
		{"body dripped a byte every 100 ms", tg.url("/drip"), "archived", "timeout", true},
		{"headers trickled a byte every 20 ms", "http://" + tg.rawAddr("trickle"), "archived", "timeout", true},
		{"a listener that never answers", "http://" + tg.rawAddr("silent"), "archived", "timeout", true},
		{"an endless body", tg.url("/endless"), "completed", "", false},
		{"endless headers", "http://" + tg.rawAddr("headers"), "archived", "header", false},
		{"a redirect loop", tg.url("/loop"), "archived", "redirect", false},
		{"a redirect to 169.254.169.254", tg.url("/metadata"), "archived", "redirect", false},
		{"a redirect to a canary", tg.url("/canary"), "archived", "redirect", false},
		{"localhost, which resolves to a canary", fmt.Sprintf("http://localhost:%d/", canaries.port), "archived", "not allowed", false},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = api.enqueueURL("hostile", c.url, timeout)
	}
	var worst time.Duration
	for i, c := range cases {
		task := api.waitFinal("hostile", ids[i], 30*time.Second)
		if task.State != c.state || !strings.Contains(strings.ToLower(task.LastError), c.errSays) {
			t.Errorf("%s: %s, last error %q; want %s with %q", c.name, task.State, task.LastError, c.state, c.errSays)
		}
		if c.slowTarget {
			held := tg.held(ids[i])
			worst = max(worst, held)
			if held > timeout+slack || held < timeout-100*time.Millisecond {
				t.Errorf("%s: the target held the request %v; want the %v timeout, within %v", c.name, held, timeout, slack)
			}
		}
		t.Logf("%s: %s, %q", c.name, task.State, task.LastError)
	}

	// The endless body: 64 KiB kept, the rest never read.
	end := api.task("hostile", ids[3])
	var res struct {
		Body      string `json:"body"`
		Truncated bool   `json:"truncated"`
	}
	if err := json.Unmarshal(end.Result, &res); err != nil || !res.Truncated || len(res.Body) > 64<<10 {
		t.Errorf("endless body: result of %d bytes, truncated %v (%v); want at most 64 KiB, truncated", len(res.Body), res.Truncated, err)
	}
	endlessHeld := tg.held(ids[3])
	if endlessHeld > slack {
		t.Errorf("endless body: the target wrote for %v before htq closed the connection", endlessHeld)
	}
	if n := tg.hits("/loop"); n != 4 {
		t.Errorf("redirect loop: %d requests; want 4 (one and three redirects)", n)
	}

	// Targets the API refuses at once: IP literals of the canaries.
	for _, u := range []string{
		fmt.Sprintf("http://127.0.0.1:%d/", canaries.port), fmt.Sprintf("http://127.0.0.3:%d/", canaries.port),
		fmt.Sprintf("http://[::1]:%d/", canaries.port), fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/", canaries.port),
		fmt.Sprintf("http://0.0.0.0:%d/", canaries.port), "http://169.254.169.254/latest/meta-data/",
	} {
		status, body := api.call("POST", "/v1/queues/hostile/tasks", map[string]any{"url": u})
		if status != 422 || !strings.Contains(string(body), "target_not_allowed") {
			t.Errorf("enqueue %s: %d %s; want 422 target_not_allowed", u, status, body)
		}
	}

	// Storms: 30 tasks against a target answering 429 with Retry-After: 2,
	// 30 against one answering 503 (the queue's backoff, 1 s doubling,
	// applies), for 5 s, while the API is timed.
	api.mustCall("POST", "/v1/queues", map[string]any{"name": "storm", "mode": "real_time", "max_concurrency": 64,
		"max_attempts": 100, "min_backoff_ms": 1000}, 201)
	const storm = 5 * time.Second
	stormStart := time.Now()
	var stormIDs []string
	for i := range 60 {
		path := "/429"
		if i%2 == 1 {
			path = "/503"
		}
		stormIDs = append(stormIDs, api.enqueueURL("storm", tg.url(path), timeout))
	}
	var lat []time.Duration
	for time.Since(stormStart) < storm {
		start := time.Now()
		api.mustCall("GET", "/v1/queues/storm", nil, 200)
		lat = append(lat, time.Since(start))
		time.Sleep(100 * time.Millisecond) // ten API calls a second
	}
	slices.Sort(lat)
	slowest, median := lat[len(lat)-1], lat[len(lat)/2]
	elapsed := time.Since(stormStart)
	maxHits := map[string]int{}
	for i, id := range stormIDs {
		path := "/429"
		if i%2 == 1 {
			path = "/503"
		}
		hit, _ := tg.get(id)
		maxHits[path] = max(maxHits[path], hit.hits)
	}
	// Retry-After 2 s: an attempt at 0, 2, 4 s. Backoff 1 s doubling
	// (jittered): 0, ≥1, ≥3 s.
	if maxHits["/429"] > 3 || maxHits["/503"] > 4 {
		t.Errorf("in %v a task was tried %d times against 429 (Retry-After: 2) and %d against 503; want at most 3 and 4",
			elapsed, maxHits["/429"], maxHits["/503"])
	}
	if slowest > time.Second {
		t.Errorf("the API took %v to answer during the storm", slowest)
	}
	api.mustCall("POST", "/v1/queues/storm/pause", nil, 204)

	if n := canaries.conns.Load(); n != 0 {
		t.Errorf("the canaries accepted %d connections", n)
	}
	endless, _ := tg.get(ids[3])
	figure(t, "attempt timeout %v: the slow targets were held at most %v; endless body: %d bytes kept, target writing for %v, %d bytes written into the socket; redirect loop: %d requests; storms of 30 tasks each for %v: at most %d tries against 429 (Retry-After 2 s) and %d against 503, API answered in %v (median), %v (slowest); canary connections %d",
		timeout, worst.Round(time.Millisecond), len(res.Body), endlessHeld.Round(time.Millisecond), endless.written,
		tg.hits("/loop"), elapsed.Round(100*time.Millisecond), maxHits["/429"], maxHits["/503"], median.Round(time.Millisecond), slowest.Round(time.Millisecond), canaries.conns.Load())
}

// canaries are listeners on the loopback addresses a URL task must never
// reach (127.0.0.1, 127.0.0.3, ::1), all on one port; conns counts the
// connections they accepted.
type canaries struct {
	port  int
	conns atomic.Int64
}

func startCanaries(t *testing.T) *canaries {
	t.Helper()
	c := &canaries{}
	for attempt := 0; ; attempt++ {
		l1, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l1.Addr().(*net.TCPAddr).Port
		ls := []net.Listener{l1}
		ok := true
		for _, a := range []string{"127.0.0.3", "[::1]", hostileAddr} {
			l, err := net.Listen("tcp", a+":"+strconv.Itoa(port))
			if err != nil {
				if a == "[::1]" {
					continue // no IPv6 loopback here
				}
				ok = false
				break
			}
			if a == hostileAddr {
				l.Close() // only reserved: the hostile target takes this port there
				continue
			}
			ls = append(ls, l)
		}
		if !ok {
			for _, l := range ls {
				l.Close()
			}
			if attempt == 10 {
				t.Fatal("no port free on every loopback address")
			}
			continue
		}
		c.port = port
		for _, l := range ls {
			go func() {
				for {
					conn, err := l.Accept()
					if err != nil {
						return
					}
					c.conns.Add(1)
					conn.Close()
				}
			}()
			t.Cleanup(func() { l.Close() })
		}
		return c
	}
}

// hostile is the set of misbehaving targets on 127.0.0.2: an HTTP server
// (paths below) and raw TCP listeners. It records, by task ID, when each
// request arrived, how long the target held it, and the bytes it wrote.
type hostile struct {
	t      *testing.T
	base   string
	raw    map[string]string // kind → address
	mu     sync.Mutex
	byTask map[string]*hostileHit
	paths  map[string]int
	wg     sync.WaitGroup
}

type hostileHit struct {
	hits    int
	held    time.Duration
	written int64
}

func newHostile(t *testing.T, canaryPort int) *hostile {
	t.Helper()
	h := &hostile{t: t, raw: map[string]string{}, byTask: map[string]*hostileHit{}, paths: map[string]int{}}
	l, err := net.Listen("tcp", hostileAddr+":0")
	if err != nil {
		t.Fatalf("listen on %s (Linux routes all of 127/8 to loopback): %v", hostileAddr, err)
	}
	h.base = "http://" + l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		n := h.serve(w, r, canaryPort)
		h.note(r.Header.Get("Htq-Task-Id"), r.URL.Path, time.Since(start), n)
	})}
	go srv.Serve(l)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	})
	var raws []net.Listener
	t.Cleanup(func() {
		for _, l := range raws {
			l.Close()
		}
		h.wg.Wait()
	})
	for _, kind := range []string{"trickle", "silent", "headers"} {
		l, err := net.Listen("tcp", hostileAddr+":0")
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, l)
		h.raw[kind] = l.Addr().String()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				h.wg.Add(1)
				go func() {
					defer h.wg.Done()
					defer conn.Close()
					h.serveRaw(kind, conn)
				}()
			}
		}()
	}
	return h
}

func (h *hostile) url(path string) string { return h.base + path }

func (h *hostile) rawAddr(kind string) string { return h.raw[kind] }

// serve answers one request by its path and returns the body bytes it
// wrote.
func (h *hostile) serve(w http.ResponseWriter, r *http.Request, canaryPort int) int64 {
	var n int64
	switch r.URL.Path {
	case "/drip":
		w.WriteHeader(200)
		for {
			if _, err := w.Write([]byte("z")); err != nil {
				return n
			}
			n++
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return n
			case <-time.After(100 * time.Millisecond): // the drip is the test
			}
		}
	case "/endless":
		chunk := bytes.Repeat([]byte("e"), 32<<10)
		for {
			k, err := w.Write(chunk)
			n += int64(k)
			if err != nil {
				return n
			}
		}
	case "/loop":
		http.Redirect(w, r, "/loop", http.StatusFound)
	case "/metadata":
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/iam/", http.StatusFound)
	case "/canary":
		http.Redirect(w, r, fmt.Sprintf("http://127.0.0.1:%d/", canaryPort), http.StatusTemporaryRedirect)
	case "/429":
		w.Header().Set("Retry-After", "2")
		w.WriteHeader(http.StatusTooManyRequests)
	case "/503":
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	return n
}

// serveRaw misbehaves below HTTP: "trickle" sends a status line, then a
// header byte every 20 ms; "silent" reads and never answers; "headers"
// sends header lines without end. Each stops once htq closes the
// connection, and records how long it held it.
func (h *hostile) serveRaw(kind string, conn net.Conn) {
	start := time.Now()
	br := bufio.NewReader(conn)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	id := req.Header.Get("Htq-Task-Id")
	gone := make(chan struct{})
	var goneAt time.Time
	go func() {
		_, _ = io.Copy(io.Discard, br) // returns when htq closes the connection
		goneAt = time.Now()
		close(gone)
	}()
	var n int64
	defer func() {
		select {
		case <-gone:
		case <-time.After(time.Minute):
			_ = conn.Close()
			<-gone
		}
		h.note(id, "raw:"+kind, goneAt.Sub(start), n)
	}()
	switch kind {
	case "trickle":
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\n"); err != nil {
			return
		}
		for {
			select {
			case <-gone:
				return
			case <-time.After(20 * time.Millisecond): // the trickle is the test
			}
			if _, err := conn.Write([]byte("X")); err != nil {
				return
			}
			n++
		}
	case "silent":
	case "headers":
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\n"); err != nil {
			return
		}
		line := "X-Pad: " + strings.Repeat("p", 1000) + "\r\n"
		for {
			k, err := io.WriteString(conn, line)
			n += int64(k)
			if err != nil {
				return
			}
		}
	}
}

func (h *hostile) note(id, path string, held time.Duration, written int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.paths[path]++
	hit := h.byTask[id]
	if hit == nil {
		hit = &hostileHit{}
		h.byTask[id] = hit
	}
	hit.hits++
	hit.held = max(hit.held, held)
	hit.written += written
}

// get returns what the target recorded of the task's requests.
func (h *hostile) get(id string) (hostileHit, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hit := h.byTask[id]; hit != nil {
		return *hit, true
	}
	return hostileHit{}, false
}

// held waits (at most 5 s) until the target has recorded the end of the
// task's request, and returns how long it held it.
func (h *hostile) held(id string) time.Duration {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if hit, ok := h.get(id); ok {
			return hit.held
		}
		time.Sleep(10 * time.Millisecond) // the target notices the close on its own time
	}
	return -1
}

func (h *hostile) hits(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.paths[path]
}

// apiClient calls htq serve's native API.
type apiClient struct {
	t     *testing.T
	base  string
	token string
}

// call sends a JSON request and returns the status and the body.
func (c *apiClient) call(method, path string, body any) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, out
}

func (c *apiClient) mustCall(method, path string, body any, want int) []byte {
	c.t.Helper()
	status, out := c.call(method, path, body)
	if status != want {
		c.t.Fatalf("%s %s: %d %s; want %d", method, path, status, out, want)
	}
	return out
}

// enqueueURL enqueues a URL task with the given attempt timeout, kept an
// hour once completed, and returns its ID.
func (c *apiClient) enqueueURL(queue, url string, timeout time.Duration) string {
	c.t.Helper()
	out := c.mustCall("POST", "/v1/queues/"+queue+"/tasks", map[string]any{
		"url": url, "method": "GET", "timeout_ms": timeout.Milliseconds(), "options": map[string]any{"retention": "1h"},
	}, 201)
	var v struct{ ID string }
	if err := json.Unmarshal(out, &v); err != nil || v.ID == "" {
		c.t.Fatalf("enqueue answer %s: %v", out, err)
	}
	return v.ID
}

// apiTask is the part of the API's task the suite reads.
type apiTask struct {
	State     string          `json:"state"`
	LastError string          `json:"last_error"`
	Result    json.RawMessage `json:"result"`
}

func (c *apiClient) task(queue, id string) apiTask {
	c.t.Helper()
	var v apiTask
	if err := json.Unmarshal(c.mustCall("GET", "/v1/queues/"+queue+"/tasks/"+id, nil, 200), &v); err != nil {
		c.t.Fatal(err)
	}
	return v
}

// waitFinal waits until the task is completed or archived (polling the
// API every 50 ms) and returns it.
func (c *apiClient) waitFinal(queue, id string, d time.Duration) apiTask {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := c.task(queue, id)
		if v.State == "completed" || v.State == "archived" {
			return v
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s still %s after %v", id, v.State, d)
		}
		time.Sleep(50 * time.Millisecond) // the outcome is in the storage; nothing signals it
	}
}
