package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/jonboulle/clockwork"
)

// sseEvent is one message of an event stream.
type sseEvent struct {
	id, event string
	data      eventJSON
	raw       []byte // the data line
	comment   string
}

// sseClient reads an event stream over real HTTP.
type sseClient struct {
	t      *testing.T
	resp   *http.Response
	events chan sseEvent
}

// openStream opens GET path with the token (and Last-Event-ID when not
// empty) and fails unless the answer is a 200 event stream.
func (e *env) openStream(path, lastID string) *sseClient {
	e.t.Helper()
	req, err := http.NewRequest("GET", e.srv.URL+path, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c := &sseClient{t: e.t, resp: resp, events: make(chan sseEvent, 100)}
	go c.read()
	e.t.Cleanup(c.close)
	return c
}

func (c *sseClient) read() {
	defer close(c.events)
	sc := bufio.NewScanner(c.resp.Body)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.event != "" || ev.comment != "" {
				c.events <- ev
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ": "):
			ev.comment = strings.TrimPrefix(line, ": ")
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			ev.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.raw = []byte(strings.TrimPrefix(line, "data: "))
			if err := json.Unmarshal(ev.raw, &ev.data); err != nil {
				c.t.Errorf("bad data line %q: %v", line, err)
			}
		case strings.HasPrefix(line, "retry: "):
		default:
			c.t.Errorf("unexpected line %q", line)
		}
	}
}

func (c *sseClient) close() { c.resp.Body.Close() }

// next returns the next event (not a comment), failing after 10 s.
func (c *sseClient) next() sseEvent {
	c.t.Helper()
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				c.t.Fatal("the stream ended")
			}
			if ev.event != "" {
				return ev
			}
		case <-time.After(10 * time.Second):
			c.t.Fatal("no event within 10 s")
		}
	}
}

// want fails unless ev is kind of task id (state when not "").
func (ev sseEvent) want(t *testing.T, kind, queue, id, state string) {
	t.Helper()
	d := ev.data
	if ev.event != kind || d.Kind != kind || d.Queue != queue || d.TaskID != id || d.State != state ||
		ev.id == "" || d.ID != ev.id || !strings.HasPrefix(ev.id, queue+":") || d.Time.IsZero() {
		t.Fatalf("event %+v; want %s of %s/%s (%s)", ev, kind, queue, id, state)
	}
}

func TestEventStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		jobs := e.openStream("/v1/events?queue=jobs", "")
		all := e.openStream("/v1/events", "")
		ids := e.enqueueN("jobs", 1, map[string]any{"retention": "1h"})
		e.enqueueN("other", 1, nil)
		var fr fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "worker_id": "w1"}, &fr)
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+ids[0]+"/ack", map[string]any{"token": fr.Tasks[0].Token}, nil)
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/pause", nil, nil)

		first := jobs.next()
		first.want(t, "enqueued", "jobs", ids[0], "pending")
		e.conformsTo("Event", first.raw)
		jobs.next().want(t, "started", "jobs", ids[0], "active")
		jobs.next().want(t, "succeeded", "jobs", ids[0], "completed")
		if ev := jobs.next(); ev.event != "paused" || ev.data.TaskID != "" || ev.data.State != "" {
			t.Fatalf("pause event %+v", ev)
		}
		// The stream of every queue has the other queue's event too.
		seen := map[string]bool{}
		for range 5 {
			seen[all.next().data.Queue] = true
		}
		if !seen["jobs"] || !seen["other"] {
			t.Fatalf("the stream of every queue saw %v", seen)
		}

		// A failure carries its error; resuming after the first event
		// replays the rest, then goes on live.
		fail := e.enqueueN("jobs", 1, map[string]any{"max_retry": 0})
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/resume", nil, nil)
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}}, &fr)
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/tasks/"+fail[0]+"/fail", map[string]any{"token": fr.Tasks[0].Token, "error": "boom"}, nil)
		jobs.next().want(t, "enqueued", "jobs", fail[0], "pending")
		jobs.next()
		jobs.next().want(t, "started", "jobs", fail[0], "active")
		if ev := jobs.next(); ev.event != "failed" || ev.data.State != "archived" || ev.data.Error != "boom" {
			t.Fatalf("failure event %+v", ev)
		} else {
			e.conformsTo("Event", ev.raw)
		}
		resumed := e.openStream("/v1/events?queue=jobs", first.id)
		resumed.next().want(t, "started", "jobs", ids[0], "active")
		resumed.next().want(t, "succeeded", "jobs", ids[0], "completed")
		for _, want := range []string{"paused", "enqueued", "resumed", "started", "failed"} {
			if ev := resumed.next(); ev.event != want {
				t.Fatalf("resumed stream: %+v, want %s", ev, want)
			}
		}
		e.must(http.StatusNoContent, "DELETE", "/v1/queues/jobs/tasks/"+ids[0], nil, nil)
		resumed.next().want(t, "deleted", "jobs", ids[0], "")

		for _, tc := range []struct{ path, lastID string }{
			{"/v1/events?queue=a:b", ""},
			{"/v1/events?queue=" + strings.Repeat("q&queue=q", maxStreamQueues+1), ""},
			{"/v1/events", "nocolon"},
			{"/v1/events?last_event_id=jobs:x", ""},
		} {
			req, _ := http.NewRequest("GET", e.srv.URL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+testToken)
			if tc.lastID != "" {
				req.Header.Set("Last-Event-ID", tc.lastID)
			}
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var body errorBody
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || body.Error.Code != codeInvalidArgument {
				t.Errorf("GET %s (Last-Event-ID %q): %d %+v", tc.path, tc.lastID, resp.StatusCode, body)
			}
		}
	})
}

