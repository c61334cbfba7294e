package api

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/metrics"
)

// fuzzServer is the real handler over the embedded store in memory, as the
// fuzz tests drive it: each request goes through ServeHTTP with an
// httptest recorder (no sockets, so a fuzz worker runs thousands a
// second). It is rebuilt every fuzzRebuild requests, so that what the
// fuzzer enqueues does not pile up.
type fuzzServer struct {
	tb     testing.TB
	h      http.Handler
	st     *htq.Storage
	cancel context.CancelFunc
	n      int
}

const fuzzRebuild = 5000

func newFuzzServer(tb testing.TB) *fuzzServer {
	s := &fuzzServer{tb: tb}
	s.rebuild()
	tb.Cleanup(s.close)
	return s
}

func (s *fuzzServer) close() {
	if s.st != nil {
		s.cancel()
		s.st.Close()
		s.st = nil
	}
}

func (s *fuzzServer) rebuild() {
	s.close()
	st, err := htq.Open("mem:")
	if err != nil {
		s.tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h, err := New(Options{
		Storage: st, Token: testToken, HTQAppKey: "key", HTQAppToken: "tok",
		Location: time.UTC, Context: ctx, Logger: discardLogger(), Metrics: metrics.New(),
		MaxBodyBytes: 64 << 10, MaxFetchBytes: 16 << 10,
	})
	if err != nil {
		cancel()
		st.Close()
		s.tb.Fatal(err)
	}
	s.h, s.st, s.cancel, s.n = h, st, cancel, 0
}

// do serves one request. It returns false when the request could not be
// made (a target that is not a URL) or took longer than a fuzz input may
// (a fetch that waits: the handler then answers nothing).
func (s *fuzzServer) do(method, target, ctype string, body []byte) (*httptest.ResponseRecorder, bool) {
	if s.n++; s.n > fuzzRebuild {
		s.rebuild()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://htq.test"+target, bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	req.Header.Set("Authorization", "Bearer "+testToken)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	return rec, ctx.Err() == nil
}

// checkAnswer fails unless the answer is one a client can rely on: no 5xx
// (the storage is in memory, so every failure is the input's), a body
// that is empty (204, 202) or valid JSON in UTF-8, and an error body with
// a code and a message.
func checkAnswer(t *testing.T, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	data := rec.Body.Bytes()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, data)
	}
	if len(data) == 0 {
		if rec.Code != http.StatusNoContent && rec.Code != http.StatusAccepted {
			t.Fatalf("%s: %d with an empty body", what, rec.Code)
		}
		return
	}
	if !utf8.Valid(data) || !json.Valid(data) {
		t.Fatalf("%s: %d answer is not valid JSON: %q", what, rec.Code, data)
	}
	if rec.Code >= 400 && strings.HasPrefix(what, "native ") {
		var b errorBody
		if err := json.Unmarshal(data, &b); err != nil || b.Error.Code == "" || b.Error.Message == "" {
			t.Fatalf("%s: %d error without a code and message: %s", what, rec.Code, data)
		}
	}
}

// nativeRoutes are the /v1 routes FuzzNativeAPI sends bodies and queries
// to; Q and I stand for the fuzzed queue name and task ID.
var nativeRoutes = []struct{ method, path string }{
	{"POST", "/v1/queues"},
	{"PATCH", "/v1/queues/Q"},
	{"DELETE", "/v1/queues/Q"},
	{"GET", "/v1/queues/Q"},
	{"GET", "/v1/queues"},
	{"POST", "/v1/queues/Q/pause"},
	{"POST", "/v1/queues/Q/tasks"},
	{"POST", "/v1/queues/Q/tasks/batch"},
	{"GET", "/v1/queues/Q/tasks"},
	{"GET", "/v1/queues/Q/tasks/I"},
	{"DELETE", "/v1/queues/Q/tasks/I"},
	{"POST", "/v1/queues/Q/tasks/I/run"},
	{"POST", "/v1/queues/Q/tasks/I/cancel"},
	{"POST", "/v1/fetch"},
	{"POST", "/v1/queues/Q/tasks/I/ack"},
	{"POST", "/v1/queues/Q/tasks/I/fail"},
	{"POST", "/v1/queues/Q/tasks/I/heartbeat"},
	{"POST", "/v1/schedules"},
	{"GET", "/v1/schedules/I"},
	{"DELETE", "/v1/schedules/I"},
	{"PUT", "/v1/queues/Q/tasks"},
	{"GET", "/v1/nothing/Q"},
}

