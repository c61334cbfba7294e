// Package ui is htq serve's web dashboard, served under /ui/: plain HTML,
// CSS and JavaScript modules embedded in the binary (no build step, no
// CDN), which call the same /v1 API as every other client.
//
// Security. The login page takes the API token and sets a session cookie
// (HttpOnly, SameSite=Strict, signed with a key derived from the token;
// see sessions). Only the login page and the static assets are served
// without a session. The /v1 API accepts the session instead of the
// bearer token only on a request that also carries the session's CSRF
// token in the X-CSRF-Token header, GETs included: the cookie alone never
// authenticates anything, so neither a form on another site (which cannot
// set headers) nor a sibling sub-domain (which SameSite counts as the same
// site) nor a permissive CORS setting can use it. The page reads the token
// from a meta tag of its HTML. With ReadOnly, the page shows no action and
// every session request that is not a GET or HEAD is refused with 403.
//
// Handler wraps the API's handler: /ui/ is the dashboard, everything else
// goes to the API (with the session turned into the bearer token when it
// is valid).
package ui

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/jonboulle/clockwork"
)

// DefaultSessionTTL is how long a session lasts when Options.SessionTTL
// is 0: 12 hours.
const DefaultSessionTTL = 12 * time.Hour

// Options configures the dashboard.
type Options struct {
	// Token returns the API token in force: the login page asks for it,
	// a session stands for it (API calls made with a session go on with
	// it), and the sessions' key is derived from it, so a new token ends
	// every session. Required.
	Token func() string
	// ReadOnly hides every action and refuses every session request that
	// would change something (403 forbidden), server-side.
	ReadOnly bool
	// SessionTTL is how long a session lasts after the login (default
	// DefaultSessionTTL).
	SessionTTL time.Duration
	// Logger receives the dashboard's logs (default slog.Default()).
	Logger *slog.Logger
	// Clock tells the time of session expiries (default the real clock).
	Clock clockwork.Clock
}

//go:embed assets pages
var files embed.FS

// Handler serves the dashboard and passes everything else to the API.
type Handler struct {
	api      http.Handler
	opts     Options
	sessions *sessions
	logger   *slog.Logger
	assets   http.Handler
	etags    map[string]string // asset path → ETag, so browsers revalidate instead of downloading again
	pages    *template.Template
	mux      *http.ServeMux
	// crossOrigin refuses the login and logout forms posted from
	// another origin (login CSRF).
	crossOrigin *http.CrossOriginProtection
}

// New returns the dashboard in front of api, the handler of everything
// that is not under /ui/.
func New(api http.Handler, opts Options) (*Handler, error) {
	if api == nil {
		return nil, errors.New("ui: the API handler is nil")
	}
	if opts.Token == nil {
		return nil, errors.New("ui: Options.Token is nil")
	}
	if opts.SessionTTL < 0 {
		return nil, fmt.Errorf("ui: Options.SessionTTL %v is negative", opts.SessionTTL)
	}
	if opts.SessionTTL == 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	assets, err := fs.Sub(files, "assets")
	if err != nil {
		return nil, fmt.Errorf("ui: assets: %w", err)
	}
	pages, err := template.ParseFS(files, "pages/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: pages: %w", err)
	}
	etags, err := etagsOf(assets)
	if err != nil {
		return nil, fmt.Errorf("ui: assets: %w", err)
	}
	h := &Handler{
		api: api, opts: opts,
		sessions:    newSessions(opts.Token, opts.SessionTTL, opts.Clock),
		logger:      opts.Logger.With("component", "htq.ui"),
		assets:      http.StripPrefix("/ui/assets/", http.FileServerFS(assets)),
		etags:       etags,
		pages:       pages,
		crossOrigin: http.NewCrossOriginProtection(),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", h.root)
	mux.HandleFunc("GET /ui", h.root)
	mux.HandleFunc("GET /ui/assets/", h.asset)
	mux.HandleFunc("GET /ui/login", h.loginPage)
	mux.Handle("POST /ui/login", h.crossOrigin.Handler(http.HandlerFunc(h.login)))
	mux.Handle("POST /ui/logout", h.crossOrigin.Handler(http.HandlerFunc(h.logout)))
	mux.HandleFunc("GET /ui/", h.app)
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	})
	mux.HandleFunc("/", h.toAPI)
	h.mux = mux
	return h, nil
}

// ServeHTTP serves one request. An API call (a clean path under /v1/ or
// /api/) goes straight to toAPI, where the mux would send it, without the
// mux's lookup; the mux takes every other request (and redirects an
// unclean path, as before).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect && apiPath(r.URL.EscapedPath()) {
		h.toAPI(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// apiPath reports whether p is a path under /v1/ or /api/ that is in its
// clean form (which the mux would not redirect).
func apiPath(p string) bool {
	if !strings.HasPrefix(p, "/v1/") && !strings.HasPrefix(p, "/api/") {
		return false
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") {
		c += "/"
	}
	return c == p
}

// root sends / and /ui to the dashboard.
func (h *Handler) root(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/ui/", http.StatusFound)
}

// asset serves a static file: the only thing besides the login page that
// needs no session.
func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	if tag, ok := h.etags[strings.TrimPrefix(r.URL.Path, "/ui/assets/")]; ok {
		w.Header().Set("ETag", tag) // the file server answers 304 to a matching If-None-Match
	}
	h.assets.ServeHTTP(w, r)
}