// TestEventStreamGoWorkers: on Redis, the tasks a Go Server runs through
// its own connection (another machine's, as far as htq serve knows)
// appear in the stream.
func TestEventStreamGoWorkers(t *testing.T) {
	e := newEnv(t, "redis", nil)
	stream := e.openStream("/v1/events?queue=gojobs", "")
	other, err := htq.Open(e.st.String())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	srv := htq.NewServer(other, htq.Config{Concurrency: 1, Queues: map[string]int{"gojobs": 1}, Logger: discardLogger()})
	if err := srv.Start(htq.HandlerFunc(func(context.Context, *htq.Task) error { return nil })); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	info, err := htq.NewClient(other).Enqueue(htq.NewTask("go", nil), htq.Queue("gojobs"))
	if err != nil {
		t.Fatal(err)
	}
	stream.next().want(t, "enqueued", "gojobs", info.ID, "pending")
	stream.next().want(t, "started", "gojobs", info.ID, "active")
	stream.next().want(t, "succeeded", "gojobs", info.ID, "")
}

// TestEventStreamHeartbeatAndShutdown: an idle stream sends a comment
// every 15 s, and the handler's end ends every stream.
func TestEventStreamHeartbeatAndShutdown(t *testing.T) {
	clock := clockwork.NewFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := newEnv(t, "embedded", func(o *Options) { o.clock, o.Context = clock, ctx })
	stream := e.openStream("/v1/events", "")
	// The sampler's and the pull workers' tickers, and the stream's.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := clock.BlockUntilContext(wctx, 3); err != nil {
		t.Fatal(err)
	}
	clock.Advance(streamHeartbeat)
	select {
	case ev := <-stream.events:
		if ev.comment != "ping" {
			t.Fatalf("got %+v, want the heartbeat comment", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no heartbeat")
	}
	cancel()
	select {
	case _, ok := <-stream.events:
		if ok {
			t.Fatal("an event after the shutdown")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end at the shutdown")
	}
}

// TestEventStreamFallsBehind: a stream whose client does not read is
// ended once its buffer is full (here of 10 events), without holding the
// hub or the other streams back.
func TestEventStreamFallsBehind(t *testing.T) {
	e := newEnv(t, "embedded", nil)
	hub := e.h.eventHub
	hub.mu.Lock()
	hub.buffer = 10
	hub.mu.Unlock()
	slow, err := hub.subscribe(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.unsubscribe(slow)
	hub.mu.Lock()
	hub.buffer = streamBuffer
	hub.mu.Unlock()
	fast := e.openStream("/v1/events", "")
	tasks := make([]map[string]any, 20)
	for k := range tasks {
		tasks[k] = map[string]any{"type": "t"}
	}
	e.must(http.StatusCreated, "POST", "/v1/queues/q/tasks/batch", map[string]any{"tasks": tasks}, nil)
	for range tasks {
		fast.next()
	}
	select {
	case <-slow.behind:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow stream was not ended")
	}
}

// TestEventStreamOutlivesWriteTimeout: a stream stays open past the HTTP
// server's write timeout (each write gets its own deadline).
func TestEventStreamOutlivesWriteTimeout(t *testing.T) {
	e := newEnv(t, "embedded", nil)
	srv := httptest.NewUnstartedServer(e.h)
	srv.Config.WriteTimeout = 200 * time.Millisecond
	srv.Start()
	t.Cleanup(srv.Close) // after the stream's client closes (cleanups run last first)
	e.srv = srv
	stream := e.openStream("/v1/events", "")
	time.Sleep(3 * srv.Config.WriteTimeout) // the write timeout must pass
	ids := e.enqueueN("q", 1, nil)
	stream.next().want(t, "enqueued", "q", ids[0], "pending")
}
