package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/service"
)

// The browser tests drive a real headless Chromium (Debian's chromium
// package; `make test` installs it) through the dashboard of a real htq
// serve. A missing browser fails them: it is never a skip.

// chromiumPath is where Debian puts the browser; $CHROMIUM overrides it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		t.Fatalf("the browser tests need Chromium at %s (install it: `apt-get install chromium`, or run `make test`; or set CHROMIUM): %v", path, err)
	}
	return path
}

// newBrowser starts a headless Chromium for the test, with a 1360×860
// window, and returns its first tab.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", "new"),
		chromedp.NoSandbox, // containers give no user namespaces
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1360, 860),
		chromedp.Flag("lang", "en-US"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		cancelAlloc()
		t.Fatalf("start Chromium: %v", err)
	}
	// The page's console goes to the test log; an uncaught exception
	// fails the test.
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.IsException() {
				t.Errorf("page exception: %s", m)
			} else {
				t.Logf("page console: %s", m)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-consoleDone
	})
	return ctx
}

// waitLimit bounds each step and wait of the browser tests: generous,
// because the machine's cores are shared and a loaded one is slow.
const waitLimit = time.Minute

// step runs browser actions with a time limit, failing the test with what.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v (the page then: %s)", what, err, failureShot(t, ctx))
	}
}

// failureShot saves the viewport in the temporary directory, for the
// message of a failed step, and returns where.
func failureShot(t *testing.T, ctx context.Context) string {
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	data, err := chromedp.Run(sctx, chromedp.CaptureScreenshot())
	if err != nil {
		return "no screenshot: " + err.Error()
	}
	path := filepath.Join(os.TempDir(), "htq-ui-"+strings.ReplaceAll(t.Name(), "/", "-")+".png")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return err.Error()
	}
	return path
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript condition until it is true.
func waitFor(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, waitLimit)
	defer cancel()
	if _, err := chromedp.Run(sctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("waiting for %s (%s): %v (the page then: %s)", what, cond, err, failureShot(t, ctx))
	}
}

// updateScreenshots makes TestDashboard write its screenshots into
// docs/img (the README shows them):
//
//	go test ./internal/ui -run TestDashboard/embedded -screenshots
//
// Without it they go to a temporary directory, so that running the tests
// leaves the tree as it was (every run draws other times and figures).
var updateScreenshots = flag.Bool("screenshots", false, "write TestDashboard's screenshots into docs/img")

// screenshotDir is where the test's screenshots go.
func screenshotDir(t *testing.T) string {
	if *updateScreenshots {
		return filepath.Join("..", "..", "docs", "img")
	}
	return t.TempDir()
}

