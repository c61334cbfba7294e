package ui

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
)

// FuzzServeHTTPRoutes checks that ServeHTTP's short cut for API paths
// answers every request as the mux alone would: the same status,
// headers and body, whatever the path (unclean ones redirected, the
// dashboard's own served) and method.
func FuzzServeHTTPRoutes(f *testing.F) {
	for _, p := range []string{"/v1/queues/q/tasks", "/v1//queues", "/v1/./x", "/v1/a/../b/", "/api/addTask", "/api/",
		"/api/../ui/", "/ui/", "/ui", "/", "/v1", "/v1/%2e%2e/x", "/v1/q%2Fr/tasks", "/healthz", "/v1/x/", "/v2/x"} {
		f.Add(p, uint8(0))
		f.Add(p, uint8(1))
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(299)
		_, _ = io.WriteString(w, "api "+r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
	})
	h, err := New(api, Options{Token: func() string { return "tok" }, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	methods := []string{"GET", "POST", "DELETE", "CONNECT", "HEAD"}
	f.Fuzz(func(t *testing.T, p string, m uint8) {
		u, err := url.Parse("http://example.com" + p)
		if err != nil || len(u.Path) == 0 || u.Path[0] != '/' {
			return
		}
		req := func() *http.Request {
			return &http.Request{Method: methods[int(m)%len(methods)], URL: u, Host: "example.com", Header: http.Header{},
				RequestURI: u.RequestURI(), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Body: http.NoBody}
		}
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		h.ServeHTTP(got, req())
		h.mux.ServeHTTP(want, req())
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Fatalf("%s %q: ServeHTTP %d %v %q\nmux        %d %v %q", req().Method, p,
				got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	})
}
