package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/internal/metrics"
	"go.opentelemetry.io/otel/propagation"
)

// The server's own work per request, without the network: each request
// goes straight to the handler's ServeHTTP, as net/http would hand it
// over, on each backend. The requests are those of
// ../shared/bench/httpload/cpu-per-request.sh: a /v1 URL task due in an
// hour, HTQ's multipart addTask, and an addTask whose target the guard
// refuses (no storage call). Run with -benchmem: allocs/op is the figure
// that does not depend on the machine's load.
//
//	go test ./internal/api -run XXX -bench ServeRequest -benchmem
func BenchmarkServeRequest(b *testing.B) {
	later := time.Now().Add(time.Hour).UTC().Format("2006-01-02 15:04:05")
	form := func(target string) (string, []byte) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for _, kv := range [][2]string{{"app_key", "key"}, {"app_token", "tok"}, {"queue_name", "loadq"},
			{"url", target}, {"method", "POST"}, {"header", "{}"}, {"data", "{}"}, {"execute_time", later}} {
			_ = mw.WriteField(kv[0], kv[1])
		}
		mw.Close()
		return mw.FormDataContentType(), body.Bytes()
	}
	v1 := []byte(`{"url":"http://127.0.0.1:1/x","method":"POST","body":"{}","options":{"delay":3600}}`)
	// servebench's tasks: typed, a payload of about 100 bytes.
	typed := func(i int) string {
		return fmt.Sprintf(`{"type":"bench","payload":{"i":%d,"d":"%s"}}`, i, strings.Repeat("x", 76))
	}
	var batch strings.Builder
	batch.WriteString(`{"tasks":[`)
	for i := range 1000 {
		if i > 0 {
			batch.WriteByte(',')
		}
		batch.WriteString(typed(i))
	}
	batch.WriteString(`]}`)
	formType, addTask := form("http://127.0.0.1:1/x?i=1")
	refusedType, refused := form("http://10.9.9.9/x?i=1")
	for _, backend := range backends {
		e := benchEnv(b, backend)
		h := e.srv.Config.Handler
		for _, tc := range []struct {
			name, path, ctype string
			body, want        []byte
			status            int
		}{
			{"v1", "/v1/queues/v1q/tasks", "application/json", v1, []byte(`"state":"scheduled"`), http.StatusCreated},
			{"typed", "/v1/queues/bench/tasks", "application/json", []byte(typed(1)), []byte(`"state":"pending"`), http.StatusCreated},
			{"batch1000", "/v1/queues/bench/tasks/batch", "application/json", []byte(batch.String()), []byte(`"enqueued":1000,`), http.StatusCreated},
			{"addTask", "/api/addTask", formType, addTask, []byte(`"error_code":0`), http.StatusOK},
			{"refused", "/api/addTask", refusedType, refused, []byte(`"error_code":1001`), http.StatusOK},
		} {
			b.Run(backend+"/"+tc.name, func(b *testing.B) {
				tmpl := httptest.NewRequest("POST", tc.path, nil)
				tmpl.Header.Set("Content-Type", tc.ctype)
				tmpl.Header.Set("Authorization", "Bearer "+testToken)
				b.ReportAllocs()
				// 32 requests at once on 2 cores, as the load tools send
				// them; batches from 4 connections, as servebench's.
				b.SetParallelism(16)
				if tc.name == "batch1000" {
					b.SetParallelism(2)
				}
				cpu0 := cpuTime()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					w := &benchWriter{h: http.Header{}}
					rd := bytes.NewReader(nil)
					// net/http's contexts: one per connection, and one per
					// request under it, canceled when the handler returns.
					connCtx, connCancel := context.WithCancel(context.Background())
					defer connCancel()
					for pb.Next() {
						ctx, cancel := context.WithCancel(connCtx)
						r := tmpl.WithContext(ctx)
						rd.Reset(tc.body)
						r.Body = io.NopCloser(rd)
						r.ContentLength = int64(len(tc.body))
						clear(w.h)
						w.code, w.body = 0, w.body[:0]
						h.ServeHTTP(w, r)
						cancel()
						if w.code != tc.status || !bytes.Contains(w.body, tc.want) {
							panic(fmt.Sprintf("%s: %d %.300s", tc.name, w.code, w.body))
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// cpuTime is the user+system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchEnv is newEnv for a benchmark, with the service's target guard
// (loopback allowed, as cpu-per-request.sh starts htq serve).
func benchEnv(b *testing.B, backend string) *env {
	b.Helper()
	guard, err := dispatch.NewGuard([]string{"127.0.0.0/8"})
	if err != nil {
		b.Fatal(err)
	}
	e := newEnv(b, backend, func(o *Options) {
		o.Metrics = metrics.New()
		o.CompletedRetention = 24 * time.Hour
		o.EnqueueRetryFor = 5 * time.Second // as htq serve gives it (its storage timeout)
		o.CheckTarget = func(_ context.Context, u *url.URL) error { return guard.CheckURL(u) }
		o.Propagator = propagation.TraceContext{} // as htq serve's (service.Config's default)
	})
	if status, body := e.call("POST", "/v1/queues", `{"name":"v1q","mode":"real_time","max_concurrency":100}`, nil); status != http.StatusCreated {
		b.Fatalf("create v1q: %d %s", status, body)
	}
	if status, body, _ := e.form("/api/addQueue", true, map[string]string{"app_key": "key", "app_token": "tok", "queue_name": "loadq", "type": "real_time"}, nil); status != http.StatusOK || !strings.Contains(string(body), `"error_code":0`) {
		b.Fatalf("create loadq: %d %s", status, body)
	}
	return e
}

// benchWriter is a ResponseWriter that keeps the status and the body.
type benchWriter struct {
	h    http.Header
	code int
	body []byte
}

func (w *benchWriter) Header() http.Header { return w.h }
func (w *benchWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}
func (w *benchWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	w.body = append(w.body, p...)
	return len(p), nil
}
