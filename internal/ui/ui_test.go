package ui_test

import (
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/api"
	"github.com/htqueue/htq/internal/service"
	"github.com/htqueue/htq/internal/ui"
	"github.com/jonboulle/clockwork"
)

// login posts the token to the login form and returns the answer.
func (c *client) login(token string, hdr map[string]string) (*http.Response, []byte) {
	c.t.Helper()
	return c.do("POST", "/ui/login", "token="+url.QueryEscape(token), hdr)
}

// session logs in and returns the session cookie and the page's CSRF token.
func (c *client) session() (cookie, csrf string) {
	c.t.Helper()
	resp, body := c.login(testToken, nil)
	if resp.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("login: status %d, want 303: %s", resp.StatusCode, body)
	}
	for _, ck := range resp.Cookies() {
		if ck.Name == ui.CookieName {
			cookie = ck.Name + "=" + ck.Value
		}
	}
	if cookie == "" {
		c.t.Fatal("login: no session cookie")
	}
	resp, page := c.do("GET", "/ui/", nil, map[string]string{"Cookie": cookie})
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET /ui/ with the session: %d", resp.StatusCode)
	}
	m := regexp.MustCompile(`<meta name="htq-csrf" content="([^"]+)">`).FindSubmatch(page)
	if m == nil {
		c.t.Fatalf("no CSRF meta tag in %s", page)
	}
	return cookie, string(m[1])
}

func TestLoginAndSession(t *testing.T) {
	svc := startService(t, "mem:", false)
	c := newClient(t, svc.URL())
	c.enqueue("jobs", map[string]any{"type": "t", "payload": 1})

	// Without a session: the login page and the assets only.
	resp, _ := c.do("GET", "/ui/queues/jobs", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/login?next=%2Fui%2Fqueues%2Fjobs" {
		t.Fatalf("GET /ui/queues/jobs without a session: %d to %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := c.do("GET", "/", nil, nil); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /: %d to %q, want 302 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, body := c.do("GET", "/ui/login", nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `name="token"`) {
		t.Fatalf("login page: %d %s", resp.StatusCode, body)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("login page CSP = %q", csp)
	}
	for _, asset := range []string{"/ui/assets/app.css", "/ui/assets/js/main.js", "/ui/assets/favicon.svg"} {
		if resp, body := c.do("GET", asset, nil, nil); resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s: %d, %d bytes", asset, resp.StatusCode, len(body))
		}
	}
	resp, _ = c.do("GET", "/ui/assets/js/main.js", nil, nil)
	if !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Errorf("main.js Content-Type %q: browsers refuse a module of another type", resp.Header.Get("Content-Type"))
	}
	if tag := resp.Header.Get("ETag"); tag == "" {
		t.Error("main.js has no ETag")
	} else if resp, _ := c.do("GET", "/ui/assets/js/main.js", nil, map[string]string{"If-None-Match": tag}); resp.StatusCode != http.StatusNotModified {
		t.Errorf("main.js with a matching If-None-Match: %d, want 304", resp.StatusCode)
	}

	// A wrong token is refused, and sets no cookie.
	resp, body = c.login("not-the-token-at-all", nil)
	if resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 || !strings.Contains(string(body), "not the API token") {
		t.Fatalf("wrong token: %d, cookies %v: %s", resp.StatusCode, resp.Cookies(), body)
	}
	// A login posted from another site is refused (login CSRF).
	resp, _ = c.login(testToken, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("cross-site login: %d, cookies %v; want 403 and none", resp.StatusCode, resp.Cookies())
	}

	// The right token: a cookie the page's script cannot read, that no
	// other site's page sends.
	resp, _ = c.login(testToken, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/" {
		t.Fatalf("login: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	cks := resp.Cookies()
	if len(cks) != 1 || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode || cks[0].Path != "/" || cks[0].Expires.IsZero() {
		t.Fatalf("session cookie: %+v", cks)
	}

	cookie, csrf := c.session()
	withCookie := map[string]string{"Cookie": cookie}
	withBoth := map[string]string{"Cookie": cookie, ui.CSRFHeader: csrf}

	// The API takes the session only with its CSRF token, GETs included.
	for _, tc := range []struct {
		name   string
		method string
		path   string
		hdr    map[string]string
		want   int
	}{
		{"no credential", "GET", "/v1/queues", nil, http.StatusUnauthorized},
		{"cookie alone", "GET", "/v1/queues", withCookie, http.StatusForbidden},
		{"cookie alone, action", "POST", "/v1/queues/jobs/pause", withCookie, http.StatusForbidden},
		{"wrong CSRF token", "GET", "/v1/queues", map[string]string{"Cookie": cookie, ui.CSRFHeader: csrf + "x"}, http.StatusForbidden},
		{"CSRF token alone", "GET", "/v1/queues", map[string]string{ui.CSRFHeader: csrf}, http.StatusUnauthorized},
		{"forged cookie", "GET", "/v1/queues", map[string]string{"Cookie": strings.Replace(cookie, ".", ".A", 1), ui.CSRFHeader: csrf}, http.StatusUnauthorized},
		{"cookie and CSRF token", "GET", "/v1/queues", withBoth, http.StatusOK},
		{"action with both", "POST", "/v1/queues/jobs/pause", withBoth, http.StatusNoContent},
	} {
		if resp, body := c.do(tc.method, tc.path, nil, tc.hdr); resp.StatusCode != tc.want {
			t.Errorf("%s: %s %s: %d, want %d: %s", tc.name, tc.method, tc.path, resp.StatusCode, tc.want, body)
		}
	}
	if paused, _ := c.queueStats("jobs"); !paused {
		t.Error("the session's pause did not pause the queue")
	}

	// Logout needs the CSRF token too, then ends the session.
	if resp, _ := c.do("POST", "/ui/logout", nil, withCookie); resp.StatusCode != http.StatusForbidden {
		t.Errorf("logout without the CSRF token: %d, want 403", resp.StatusCode)
	}
	resp, _ = c.do("POST", "/ui/logout", nil, withBoth)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || resp.Cookies()[0].MaxAge >= 0 {
		t.Fatalf("logout: %d, cookies %+v; want 303 deleting the cookie", resp.StatusCode, resp.Cookies())
	}
	if resp, _ := c.do("GET", "/v1/queues", nil, withBoth); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("API with a logged-out session: %d, want 401", resp.StatusCode)
	}
	if resp, _ := c.do("GET", "/ui/", nil, withCookie); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("page with a logged-out session: %d, want 303 to the login page", resp.StatusCode)
	}
	// The bearer token works as before.
	c.must(http.StatusNoContent, "POST", "/v1/queues/jobs/resume", nil, nil)
}

