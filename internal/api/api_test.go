package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/metrics"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/storage"
)

func TestMain(m *testing.M) {
	leaktest.Main(m, redistest.StopShared)
}

const testToken = "s3cret-token"

// env is a handler served over real HTTP against a real storage.
type env struct {
	t    *testing.T // nil in a benchmark
	tb   testing.TB
	h    *handler
	srv  *httptest.Server
	st   *htq.Storage
	insp *htq.Inspector
	meta broker.MetaStore
	opts Options
}

var backends = []string{"redis", "embedded"}

// forEachBackend runs fn against each storage backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { fn(t, newEnv(t, b, nil)) })
	}
}

func openStorage(t testing.TB, backend string) *htq.Storage {
	t.Helper()
	var raw string
	switch backend {
	case "redis":
		raw = redistest.URL(t)
	case "embedded":
		raw = "file:" + t.TempDir()
	default:
		t.Fatalf("unknown backend %s", backend)
	}
	st, err := htq.Open(raw)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func newEnv(t testing.TB, backend string, mod func(*Options)) *env {
	t.Helper()
	st := openStorage(t, backend)
	ctx, cancel := context.WithCancel(context.Background())
	opts := Options{
		Storage: st, Token: testToken, HTQAppKey: "key", HTQAppToken: "tok",
		Location: time.UTC, Context: ctx, Logger: discardLogger(), Metrics: metrics.New(),
	}
	if mod != nil {
		mod(&opts)
	}
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		cancel()
		srv.Close()
		st.Close()
	})
	var meta broker.MetaStore = storage.BrokerOf(st)
	if opts.Meta != nil {
		meta = opts.Meta
	}
	tt, _ := t.(*testing.T)
	return &env{t: tt, tb: t, h: h.(*handler), srv: srv, st: st, insp: htq.NewInspector(st), meta: meta, opts: opts}
}

// call sends a JSON request with the token and decodes a JSON answer into
// out (when not nil). It returns the status and the raw body.
func (e *env) call(method, path string, body any, out any) (int, []byte) {
	e.tb.Helper()
	return e.callAuth(method, path, "Bearer "+testToken, body, out)
}

func (e *env) callAuth(method, path, auth string, body any, out any) (int, []byte) {
	e.tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.tb.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.tb.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		e.tb.Fatal(err)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			e.tb.Fatalf("%s %s: decode %.300s: %v", method, path, data, err)
		}
	}
	return resp.StatusCode, data
}

// must calls and fails the test unless the status is want.
func (e *env) must(want int, method, path string, body any, out any) []byte {
	e.tb.Helper()
	status, data := e.call(method, path, body, out)
	if status != want {
		e.tb.Fatalf("%s %s: status %d, want %d: %.500s", method, path, status, want, data)
	}
	return data
}

// errCode decodes an error answer's code.
func errCode(data []byte) string {
	var b errorBody
	_ = json.Unmarshal(data, &b)
	return b.Error.Code
}

// queueSize is how many tasks the storage holds in queue (0 when it does
// not know the queue).
func (e *env) queueSize(queue string) int {
	e.tb.Helper()
	info, err := e.insp.GetQueueInfo(queue)
	if errors.Is(err, htq.ErrQueueNotFound) {
		return 0
	}
	if err != nil {
		e.tb.Fatal(err)
	}
	return info.Size
}

// form posts an HTQ form, multipart or urlencoded, and decodes the JSON.
func (e *env) form(path string, multi bool, fields map[string]string, out any) (int, []byte, http.Header) {
	e.tb.Helper()
	var body bytes.Buffer
	ctype := "application/x-www-form-urlencoded"
	if multi {
		mw := multipart.NewWriter(&body)
		for k, v := range fields {
			if err := mw.WriteField(k, v); err != nil {
				e.tb.Fatal(err)
			}
		}
		mw.Close()
		ctype = mw.FormDataContentType()
	} else {
		vals := url.Values{}
		for k, v := range fields {
			vals.Set(k, v)
		}
		body.WriteString(vals.Encode())
	}
	resp, err := e.srv.Client().Post(e.srv.URL+path, ctype, &body)
	if err != nil {
		e.tb.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.tb.Fatalf("%s: decode %q: %v", path, data, err)
		}
	}
	return resp.StatusCode, data, resp.Header
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
