package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"
)

// streamCutter is a reverse proxy in front of htq serve that can cut the
// event streams passing through it and refuse new ones, as a proxy or a
// flaky network between the browser and the server would.
type streamCutter struct {
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	blocked bool
	cancels map[*http.Request]context.CancelFunc
}

// newStreamCutter serves a cutter in front of target.
func newStreamCutter(t *testing.T, target string) (*httptest.Server, *streamCutter) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	sc := &streamCutter{proxy: httputil.NewSingleHostReverseProxy(u), cancels: map[*http.Request]context.CancelFunc{}}
	sc.proxy.FlushInterval = -1 // pass each event on at once
	srv := httptest.NewServer(sc)
	t.Cleanup(srv.Close)
	return srv, sc
}

func (sc *streamCutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/events") {
		sc.proxy.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	sc.mu.Lock()
	if sc.blocked {
		sc.mu.Unlock()
		http.Error(w, `{"error":{"code":"unavailable","message":"the proxy refuses event streams"}}`, http.StatusBadGateway)
		return
	}
	r = r.WithContext(ctx)
	sc.cancels[r] = cancel
	sc.mu.Unlock()
	defer func() {
		sc.mu.Lock()
		delete(sc.cancels, r)
		sc.mu.Unlock()
	}()
	sc.proxy.ServeHTTP(w, r)
}

// cut ends every open event stream and refuses new ones until allow.
func (sc *streamCutter) cut() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.blocked = true
	for _, cancel := range sc.cancels {
		cancel()
	}
}

// allow lets event streams through again.
func (sc *streamCutter) allow() {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.blocked = false
}

// TestLiveFallsBackToPolling: the dashboard follows the event stream;
// when the stream drops and cannot be opened again it polls, so counts
// still change without a reload, and it goes back to the stream once the
// stream can be opened.
func TestLiveFallsBackToPolling(t *testing.T) {
	svc := startService(t, "mem:", false)
	c := newClient(t, svc.URL())
	c.enqueue("jobs", map[string]any{"type": "t"})
	front, cutter := newStreamCutter(t, svc.URL())
	ctx := newBrowser(t)
	step(t, ctx, "log in through the proxy",
		chromedp.Navigate(front.URL+"/ui/login"),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="jobs"]`)))
	waitFor(t, ctx, "the event stream", `document.body.dataset.live === 'events'`)
	eval[bool](t, ctx, "(window.__sameDocument = true, true)")

	cutter.cut()
	waitFor(t, ctx, "polling after the stream dropped", `document.body.dataset.live === 'polling'`)
	if got := eval[string](t, ctx, `document.getElementById('live').textContent`); got != "polling 2 s" {
		t.Errorf("the top bar says %q while polling", got)
	}
	c.enqueue("jobs", map[string]any{"type": "t"})
	waitFor(t, ctx, "the pending count of jobs to reach 2 by polling",
		`document.querySelector('#queues tr[data-queue="jobs"] td[data-col="pending"]').textContent === '2'`)

	cutter.allow()
	waitFor(t, ctx, "the event stream again", `document.body.dataset.live === 'events'`)
	eval[bool](t, ctx, "(window.__events = Number(document.body.dataset.events || 0), true)")
	c.enqueue("jobs", map[string]any{"type": "t"})
	waitFor(t, ctx, "an event over the new stream", "Number(document.body.dataset.events || 0) > window.__events")
	waitFor(t, ctx, "the pending count of jobs to reach 3", `document.querySelector('#queues tr[data-queue="jobs"] td[data-col="pending"]').textContent === '3'`)
	if !eval[bool](t, ctx, "window.__sameDocument === true") {
		t.Error("the page reloaded")
	}
}