// Without a configured token, the dashboard takes the one htq serve
// generated and stored with the data, and a session's API calls carry it.
func TestStoredToken(t *testing.T) {
	svc := startConfig(t, service.Config{Storage: "mem:"})
	c := newClient(t, svc.URL())
	resp, _ := c.login(testToken, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("login with a token that is not the stored one: %d, want 401", resp.StatusCode)
	}
	resp, body := c.login(svc.Token(), nil)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login with the stored token: %d %s", resp.StatusCode, body)
	}
	cookie := resp.Cookies()[0]
	_, page := c.do("GET", "/ui/", nil, map[string]string{"Cookie": cookie.Name + "=" + cookie.Value})
	m := regexp.MustCompile(`<meta name="htq-csrf" content="([^"]+)">`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in %s", page)
	}
	hdr := map[string]string{"Cookie": cookie.Name + "=" + cookie.Value, ui.CSRFHeader: string(m[1])}
	if resp, body := c.do("POST", "/v1/queues/jobs/tasks", map[string]any{"type": "t", "payload": 1}, hdr); resp.StatusCode != http.StatusCreated {
		t.Errorf("enqueue with the session: %d %s", resp.StatusCode, body)
	}
}

// In read-only mode the page says so, and the API refuses every session
// call but GET and HEAD, whatever the page shows; the bearer token keeps
// every right.
func TestReadOnly(t *testing.T) {
	svc := startService(t, "mem:", true)
	c := newClient(t, svc.URL())
	c.enqueue("jobs", map[string]any{"type": "t", "payload": 1})
	cookie, csrf := c.session()
	hdr := map[string]string{"Cookie": cookie, ui.CSRFHeader: csrf}
	if _, page := c.do("GET", "/ui/", nil, hdr); !strings.Contains(string(page), `<meta name="htq-read-only" content="true">`) {
		t.Errorf("the page does not say read-only: %s", page)
	}
	if resp, body := c.do("GET", "/v1/queues/jobs/tasks", nil, hdr); resp.StatusCode != http.StatusOK {
		t.Errorf("read-only GET: %d %s", resp.StatusCode, body)
	}
	for _, call := range [][2]string{
		{"POST", "/v1/queues/jobs/pause"},
		{"DELETE", "/v1/queues/jobs?force=true"},
		{"POST", "/v1/queues/jobs/tasks"},
		{"PATCH", "/v1/queues/jobs"},
		{"POST", "/v1/fetch"},
	} {
		resp, body := c.do(call[0], call[1], map[string]any{}, hdr)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"code":"forbidden"`) || !strings.Contains(string(body), "read-only") {
			t.Errorf("read-only %s %s: %d %s, want 403 forbidden", call[0], call[1], resp.StatusCode, body)
		}
	}
	if paused, counts := c.queueStats("jobs"); paused || counts["pending"] != 1 {
		t.Errorf("after refused calls: paused %v, counts %v", paused, counts)
	}
	c.must(http.StatusNoContent, "POST", "/v1/queues/jobs/pause", nil, nil)
}

// A session ends at its expiry.
func TestSessionExpires(t *testing.T) {
	clock := clockwork.NewFakeClock()
	c := newDashboard(t, ui.Options{Token: func() string { return testToken }, SessionTTL: time.Hour, Clock: clock})
	cookie, csrf := c.session()
	hdr := map[string]string{"Cookie": cookie, ui.CSRFHeader: csrf}
	if resp, body := c.do("GET", "/v1/queues", nil, hdr); resp.StatusCode != http.StatusOK {
		t.Fatalf("fresh session: %d %s", resp.StatusCode, body)
	}
	clock.Advance(time.Hour - time.Second)
	if resp, _ := c.do("GET", "/v1/queues", nil, hdr); resp.StatusCode != http.StatusOK {
		t.Fatalf("session a second before its expiry: %d", resp.StatusCode)
	}
	clock.Advance(time.Second)
	if resp, _ := c.do("GET", "/v1/queues", nil, hdr); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("expired session: %d, want 401", resp.StatusCode)
	}
	if resp, _ := c.do("GET", "/ui/", nil, hdr); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("page with an expired session: %d, want 303", resp.StatusCode)
	}
}

// A session made with one token is worth nothing once the token changes
// (a rotation, or a restart with another --token).
func TestSessionBoundToToken(t *testing.T) {
	var mu sync.Mutex
	token := testToken
	c := newDashboard(t, ui.Options{Token: func() string { mu.Lock(); defer mu.Unlock(); return token }})
	cookie, csrf := c.session()
	hdr := map[string]string{"Cookie": cookie, ui.CSRFHeader: csrf}
	if resp, body := c.do("GET", "/v1/queues", nil, hdr); resp.StatusCode != http.StatusOK {
		t.Fatalf("session: %d %s", resp.StatusCode, body)
	}
	mu.Lock()
	token = "another-token-0123456789"
	mu.Unlock()
	if resp, _ := c.do("GET", "/v1/queues", nil, hdr); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("session of the old token: %d, want 401", resp.StatusCode)
	}
	if resp, _ := c.login(testToken, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("login with the old token: %d, want 401", resp.StatusCode)
	}
}

// newDashboard serves the dashboard made with opts in front of the API
// (token testToken) over an in-memory store, for tests that need a knob
// htq serve does not offer (a fake clock, a token that changes).
func newDashboard(t *testing.T, opts ui.Options) *client {
	t.Helper()
	st, err := htq.Open("mem:")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	apiHandler, err := api.New(api.Options{Storage: st, Token: testToken, Context: ctx, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = quiet
	h, err := ui.New(apiHandler, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return newClient(t, srv.URL)
}

// index.html preloads every module but main.js, so the browser fetches
// them at once instead of one import level after another.
func TestEveryModulePreloaded(t *testing.T) {
	index, err := os.ReadFile("pages/index.html")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir("assets/js", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == filepath.Join("assets", "js", "main.js") {
			return err
		}
		link := `<link rel="modulepreload" href="/ui/` + filepath.ToSlash(path) + `">`
		if !strings.Contains(string(index), link) {
			t.Errorf("pages/index.html lacks %s", link)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