// screenshot saves the whole page as dir/<name>.png, once it is a full-width PNG.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	// No toast in the picture; let the last render settle (fonts, layout).
	eval[bool](t, ctx, "(document.getElementById('toasts')?.replaceChildren(), true)")
	step(t, ctx, "settle before "+name, chromedp.Sleep(300*time.Millisecond))
	data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil || img.Bounds().Dx() < 1000 {
		t.Fatalf("screenshot %s: not a full-width PNG: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fixture is what the dashboard test puts in the storage.
type fixture struct {
	archivedID string // an archived task of "reports"
	urlTaskID  string // a URL task of "webhooks" whose target answered 500
	tickerID   string // a schedule that ticks every second
	priorityID string // a pending task of priority 5 in "thumbnails"
	keyID      string // a pending task with the key "acme" in "thumbnails"
}

// seed fills a service with queues in every state, a URL task that failed
// on a 500, groups of aggregating tasks, schedules and a paused queue.
func seed(t *testing.T, svc *service.Service, c *client) fixture {
	t.Helper()
	var f fixture
	for i := 1; i <= 12; i++ {
		c.enqueue("emails", map[string]any{"type": "email:send", "payload": map[string]any{"to": fmt.Sprintf("user%d@example.com", i), "template": "welcome"}})
	}
	for i := 1; i <= 4; i++ {
		c.enqueue("reports", map[string]any{"type": "report:build", "payload": map[string]any{"report": i}, "options": map[string]any{"delay": fmt.Sprintf("%dm", 5*i)}})
	}
	// Three tasks for a pull worker: one fails and will be retried, one
	// fails for good, one completes with a result.
	for i := 1; i <= 3; i++ {
		c.enqueue("reports", map[string]any{"type": "report:export", "payload": map[string]any{"export": i}, "options": map[string]any{"retention": "1h"}})
	}
	id, tok := c.lease("reports")
	c.must(http.StatusOK, "POST", "/v1/queues/reports/tasks/"+id+"/fail", map[string]any{"token": tok, "error": "connection reset by peer", "retry_in_s": 600}, nil)
	f.archivedID, tok = c.lease("reports")
	c.must(http.StatusOK, "POST", "/v1/queues/reports/tasks/"+f.archivedID+"/fail", map[string]any{"token": tok, "error": "template report.tmpl: no such file", "skip_retry": true}, nil)
	id, tok = c.lease("reports")
	c.must(http.StatusNoContent, "POST", "/v1/queues/reports/tasks/"+id+"/ack", map[string]any{"token": tok, "result": map[string]any{"url": "s3://reports/export-3.csv", "rows": 1204}}, nil)

	c.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "thumbnails", "mode": "pull"}, nil)
	c.enqueue("thumbnails", map[string]any{"type": "image:resize", "payload_base64": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="})
	// A task of a priority and one with a fair-sharing key, for the
	// task list's marks (the queue is paused: they stay pending).
	f.priorityID = c.enqueue("thumbnails", map[string]any{"type": "image:resize", "payload": map[string]any{"w": 64}, "options": map[string]any{"priority": 5}})
	f.keyID = c.enqueue("thumbnails", map[string]any{"type": "image:resize", "payload": map[string]any{"w": 32}, "options": map[string]any{"key": "acme"}})
	c.must(http.StatusNoContent, "POST", "/v1/queues/thumbnails/pause", nil, nil)

	// A URL queue whose target fails: the task waits for its retry an hour on.
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream database is down", http.StatusInternalServerError)
	}))
	t.Cleanup(target.Close)
	c.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "webhooks", "mode": "real_time", "min_backoff_ms": 3600000}, nil)
	f.urlTaskID = c.enqueue("webhooks", map[string]any{"url": target.URL + "/hooks/order-paid", "method": "POST",
		"headers": map[string]string{"Content-Type": "application/json"}, "body": `{"order":1042,"amount":"19.90"}`})
	deadline := time.Now().Add(15 * time.Second)
	for c.taskState("webhooks", f.urlTaskID) != "retry" {
		if time.Now().After(deadline) {
			t.Fatalf("URL task %s not in retry after its 500", f.urlTaskID)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Groups cannot be made over HTTP (htq serve refuses options.group:
	// it runs no aggregator): a Go program sharing the storage makes them,
	// here through the service's own storage.
	for i := range 3 {
		c.enqueue("digests", map[string]any{"type": "digest:add", "payload": map[string]any{"item": i}})
	}
	gc := htq.NewClient(svc.Storage())
	for i, g := range []string{"user-42", "user-42", "user-42", "user-7"} {
		if _, err := gc.Enqueue(htq.NewTask("digest:item", []byte(fmt.Sprintf(`{"item":%d}`, i))), htq.Queue("digests"), htq.Group(g)); err != nil {
			t.Fatal(err)
		}
	}

	// The schedules enqueue into queues whose counts the test does not
	// check: a run may cross one of their ticks.
	c.must(http.StatusCreated, "POST", "/v1/schedules", map[string]any{"cron": "0 6 * * *", "queue": "reports", "task": map[string]any{"type": "report:daily", "payload": map[string]any{"kind": "sales"}}}, nil)
	c.must(http.StatusCreated, "POST", "/v1/schedules", map[string]any{"cron": "@every 15m", "queue": "digests", "task": map[string]any{"type": "digest:send", "payload": map[string]any{}}}, nil)
	var sched struct{ ID string }
	c.must(http.StatusCreated, "POST", "/v1/schedules", map[string]any{"cron": "@every 1s", "queue": "digests", "task": map[string]any{"type": "digest:tick"}}, &sched)
	f.tickerID = sched.ID
	return f
}

// work keeps queue "orders" busy until stop is closed, as producers and a
// pull worker would: every 200 ms it enqueues a few tasks, and completes
// most of those it fetches and fails the others, so the charts have
// something to show. It returns when stop is closed; the first error
// ends it and is returned.
func work(base string, stop <-chan struct{}) error {
	hc := &http.Client{Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	post := func(path string, body any, out any) error {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		req, err := http.NewRequest("POST", base+path, bytes.NewReader(data))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			return fmt.Errorf("POST %s: status %d", path, resp.StatusCode)
		}
		if out != nil {
			return json.NewDecoder(resp.Body).Decode(out)
		}
		return nil
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
		tasks := make([]map[string]any, 3+n%5)
		for i := range tasks {
			tasks[i] = map[string]any{"type": "order:charge", "payload": map[string]any{"order": n*10 + i}}
		}
		if err := post("/v1/queues/orders/tasks/batch", map[string]any{"tasks": tasks}, nil); err != nil {
			return err
		}
		var got struct {
			Tasks []struct{ ID, Token string } `json:"tasks"`
		}
		if err := post("/v1/fetch", map[string]any{"queues": []string{"orders"}, "count": 2 + n%4}, &got); err != nil {
			return err
		}
		for i, t := range got.Tasks {
			if (n+i)%7 == 0 {
				err := post("/v1/queues/orders/tasks/"+t.ID+"/fail", map[string]any{"token": t.Token, "error": "card declined", "retry_in_s": 3600}, nil)
				if err != nil {
					return err
				}
				continue
			}
			if err := post("/v1/queues/orders/tasks/"+t.ID+"/ack", map[string]any{"token": t.Token}, nil); err != nil {
				return err
			}
		}
	}
}

// TestDashboard goes through the dashboard as a user would, on each
// backend: login (a wrong token refused, the right one accepted), the
// overview, pausing a queue, a count changing live after an enqueue from
// outside, running an archived task, the task page of a URL task, a bulk
// action after its confirmation, the servers and schedules pages, and
// logout. It takes a screenshot of every page (see updateScreenshots).
func TestDashboard(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		dashboard(t, broker, screenshotDir(t))
	})
}

