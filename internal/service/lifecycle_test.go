package service_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/service"
	"github.com/htqueue/htq/webhook"
)

var (
	tokenRE  = regexp.MustCompile(`htq_[A-Za-z0-9_-]{43}`)
	secretRE = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]{44}`)
)

// With no token configured, the first start generates one, prints it once
// and stores it; the next start on the same data uses it and prints
// nothing. The generated signing secret signs the requests.
func TestGeneratedTokenReused(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		start := func() (*service.Service, string) {
			var out bytes.Buffer
			cfg := testConfig(t, broker)
			cfg.Token, cfg.SigningSecrets, cfg.Stdout = "", nil, &out
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			svc, err := service.Start(ctx, cfg)
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			return svc, out.String()
		}
		stop := func(svc *service.Service) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := svc.Shutdown(ctx); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
		}

		svc, out := start()
		token := tokenRE.FindString(out)
		secret := secretRE.FindString(out)
		if token == "" || secret == "" || svc.Token() != token {
			t.Fatalf("first start printed %q; Token() = %q", out, svc.Token())
		}
		if status, _ := newClient(t, svc.URL(), token).call("GET", "/v1/queues", nil, nil); status != http.StatusOK {
			t.Errorf("generated token: GET /v1/queues = %d", status)
		}
		if status, _ := newClient(t, svc.URL(), token+"x").call("GET", "/v1/queues", nil, nil); status != http.StatusUnauthorized {
			t.Errorf("wrong token: GET /v1/queues = %d, want 401", status)
		}
		stop(svc)

		svc, out = start()
		defer stop(svc)
		if out != "" {
			t.Errorf("second start printed %q, want nothing", out)
		}
		if svc.Token() != token {
			t.Errorf("second start uses token %q, want the stored %q", svc.Token(), token)
		}
		c := newClient(t, svc.URL(), token)
		tg := newTarget(t)
		c.enqueue("signed", urlTask(tg.URL, nil))
		h := tg.next(t, 10*time.Second)
		if err := must(webhook.NewVerifier(secret)).Verify(h.header, h.body); err != nil {
			t.Errorf("request not signed with the generated secret: %v", err)
		}
	})
}

// Two services on one Redis share the queues: tasks enqueued through
// either are dispatched once, and when one stops the other goes on.
func TestTwoServicesShareRedis(t *testing.T) {
	broker := backendRedis(t)
	a := startService(t, testConfig(t, broker))
	bCfg := testConfig(t, broker)
	b := startService(t, bCfg)
	ca, cb := newClient(t, a.URL(), testToken), newClient(t, b.URL(), testToken)
	tg := newTarget(t)
	ca.createQueue("shared", "timing", nil)

	seen := make(map[string]int)
	const n = 40
	for i := 0; i < n; i++ {
		c := ca
		if i%2 == 1 {
			c = cb
		}
		seen[c.enqueue("shared", urlTask(tg.URL, nil))] = 0
	}
	for i := 0; i < n; i++ {
		seen[tg.next(t, 10*time.Second).header.Get("Htq-Task-Id")]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("task %s delivered %d times", id, k)
		}
	}

	// Stop a; b serves the API and dispatches alone, including the tasks
	// enqueued through a before it stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	later := ca.enqueue("shared", urlTask(tg.URL, map[string]any{"options": map[string]any{"delay": "1s"}}))
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if h := tg.next(t, 10*time.Second); h.header.Get("Htq-Task-Id") != later {
		t.Errorf("after a stopped, got task %s, want %s", h.header.Get("Htq-Task-Id"), later)
	}
	id := cb.enqueue("shared", urlTask(tg.URL, nil))
	if h := tg.next(t, 10*time.Second); h.header.Get("Htq-Task-Id") != id {
		t.Errorf("got task %s, want %s", h.header.Get("Htq-Task-Id"), id)
	}
}

// Shutdown lets a running dispatch finish before it returns, and the API
// stops accepting.
func TestShutdownDrains(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		cfg := testConfig(t, broker)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		svc, err := service.Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		c := newClient(t, svc.URL(), testToken)
		tg := newTarget(t)
		release := make(chan struct{})
		tg.setRespond(func(_ int, _ hit, w http.ResponseWriter) {
			<-release
			io.WriteString(w, "ok")
		})
		id := c.enqueue("slow", urlTask(tg.URL, map[string]any{"options": map[string]any{"retention": "1h"}}))
		// Wait until the dispatch is running.
		c.waitTask("slow", id, 10*time.Second, "active", inState("active"))

		var wg sync.WaitGroup
		wg.Add(1)
		shutdownDone := make(chan error, 1)
		go func() {
			defer wg.Done()
			shutdownDone <- svc.Shutdown(ctx)
		}()
		select {
		case err := <-shutdownDone:
			t.Fatalf("Shutdown returned (%v) while a dispatch was running", err)
		case <-time.After(300 * time.Millisecond):
		}
		if _, err := http.Get(svc.URL() + "/healthz"); err == nil {
			t.Error("the API still accepts connections during shutdown")
		}
		close(release)
		wg.Wait()
		if err := <-shutdownDone; err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		select {
		case <-svc.Done():
		default:
			t.Error("Done not closed after Shutdown")
		}

		// The task completed: read it through a fresh service.
		svc2 := startService(t, cfg)
		tv, found := newClient(t, svc2.URL(), testToken).task("slow", id)
		if !found || tv.State != "completed" {
			t.Errorf("after the drain the task is %q (found %v), want completed", tv.State, found)
		}
	})
}

// Bad settings fail Start with an error naming each of them; nothing is
// started.
func TestBadConfig(t *testing.T) {
	cases := []struct {
		name   string
		change func(*service.Config)
		want   []string
	}{
		{"addr", func(c *service.Config) { c.Addr = "localhost" }, []string{"addr"}},
		{"port", func(c *service.Config) { c.Addr = ":99999" }, []string{"addr"}},
		{"storage", func(c *service.Config) { c.Storage = "nowhere" }, []string{"storage"}},
		{"short token", func(c *service.Config) { c.Token = "abc" }, []string{"token", "16"}},
		{"app key without token", func(c *service.Config) { c.HTQAppKey = "k" }, []string{"htq-app-key", "htq-app-token"}},
		{"bad secret", func(c *service.Config) { c.SigningSecrets = []string{"whsec_notbase64!"} }, []string{"signing-secrets"}},
		{"three secrets", func(c *service.Config) { c.SigningSecrets = []string{testSecret, testSecret, testSecret} }, []string{"signing-secrets"}},
		{"bad allowlist", func(c *service.Config) { c.AllowTargets = []string{"10.0.0.0/33"} }, []string{"allow-targets"}},
		{"bad CORS origin", func(c *service.Config) { c.CORSOrigins = []string{"dash.example.com"} }, []string{"cors-origins", "dash.example.com"}},
		{"tz", func(c *service.Config) { c.TimeZone = "Mars/Olympus" }, []string{"tz", "Mars/Olympus"}},
		{"concurrency", func(c *service.Config) { c.Concurrency = -1 }, []string{"concurrency"}},
		{"write timeout", func(c *service.Config) { c.WriteTimeout = 10 * time.Second }, []string{"write-timeout"}},
		{"two at once", func(c *service.Config) { c.Concurrency, c.TimeZone = -3, "Nowhere/Else" }, []string{"concurrency", "tz"}},
		{"redis wait on the embedded store", func(c *service.Config) { c.RedisWaitReplicas = 1 }, []string{"redis-wait-replicas", "Redis storage"}},
		{"negative redis wait", func(c *service.Config) { c.RedisWaitReplicas = -1 }, []string{"redis-wait-replicas", "negative"}},
		{"redis wait timeout alone", func(c *service.Config) {
			c.Storage, c.RedisWaitTimeout = "redis://127.0.0.1:1/0", time.Second
		}, []string{"redis-wait-timeout does nothing"}},
		{"redis wait twice", func(c *service.Config) {
			c.Storage, c.RedisWaitReplicas = "redis://127.0.0.1:1/0?wait_replicas=1", 1
		}, []string{"wait_replicas", "redis-wait-replicas"}},
		{"negative storage timeout", func(c *service.Config) { c.StorageTimeout = -time.Second }, []string{"storage-timeout", "negative"}},
		{"storage timeout twice", func(c *service.Config) {
			c.Storage, c.StorageTimeout = "redis://127.0.0.1:1/0?timeout=2s", time.Second
		}, []string{"storage-timeout", "timeout too"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "mem:")
			tc.change(&cfg)
			svc, err := service.Start(context.Background(), cfg)
			if err == nil {
				svc.Shutdown(context.Background())
				t.Fatal("Start accepted the config")
			}
			if !errors.Is(err, service.ErrInvalidConfig) || !errors.Is(err, htq.ErrInvalidArgument) {
				t.Errorf("error %v does not match ErrInvalidConfig and ErrInvalidArgument", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}

	t.Run("unreachable storage", func(t *testing.T) {
		cfg := testConfig(t, "redis://127.0.0.1:1/0")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := service.Start(ctx, cfg); err == nil || !strings.Contains(err.Error(), "storage") {
			t.Errorf("Start with no Redis: %v", err)
		}
	})
	t.Run("refused storage URL", func(t *testing.T) {
		cfg := testConfig(t, "redis://u:p@ss@127.0.0.1:bad/0")
		_, err := service.Start(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "bad port") {
			t.Fatalf("Start with a bad port: %v", err)
		}
		if strings.Contains(err.Error(), "p@ss") || strings.Contains(err.Error(), "ss@") {
			t.Errorf("error shows the password: %v", err)
		}
	})
	t.Run("address in use", func(t *testing.T) {
		first := startService(t, testConfig(t, "mem:"))
		cfg := testConfig(t, "mem:")
		cfg.Addr = first.Addr()
		if _, err := service.Start(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "listen") {
			t.Errorf("Start on a used port: %v", err)
		}
	})
}

// ValidateFrom names the source of a bad value instead of the setting.
func TestValidateFromNamesSource(t *testing.T) {
	cfg := service.Config{TimeZone: "Mars/Olympus", Concurrency: -1}
	err := cfg.ValidateFrom(func(setting string) string {
		if setting == "tz" {
			return "HTQ_TZ"
		}
		return ""
	})
	var se *service.SettingError
	if !errors.As(err, &se) || se.Setting != "tz" || se.Source != "HTQ_TZ" {
		t.Fatalf("ValidateFrom = %v; want a *SettingError for tz from HTQ_TZ", err)
	}
	if !strings.Contains(err.Error(), `HTQ_TZ: "Mars/Olympus"`) || !strings.Contains(err.Error(), "concurrency: -1") {
		t.Errorf("error %q does not name HTQ_TZ and concurrency", err)
	}
}

// Shutdown cuts a pull worker's long poll short instead of waiting for
// its 30 s.
func TestShutdownEndsLongPoll(t *testing.T) {
	cfg := testConfig(t, "file:"+t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan int, 1)
	go func() {
		// Not c.call: it may not fail the test from this goroutine, and a
		// poll that Shutdown closed before it was answered (the
		// connection ends) is an ended poll too (status 0).
		req, _ := http.NewRequest("POST", svc.URL()+"/v1/fetch", strings.NewReader(`{"queues":["idle"],"count":1,"wait_s":30}`))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- 0
			return
		}
		resp.Body.Close()
		polled <- resp.StatusCode
	}()
	time.Sleep(300 * time.Millisecond) // let the poll start waiting
	start := time.Now()
	if err := svc.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with a long poll open", d)
	}
	select {
	case status := <-polled:
		t.Logf("the long poll ended with status %d", status)
	case <-time.After(5 * time.Second):
		t.Error("the long poll did not end")
	}
}

// With redis-wait-replicas on a Redis that has no replica, a write
// through the API answers 503 replication_timeout, and the write was
// made all the same (a retry finds it, and waits again).
func TestRedisWaitSetting(t *testing.T) {
	cfg := testConfig(t, redistest.URL(t))
	cfg.RedisWaitReplicas, cfg.RedisWaitTimeout = 1, 50*time.Millisecond
	svc := startService(t, cfg)
	c := newClient(t, svc.URL(), testToken)
	spec := map[string]any{"type": "t", "options": map[string]any{"task_id": "w1"}}
	expect503 := func(what string) {
		t.Helper()
		status, body := c.call("POST", "/v1/queues/jobs/tasks", spec, nil)
		if status != http.StatusServiceUnavailable || !strings.Contains(string(body), `"replication_timeout"`) ||
			!strings.Contains(string(body), "written on the primary") {
			t.Fatalf("%s with no replica: %d %s; want 503 replication_timeout saying the write was made", what, status, body)
		}
	}
	// The first enqueue into a new queue stops at the queue's record,
	// which was written; the second one writes the task.
	expect503("first enqueue (queue record)")
	c.must(http.StatusOK, "GET", "/v1/queues/jobs", nil, nil)
	expect503("second enqueue (task)")
	if tv, found := c.task("jobs", "w1"); !found || tv.State != "pending" {
		t.Fatalf("task w1 after replication_timeout: %+v, found %v; want pending", tv, found)
	}
	// The retry finds w1 stored, and waits for its copy again; another
	// task under w1 is a conflict.
	expect503("third enqueue (a retry)")
	other := map[string]any{"type": "other", "options": map[string]any{"task_id": "w1"}}
	if status, body := c.call("POST", "/v1/queues/jobs/tasks", other, nil); status != http.StatusConflict || !strings.Contains(string(body), "task_id_conflict") {
		t.Errorf("another task under w1: %d %s; want 409 task_id_conflict", status, body)
	}
}

// TestEventStreamOutlivesTimeouts: an event stream stays open past the
// HTTP server's read timeout (the request's deadlines are lifted for it)
// and ends when the service shuts down.
func TestEventStreamOutlivesTimeouts(t *testing.T) {
	cfg := testConfig(t, "mem:")
	cfg.ReadTimeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	svc, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", svc.URL()+"/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	time.Sleep(3 * cfg.ReadTimeout) // the read timeout must pass
	c := newClient(t, svc.URL(), testToken)
	if status, data := c.call("POST", "/v1/queues/q/tasks", map[string]any{"type": "t"}, nil); status != http.StatusCreated {
		t.Fatalf("enqueue: %d %s", status, data)
	}
	for line := range lines {
		if line == "event: enqueued" {
			break
		}
	}
	start := time.Now()
	if err := svc.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Shutdown took %v with an event stream open", d)
	}
	for range lines {
	}
}