// etagsOf returns a strong ETag for every file of fsys: a hash of its bytes.
func etagsOf(fsys fs.FS) (map[string]string, error) {
	out := make(map[string]string)
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		out[path] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return out, err
}

// pageHeaders are sent with every HTML page: nothing but our own files
// may run or load, and no other site may frame the dashboard.
func pageHeaders(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("Content-Type", "text/html; charset=utf-8")
}

// render writes an HTML page.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	pageHeaders(w)
	w.WriteHeader(status)
	if err := h.pages.ExecuteTemplate(w, name, data); err != nil {
		h.logger.Error("render page", "page", name, "err", err)
	}
}

// loginData fills login.html.
type loginData struct {
	Error string
	Next  string
}

// loginPage: GET /ui/login. A browser with a valid session goes on.
func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if _, ok := h.sessions.read(r); ok {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	h.render(w, http.StatusOK, "login.html", loginData{Next: next})
}

// login: POST /ui/login with the form field token. The right token gets
// a session cookie and a redirect to the dashboard; a wrong one gets the
// login page again with 401.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.render(w, http.StatusBadRequest, "login.html", loginData{Error: "The form could not be read."})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	got := strings.TrimSpace(r.PostForm.Get("token"))
	if tok := h.opts.Token(); tok == "" || subtle.ConstantTimeCompare([]byte(got), []byte(tok)) != 1 {
		h.logger.Warn("dashboard login refused: wrong token", "remote", r.RemoteAddr)
		h.render(w, http.StatusUnauthorized, "login.html", loginData{Error: "That is not the API token.", Next: next})
		return
	}
	ss, value, err := h.sessions.create()
	if err != nil {
		h.logger.Error("dashboard login", "err", err)
		h.render(w, http.StatusInternalServerError, "login.html", loginData{Error: "The session could not be created; see the server's log.", Next: next})
		return
	}
	setCookie(w, r, value, ss.expires)
	h.logger.Info("dashboard login", "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout: POST /ui/logout with the session's CSRF token (header or form
// field csrf). The session ends and the cookie is deleted.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	ss, ok := h.sessions.read(r)
	if ok {
		got := r.Header.Get(CSRFHeader)
		if got == "" {
			r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
			got = r.PostFormValue("csrf")
		}
		if !h.sessions.checkCSRF(ss, got) {
			writeError(w, http.StatusForbidden, "forbidden", "logout needs the session's CSRF token")
			return
		}
		h.sessions.revoke(ss)
	}
	setCookie(w, r, "", time.Time{})
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// appData fills index.html.
type appData struct {
	CSRF     string
	ReadOnly bool
}

// app: GET /ui/… serves the single page of the dashboard for every path
// (the page routes itself); without a session, the login page.
func (h *Handler) app(w http.ResponseWriter, r *http.Request) {
	ss, ok := h.sessions.read(r)
	if !ok {
		http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	h.render(w, http.StatusOK, "index.html", appData{CSRF: h.sessions.csrf(ss), ReadOnly: h.opts.ReadOnly})
}

// safeNext returns where to go after the login: a dashboard path, never
// another site.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.ContainsAny(next, "\\\r\n") && !strings.HasPrefix(next, "/ui/login") {
		return next
	}
	return "/ui/"
}

// toAPI passes a request to the API. A /v1 request without an
// Authorization header but with a valid session cookie must carry the
// session's CSRF token; it then goes on with the bearer token (and, in
// read-only mode, only when it is a GET or HEAD).
func (h *Handler) toAPI(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" || !strings.HasPrefix(r.URL.Path, "/v1/") {
		h.api.ServeHTTP(w, r)
		return
	}
	ss, ok := h.sessions.read(r)
	if !ok {
		h.api.ServeHTTP(w, r) // the API answers 401 (or serves what needs no token)
		return
	}
	if !h.sessions.checkCSRF(ss, r.Header.Get(CSRFHeader)) {
		writeError(w, http.StatusForbidden, "forbidden", "a dashboard session authenticates an API call only with its CSRF token in the "+CSRFHeader+" header")
		return
	}
	if h.opts.ReadOnly && r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusForbidden, "forbidden", "the dashboard is read-only (--ui-read-only): "+r.Method+" "+r.URL.Path+" is refused")
		return
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+h.opts.Token())
	r2.Header.Del(CSRFHeader)
	h.api.ServeHTTP(w, r2)
}

// writeError answers in the API's error format (docs/api.md).
func writeError(w http.ResponseWriter, status int, code, msg string) {
	type detail struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	body, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{code, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