func dashboard(t *testing.T, broker, shots string) {
	svc := startService(t, broker, false)
	c := newClient(t, svc.URL())
	f := seed(t, svc, c)
	ctx := newBrowser(t)
	base := svc.URL()

	// Login: a wrong token is refused, the right one opens the overview.
	step(t, ctx, "open the dashboard", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if loc := eval[string](t, ctx, "location.pathname"); loc != "/ui/login" {
		t.Fatalf("without a session the dashboard shows %s, want the login page", loc)
	}
	screenshot(t, ctx, shots, "login")
	step(t, ctx, "log in with a wrong token",
		chromedp.SendKeys(chromedp.CSS("#token"), "wrong-token-0123456789"),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")))
	if loc := eval[string](t, ctx, "location.pathname"); loc != "/ui/login" {
		t.Fatalf("a wrong token led to %s", loc)
	}
	step(t, ctx, "log in with the token",
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="emails"]`)))

	// The overview: every queue with its counts.
	for q, want := range map[string]string{"emails": "12", "reports": "4"} {
		col := map[string]string{"emails": "pending", "reports": "scheduled"}[q]
		got := eval[string](t, ctx, fmt.Sprintf(`document.querySelector('#queues tr[data-queue="%s"] td[data-col="%s"]').textContent`, q, col))
		if got != want {
			t.Errorf("overview: %s %s = %q, want %s", q, col, got, want)
		}
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#queues tbody tr').length`); n != 5 {
		t.Errorf("overview shows %d queues, want 5", n)
	}
	// A busy queue from now on, for the rates and the charts.
	stop, worked := make(chan struct{}), make(chan error, 1)
	go func() { worked <- work(base, stop) }()
	defer func() {
		if stop != nil {
			close(stop)
			<-worked
		}
	}()
	waitFor(t, ctx, "the paused badge of thumbnails", `!!document.querySelector('#queues tr[data-queue="thumbnails"] .badge-paused')`)
	waitFor(t, ctx, "the event stream", `document.body.dataset.live === 'events'`)

	// A count changes live after an enqueue from outside, without a reload
	// (and, with an event stream, because of its events).
	eval[bool](t, ctx, "(window.__sameDocument = true, window.__events = Number(document.body.dataset.events || 0), true)")
	for i := 0; i < 3; i++ {
		c.enqueue("emails", map[string]any{"type": "email:send", "payload": map[string]any{"to": fmt.Sprintf("late%d@example.com", i)}})
	}
	waitFor(t, ctx, "the pending count of emails to reach 15",
		`document.querySelector('#queues tr[data-queue="emails"] td[data-col="pending"]').textContent === '15'`)
	if !eval[bool](t, ctx, "window.__sameDocument === true") {
		t.Error("the page reloaded to show the new count")
	}
	waitFor(t, ctx, "events after the enqueues", "Number(document.body.dataset.events || 0) > window.__events")
	// The rates and the charts of the busy queue.
	waitFor(t, ctx, "orders on the overview", `!!document.querySelector('#queues tr[data-queue="orders"]')`)
	waitFor(t, ctx, "a processing rate for orders",
		`Number(document.querySelector('#queues tr[data-queue="orders"] td[data-col="processed-rate"]').textContent.replace(/,/g, '')) > 0`)
	// A refresh changes the figures of a row in place: the button under
	// the pointer stays the same element, so no click is lost.
	eval[bool](t, ctx, `(window.__pause = document.querySelector('#queues tr[data-queue="orders"] button[data-action="pause"]'),
		window.__size = document.querySelector('#queues tr[data-queue="orders"] td[data-col="pending"]').textContent,
		window.__renders = Number(document.body.dataset.renders), true)`)
	waitFor(t, ctx, "two more refreshes", `Number(document.body.dataset.renders) >= window.__renders + 2`)
	if !eval[bool](t, ctx, `document.querySelector('#queues tr[data-queue="orders"] button[data-action="pause"]') === window.__pause`) {
		t.Error("a refresh replaced the pause button of a busy queue's row")
	}
	waitFor(t, ctx, "samples for the charts", `Number(document.body.dataset.renders) >= 7`)
	screenshot(t, ctx, shots, "overview")
	close(stop)
	stop = nil
	if err := <-worked; err != nil {
		t.Fatalf("the busy queue's worker: %v", err)
	}

	// Pause a queue from the overview.
	step(t, ctx, "pause emails", chromedp.Click(chromedp.CSS(`#queues tr[data-queue="emails"] button[data-action="pause"]`)))
	waitFor(t, ctx, "the paused badge of emails", `!!document.querySelector('#queues tr[data-queue="emails"] .badge-paused')`)
	if paused, _ := c.queueStats("emails"); !paused {
		t.Error("the dashboard shows emails paused, the API does not")
	}

	// A queue: its archived tab; run the archived task.
	step(t, ctx, "open reports",
		chromedp.Click(chromedp.CSS(`#queues tr[data-queue="reports"] a.queue-name`)),
		chromedp.WaitVisible(chromedp.CSS(`.tabs a[data-tab="archived"]`)),
		chromedp.Click(chromedp.CSS(`.tabs a[data-tab="archived"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks tr[data-task="`+f.archivedID+`"]`)))
	step(t, ctx, "run the archived task", chromedp.Click(chromedp.CSS(`#tasks tr[data-task="`+f.archivedID+`"] button[data-action="run"]`)))
	waitFor(t, ctx, "the run task to leave the archived list", `!document.querySelector('#tasks tr[data-task="`+f.archivedID+`"]')`)
	if st := c.taskState("reports", f.archivedID); st != "pending" {
		t.Errorf("the task run from the dashboard is %q, want pending", st)
	}
	// A worker takes it; cancel it from the active tab, and the worker
	// hears of it at its next heartbeat.
	id, tok := c.lease("reports")
	step(t, ctx, "cancel the active task",
		chromedp.Click(chromedp.CSS(`.tabs a[data-tab="active"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#tasks tr[data-task="`+id+`"] button[data-action="cancel"]`)),
		chromedp.Click(chromedp.CSS(`#tasks tr[data-task="`+id+`"] button[data-action="cancel"]`)))
	waitFor(t, ctx, "the cancel's toast", `[...document.querySelectorAll('.toast')].some((el) => el.textContent.includes('asked to stop'))`)
	var beat struct {
		Canceled bool `json:"canceled"`
	}
	c.must(http.StatusOK, "POST", "/v1/queues/reports/tasks/"+id+"/heartbeat", map[string]any{"token": tok}, &beat)
	if !beat.Canceled {
		t.Error("the worker's heartbeat does not say canceled after the dashboard's cancel")
	}
	c.must(http.StatusOK, "POST", "/v1/queues/reports/tasks/"+id+"/fail", map[string]any{"token": tok, "error": "canceled", "retry_in_s": 3600}, nil)

	step(t, ctx, "the retry tab", chromedp.Click(chromedp.CSS(`.tabs a[data-tab="retry"]`)), chromedp.WaitVisible(chromedp.CSS(`#tasks td.error-cell`)))
	// The queue's last 14 days, from GET /v1/queues/{queue}/history: today
	// counts the attempts that ended above.
	waitFor(t, ctx, "the daily history chart", `!!document.querySelector('#history-chart')`)
	if got := eval[string](t, ctx, `document.querySelector('#history-chart .legend-ok b').textContent`); got == "0" || got == "" {
		t.Errorf("the history chart counts %q processed attempts", got)
	}
	screenshot(t, ctx, shots, "queue")

	// Find a task by ID: the URL task's page, with its target and last status.
	step(t, ctx, "find the URL task",
		chromedp.Navigate(base+"/ui/queues/webhooks"),
		chromedp.WaitVisible(chromedp.CSS(`form.search input`)),
		chromedp.SendKeys(chromedp.CSS(`form.search input`), f.urlTaskID),
		chromedp.Click(chromedp.CSS(`form.search button`)),
		chromedp.WaitVisible(chromedp.CSS(`#last-status`)))
	if got := eval[string](t, ctx, `document.querySelector('#last-status .badge').textContent`); got != "500" {
		t.Errorf("last response status %q, want 500", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('#url-target td.mono').textContent`); got == "" || !bytes.Contains([]byte(got), []byte("/hooks/order-paid")) {
		t.Errorf("URL task target %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('#payload-view').dataset.view`); got != "JSON" {
		t.Errorf("payload shown as %q first, want JSON", got)
	}
	screenshot(t, ctx, shots, "task")
	step(t, ctx, "show the payload in hex", chromedp.Click(chromedp.CSS(`.viewer:has(#payload-view) button[data-view="Hex"]`)))
	if got := eval[string](t, ctx, `document.querySelector('#payload-view').textContent.slice(0, 8)`); got != "00000000" {
		t.Errorf("hex view starts %q", got)
	}

	// The groups tab lists the groups with their sizes; a group opens its
	// aggregating tasks, and "Run all" sends them to pending in one call.
	step(t, ctx, "the groups tab", chromedp.Navigate(base+"/ui/queues/digests?state=groups"), chromedp.WaitVisible(chromedp.CSS(`table.groups tr[data-group="user-42"]`)))
	if got := eval[string](t, ctx, `document.querySelector('table.groups tr[data-group="user-42"] td.num').textContent`); got != "3" {
		t.Errorf("group user-42 shows %q tasks, want 3", got)
	}
	screenshot(t, ctx, shots, "groups")
	step(t, ctx, "open group user-42",
		chromedp.Click(chromedp.CSS(`table.groups tr[data-group="user-42"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-bulk="run"]`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('#tasks tbody tr').length`); n != 3 {
		t.Errorf("group user-42 lists %d tasks, want 3", n)
	}
	step(t, ctx, "run the group, confirmed", chromedp.Click(chromedp.CSS(`button[data-bulk="run"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	waitFor(t, ctx, "the group's tasks to leave", `document.querySelectorAll('#tasks tbody tr').length === 0`)
	if _, counts := c.queueStats("digests"); counts["aggregating"] != 1 {
		t.Errorf("after running group user-42: %d aggregating, want 1 (user-7)", counts["aggregating"])
	}

	// The priority and the key of pending tasks, in fetch order.
	step(t, ctx, "open thumbnails", chromedp.Navigate(base+"/ui/queues/thumbnails?state=pending"),
		chromedp.WaitVisible(chromedp.CSS(`#tasks tr[data-task="`+f.keyID+`"]`)))
	if got := eval[string](t, ctx, `document.querySelector('#tasks tbody tr').dataset.task`); got != f.priorityID {
		t.Errorf("the first pending task of thumbnails is %q, want the one of priority 5 (%s)", got, f.priorityID)
	}
	if got := eval[string](t, ctx, `document.querySelector('#tasks tr[data-task="`+f.priorityID+`"] [data-priority]').textContent`); got != " · p5" {
		t.Errorf("the priority mark reads %q", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('#tasks tr[data-task="`+f.keyID+`"] [data-key]').dataset.key`); got != "acme" {
		t.Errorf("the key mark names %q", got)
	}
	step(t, ctx, "the keys tab", chromedp.Click(chromedp.CSS(`.tabs a[data-tab="keys"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#keys tr[data-key="acme"]`)))
	if got := eval[string](t, ctx, `[...document.querySelectorAll('#keys tr[data-key="acme"] td')].map((td) => td.textContent).join(' ')`); got != "acme 1 0" {
		t.Errorf("the keys tab shows %q for acme, want its 1 pending and 0 running tasks", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('.tabs a[data-tab="keys"] .count').textContent`); got != "1" {
		t.Errorf("the keys tab counts %q keys, want 1", got)
	}

	// Every pending task of a state, after a confirmation: archive them all.
	step(t, ctx, "open emails", chromedp.Navigate(base+"/ui/queues/emails?state=pending"), chromedp.WaitVisible(chromedp.CSS(`button[data-bulk="archive"]`)))
	step(t, ctx, "archive all, then cancel", chromedp.Click(chromedp.CSS(`button[data-bulk="archive"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-cancel`)), chromedp.Click(chromedp.CSS(`#confirm-cancel`)))
	if _, counts := c.queueStats("emails"); counts["pending"] != 15 {
		t.Fatalf("after a cancelled confirmation: %d pending, want 15", counts["pending"])
	}
	step(t, ctx, "archive all, confirmed", chromedp.Click(chromedp.CSS(`button[data-bulk="archive"]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
	waitFor(t, ctx, "the pending tab to count 0", `document.querySelector('.tabs a[data-tab="pending"] .count').textContent === '0'`)
	if _, counts := c.queueStats("emails"); counts["pending"] != 0 || counts["archived"] != 15 {
		t.Errorf("after archive all: %v", counts)
	}

	// Servers: htq serve's URL worker, and a pull worker that names
	// itself, with the task it holds.
	var held struct {
		Tasks []struct{ ID string } `json:"tasks"`
	}
	c.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"digests"}, "worker_id": "worker-7", "count": 4, "lease_s": 600}, &held)
	if len(held.Tasks) == 0 {
		t.Fatal("the pull worker fetched nothing from digests")
	}
	step(t, ctx, "servers", chromedp.Click(chromedp.CSS(`a[data-nav="servers"]`)), chromedp.WaitVisible(chromedp.CSS(`table.servers`)))
	// The worker's record is written once a second: the first written may
	// name the worker before the tasks of its fetch, so wait for the task.
	waitFor(t, ctx, "the pull worker and its task on the servers page",
		`(document.querySelector('table.servers tr[data-server="worker-7"]')?.textContent || '').includes('`+held.Tasks[0].ID+`')`)
	row := eval[string](t, ctx, `document.querySelector('table.servers tr[data-server="worker-7"]').textContent`)
	if !strings.Contains(row, "pull worker") || !strings.Contains(row, held.Tasks[0].ID) {
		t.Errorf("the pull worker's row %q does not show it as a pull worker with task %s", row, held.Tasks[0].ID)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('table.servers tbody tr').length`); n != 2 {
		t.Errorf("servers page lists %d servers, want 2 (the URL worker and worker-7)", n)
	}
	screenshot(t, ctx, shots, "servers")

	// Schedules with their next and last runs; a schedule's page with the
	// tasks its ticks enqueued.
	step(t, ctx, "schedules", chromedp.Click(chromedp.CSS(`a[data-nav="schedules"]`)), chromedp.WaitVisible(chromedp.CSS(`table.schedules`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('table.schedules tbody tr').length`); n != 3 {
		t.Errorf("schedules page lists %d, want 3", n)
	}
	waitFor(t, ctx, "the next and last run of the ticking schedule",
		`!!document.querySelector('table.schedules tr[data-schedule="`+f.tickerID+`"] td[data-col="next"] time') &&
		 !!document.querySelector('table.schedules tr[data-schedule="`+f.tickerID+`"] td[data-col="prev"] time')`)
	screenshot(t, ctx, shots, "schedules")
	step(t, ctx, "the ticking schedule's page",
		chromedp.Click(chromedp.CSS(`table.schedules tr[data-schedule="`+f.tickerID+`"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`table.history tbody tr a`)))
	taskLink := eval[string](t, ctx, `document.querySelector('table.history tbody tr a').getAttribute('href')`)
	if !strings.HasPrefix(taskLink, "/ui/queues/digests/tasks/") {
		t.Errorf("a tick links to %q, want a task of digests", taskLink)
	}
	screenshot(t, ctx, shots, "schedule")

	// Logout: back to the login page, and the session is gone.
	step(t, ctx, "log out", chromedp.Click(chromedp.CSS(`#logout`)), chromedp.WaitVisible(chromedp.CSS(`#token`)))
	step(t, ctx, "open the dashboard again", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#token`)))
}

// TestOverviewRenderTime measures the overview of 100 queues in the
// browser: the time the page's render takes (performance.now() around it)
// and the time from the navigation's start to the rendered page. The
// render must take under 200 ms; both figures are logged (docs/performance.md).
func TestOverviewRenderTime(t *testing.T) {
	svc := startService(t, "mem:", false)
	c := newClient(t, svc.URL())
	for i := 0; i < 100; i++ {
		q := fmt.Sprintf("queue-%03d", i)
		c.enqueue(q, map[string]any{"type": "work", "payload": map[string]any{"n": i}})
		c.enqueue(q, map[string]any{"type": "work", "payload": map[string]any{"n": i}, "options": map[string]any{"delay": "1h"}})
	}
	ctx := newBrowser(t)
	step(t, ctx, "log in",
		chromedp.Navigate(svc.URL()+"/ui/login"),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="queue-099"]`)))
	var renders, loads []float64
	for i := 0; i < 5; i++ {
		step(t, ctx, "reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="queue-099"]`)))
		if n := eval[int](t, ctx, `document.querySelectorAll('#queues tbody tr').length`); n != 100 {
			t.Fatalf("overview shows %d queues, want 100", n)
		}
		renders = append(renders, num(t, eval[string](t, ctx, "document.body.dataset.renderMs")))
		loads = append(loads, num(t, eval[string](t, ctx, "document.body.dataset.renderedAt")))
	}
	render, load := median(renders), median(loads)
	t.Logf("overview of 100 queues, median of 5: render %.1f ms, navigation start to rendered %.1f ms (renders %v)", render, load, renders)
	if render >= 200 {
		t.Errorf("the overview of 100 queues renders in %.1f ms, want under 200 ms", render)
	}
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("not a number: %q", s)
	}
	return f
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestReadOnlyDashboard: a read-only dashboard shows no action, and an
// action the page's own script tries anyway is refused by the server.
func TestReadOnlyDashboard(t *testing.T) {
	svc := startService(t, "mem:", true)
	c := newClient(t, svc.URL())
	c.enqueue("jobs", map[string]any{"type": "t", "payload": 1, "options": map[string]any{"delay": "1h"}})
	ctx := newBrowser(t)
	step(t, ctx, "log in",
		chromedp.Navigate(svc.URL()+"/ui/login"),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="jobs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.badge-readonly`)))
	step(t, ctx, "the scheduled tab", chromedp.Navigate(svc.URL()+"/ui/queues/jobs?state=scheduled"), chromedp.WaitVisible(chromedp.CSS(`#tasks tbody tr`)))
	if n := eval[int](t, ctx, `document.querySelectorAll('button[data-action], button[data-bulk], #queue-pause').length`); n != 0 {
		t.Errorf("read-only page shows %d action buttons", n)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[int](`fetch('/v1/queues/jobs/pause', {method: 'POST',
		headers: {'X-CSRF-Token': document.querySelector('meta[name="htq-csrf"]').content}}).then((r) => r.status)`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	if got != http.StatusForbidden {
		t.Errorf("read-only pause from the page: %d, want 403", got)
	}
	if paused, _ := c.queueStats("jobs"); paused {
		t.Error("the read-only dashboard paused a queue")
	}
}

// loggedIn opens a browser on the dashboard at base, logs in with the
// token and waits for the overview to list queue.
func loggedIn(t *testing.T, base, queue string) context.Context {
	t.Helper()
	ctx := newBrowser(t)
	step(t, ctx, "log in",
		chromedp.Navigate(base+"/ui/login"),
		chromedp.SendKeys(chromedp.CSS("#token"), testToken),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#queues tr[data-queue="`+queue+`"]`)))
	return ctx
}

// TestWorkflowPage: a task of a workflow links to the workflow's page,
// which shows each task's state and outcome; its cancel, confirmed,
// cancels what has not run.
func TestWorkflowPage(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, broker, false)
		c := newClient(t, svc.URL())
		c.must(http.StatusCreated, "POST", "/v1/workflows", map[string]any{"id": "order-7", "tasks": []map[string]any{
			{"id": "charge", "queue": "shop", "type": "charge"},
			{"id": "pack", "queue": "shop", "type": "pack", "depends_on": []string{"charge"}},
			{"id": "mail", "queue": "shop", "type": "mail", "depends_on": []string{"pack"}, "on_dependency_failure": "run"},
		}}, nil)
		id, token := c.lease("shop")
		c.must(http.StatusNoContent, "POST", "/v1/queues/shop/tasks/"+id+"/ack", map[string]any{"token": token}, nil)
		base := svc.URL()
		ctx := loggedIn(t, base, "shop")
		step(t, ctx, "the waiting tab", chromedp.Navigate(base+"/ui/queues/shop?state=waiting"), chromedp.WaitVisible(chromedp.CSS(`#tasks tbody tr`)))
		if got := eval[string](t, ctx, `document.querySelector('.tabs a[data-tab="waiting"] .count').textContent`); got != "1" {
			t.Errorf("waiting tab counts %q, want 1", got)
		}
		step(t, ctx, "a waiting task", chromedp.Navigate(base+"/ui/queues/shop/tasks/order-7.mail"), chromedp.WaitVisible(chromedp.CSS(`#workflow-link`)))
		step(t, ctx, "its workflow", chromedp.Click(chromedp.CSS(`#workflow-link`)), chromedp.WaitVisible(chromedp.CSS(`#workflow-tasks`)))
		rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#workflow-tasks tbody tr')].map((tr) => tr.dataset.task + ' ' + [...tr.querySelectorAll('td')].slice(2, 4).map((td) => td.textContent).join(' '))`)
		want := []string{"charge completed succeeded", "pack pending ", "mail waiting "}
		if !slices.Equal(rows, want) {
			t.Errorf("workflow page rows %q, want %q", rows, want)
		}
		screenshot(t, ctx, screenshotDir(t), "workflow")
		step(t, ctx, "cancel the workflow", chromedp.Click(chromedp.CSS(`#cancel-workflow`)), chromedp.WaitVisible(chromedp.CSS(`#confirm-ok`)), chromedp.Click(chromedp.CSS(`#confirm-ok`)))
		waitFor(t, ctx, "the workflow canceled", `document.querySelector('.head-badges .badge')?.textContent === 'canceled'`)
		if got := eval[string](t, ctx, `document.querySelector('#workflow-tasks tr[data-task="mail"] td.outcome').textContent`); got != "canceled" {
			t.Errorf("mail's outcome after the cancel: %q", got)
		}
		if c.taskState("shop", "order-7.pack") != "archived" {
			t.Errorf("pack after the cancel: %s", c.taskState("shop", "order-7.pack"))
		}
	})
}

// TestCallbackLinks: a URL task's page shows its callbacks (the URLs, and
// for the one whose outcome was delivered or is being delivered, its task
// linked with its state, retries and last error; the other says why there
// is none), and the callback's task links back to the task it reports on.
// Real targets: the task's own succeeds, one callback target fails (500),
// the other succeeds; a second task is refused (404) and archived at once.
func TestCallbackLinks(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		svc := startService(t, broker, false)
		c := newClient(t, svc.URL())
		target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/cb-down":
				http.Error(w, "callback receiver is down", http.StatusInternalServerError)
			case "/gone":
				http.NotFound(w, r)
			}
		}))
		t.Cleanup(target.Close)
		// Retries an hour on: each failed callback stays in retry.
		c.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "hooks", "mode": "real_time", "min_backoff_ms": 3600000}, nil)
		opts := map[string]any{"callback": target.URL + "/cb-down", "failure_callback": target.URL + "/cb-ok"}
		ok := c.enqueue("hooks", map[string]any{"url": target.URL + "/ok", "options": opts})
		gone := c.enqueue("hooks", map[string]any{"url": target.URL + "/gone", "options": opts})
		deadline := time.Now().Add(15 * time.Second)
		for c.taskState("hooks", ok+"~callback") != "retry" || c.taskState("hooks", gone+"~failure_callback") != "completed" {
			if time.Now().After(deadline) {
				t.Fatalf("callbacks' tasks %s, %s; want retry (its target answers 500) and completed",
					c.taskState("hooks", ok+"~callback"), c.taskState("hooks", gone+"~failure_callback"))
			}
			time.Sleep(20 * time.Millisecond)
		}

		base := svc.URL()
		ctx := loggedIn(t, base, "hooks")
		row := func(kind string) string {
			return eval[string](t, ctx, `document.querySelector('#callbacks tr[data-kind="`+kind+`"] td').textContent`)
		}

		step(t, ctx, "the task that succeeded", chromedp.Navigate(base+"/ui/queues/hooks/tasks/"+ok), chromedp.WaitVisible(chromedp.CSS(`#callback-task-callback`)))
		if got := row("callback"); !strings.Contains(got, "POST "+target.URL+"/cb-down") || !strings.Contains(got, ok+"~callback") ||
			!strings.Contains(got, "retry") || !strings.Contains(got, "retries 1 of") || !strings.Contains(got, "500") {
			t.Errorf("its callback reads %q: want the URL, the task %s~callback in retry after 1 attempt, and its 500", got, ok)
		}
		if got := row("failure_callback"); !strings.Contains(got, "POST "+target.URL+"/cb-ok") || !strings.Contains(got, "not made: the task was completed") {
			t.Errorf("its failure callback reads %q", got)
		}
		screenshot(t, ctx, screenshotDir(t), "callbacks")
		step(t, ctx, "the callback's task", chromedp.Click(chromedp.CSS(`#callback-task-callback`)), chromedp.WaitVisible(chromedp.CSS(`#callback-of-link`)))
		if got := eval[string](t, ctx, `document.querySelector('#last-error').textContent`); !strings.Contains(got, "500") {
			t.Errorf("the callback's task's last error %q, want its 500", got)
		}
		if got := eval[string](t, ctx, `location.pathname`); got != "/ui/queues/hooks/tasks/"+ok+"~callback" {
			t.Errorf("the callback's link opened %q", got)
		}
		step(t, ctx, "back to the task it reports on", chromedp.Click(chromedp.CSS(`#callback-of-link`)), chromedp.WaitVisible(chromedp.CSS(`#callbacks`)))

		step(t, ctx, "the task archived at once", chromedp.Navigate(base+"/ui/queues/hooks/tasks/"+gone), chromedp.WaitVisible(chromedp.CSS(`#callback-task-failure_callback`)))
		if got := row("failure_callback"); !strings.Contains(got, gone+"~failure_callback") || !strings.Contains(got, "completed") {
			t.Errorf("its failure callback reads %q: want the task %s~failure_callback, completed", got, gone)
		}
		if got := row("callback"); !strings.Contains(got, "not made: the task was archived") {
			t.Errorf("its callback reads %q", got)
		}
	})
}