// FuzzNativeAPI sends any body and query to every /v1 route through the
// real handler over the embedded store: bad input never gets a 5xx, and
// every answer is valid JSON (an error with a code and a message).
// testdata/fuzz/FuzzNativeAPI keeps the inputs that once broke it.
func FuzzNativeAPI(f *testing.F) {
	seeds := []struct {
		route       uint8
		queue, id   string
		query, body string
	}{
		{0, "", "", "", `{"name":"q","mode":"pull","max_concurrency":2}`},
		{0, "", "", "", `{"name":"u","mode":"variable","stepping_time_s":5}`},
		{1, "q", "", "force=true", `{"mode":"real_time","rate_limit":1.5}`},
		{6, "q", "", "", `{"type":"a","payload":{"i":1},"options":{"delay":"1m","unique":"1h","task_id":"t1","retention":60}}`},
		{6, "u", "", "", `{"url":"http://example.com/x","method":"put","headers":{"A":"b"},"body":"hi","timeout_ms":1500}`},
		{6, "q", "", "", `{"type":"a","payload_base64":"AAEC","options":{"process_at":"2030-01-02T03:04:05Z","max_retry":3}}`},
		{7, "q", "", "", `{"tasks":[{"type":"a"},{"type":"b","payload":[1,2]}]}`},
		{8, "q", "", "state=scheduled&page=1&page_size=5", ``},
		{8, "q", "", "state=aggregating&group=g", ``},
		{9, "q", "t1", "", ``},
		{13, "", "", "", `{"queues":["q"],"count":3,"lease_s":5,"worker_id":"w"}`},
		{14, "q", "t1", "", `{"token":"x","result":{"ok":true}}`},
		{15, "q", "t1", "", `{"token":"x","error":"boom","retry_in_s":1.5,"skip_retry":false}`},
		{16, "q", "t1", "", `{"token":"x","lease_s":10}`},
		{17, "", "", "", `{"cron":"*/5 * * * *","queue":"q","task":{"type":"a"}}`},
		{17, "", "", "", `{"cron":"TZ=","queue":"q","task":{"type":"a"}}`},
		{6, "q", "", "", "{\"type\":\"a\",\"payload\":\"\xff\"}"},
		{6, "q", "", "", `[]`},
		{0, "", "", "", `{"name":"q","mode":"pull","lease_ms":-1}`},
		{20, "q", "", "", ``},
	}
	for _, s := range seeds {
		f.Add(s.route, s.queue, s.id, s.query, []byte(s.body))
	}
	srv := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, route uint8, queue, id, query string, body []byte) {
		rt := nativeRoutes[int(route)%len(nativeRoutes)]
		path := strings.ReplaceAll(rt.path, "Q", url.PathEscape(queue))
		path = strings.ReplaceAll(path, "I", url.PathEscape(id))
		if query != "" {
			path += "?" + query
		}
		rec, ok := srv.do(rt.method, path, "application/json", body)
		if !ok {
			return
		}
		checkAnswer(t, "native "+rt.method+" "+path, rec)
	})
}

// htqEndpoints are HTQ's endpoints.
var htqEndpoints = []string{"addQueue", "deleteQueue", "allQueue", "countQueue", "addTask"}

// htqContentTypes are the content types FuzzHTQForms sends bodies as.
var htqContentTypes = []string{"application/x-www-form-urlencoded", "multipart/form-data; boundary=B", "text/plain", "", "multipart/form-data"}

// FuzzHTQForms sends any form body to HTQ's endpoints through the real
// handler: bad input never gets a 5xx, and every answer is valid JSON.
func FuzzHTQForms(f *testing.F) {
	creds := "app_key=key&app_token=tok&"
	for _, s := range []struct {
		endpoint, ctype uint8
		body            string
	}{
		{0, 0, creds + "queue_name=q&type=variable&stepping_time=30&max_time_interval=600"},
		{0, 0, creds + "queue_name=r&type=real_time&max_concurrency=2&rate_limit=1.5&retry_4xx=true"},
		{4, 0, creds + "queue_name=q&url=http%3A%2F%2Fexample.com%2F&method=post&header=%7B%22X%22%3A1%7D&data=%7B%22a%22%3A%5B1%2C%22b%22%5D%7D&execute_time=2030-01-02+03%3A04%3A05"},
		{4, 0, creds + "queue_name=q&url=http%3A%2F%2F127.0.0.1%3A0%2F"},
		{3, 0, creds + "queue_name=q"},
		{2, 0, creds},
		{1, 0, creds + "queue_name=q"},
		{0, 0, creds + "queue_name=%zz"},
		{4, 1, "--B\r\nContent-Disposition: form-data; name=\"app_key\"\r\n\r\nkey\r\n--B\r\nContent-Disposition: form-data; name=\"app_token\"\r\n\r\ntok\r\n--B\r\nContent-Disposition: form-data; name=\"queue_name\"\r\n\r\nq\r\n--B--\r\n"},
		{4, 4, creds},
	} {
		f.Add(s.endpoint, s.ctype, []byte(s.body))
	}
	srv := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, endpoint, ctype uint8, body []byte) {
		path := "/api/" + htqEndpoints[int(endpoint)%len(htqEndpoints)]
		ct := htqContentTypes[int(ctype)%len(htqContentTypes)]
		rec, ok := srv.do(http.MethodPost, path, ct, body)
		if !ok {
			return
		}
		checkAnswer(t, "HTQ "+path, rec)
		if rec.Header().Get("Access-Control-Allow-Credentials") != "" {
			t.Fatalf("%s: Access-Control-Allow-Credentials sent", path)
		}
		if rec.Code != http.StatusOK && rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("%s: status %d: %s", path, rec.Code, rec.Body.Bytes())
		}
	})
}
