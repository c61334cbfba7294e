package api

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// /debug/pprof/ exists only with Options.Pprof, and then only for a
// caller with the token; the profiles it serves are real ones.
func TestPprof(t *testing.T) {
	off := newEnv(t, "embedded", nil)
	if status, body := off.call("GET", "/debug/pprof/", nil, nil); status != http.StatusNotFound || errCode(body) != codeNotFound {
		t.Fatalf("without Pprof: %d %s, want a JSON 404", status, body)
	}

	e := newEnv(t, "embedded", func(o *Options) { o.Pprof = true })
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if status, body := e.callAuth("GET", path, "", nil, nil); status != http.StatusUnauthorized || errCode(body) != codeUnauthorized {
			t.Errorf("%s without the token: %d %s, want 401 unauthorized", path, status, body)
		}
	}
	if status, body := e.call("GET", "/debug/pprof/", nil, nil); status != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Errorf("index: %d %.200s", status, body)
	}
	if status, body := e.call("GET", "/debug/pprof/goroutine?debug=1", nil, nil); status != http.StatusOK || !strings.Contains(string(body), "goroutine profile:") {
		t.Errorf("goroutines: %d %.200s", status, body)
	}
	// A CPU profile is gzipped protobuf.
	if status, body := e.call("GET", "/debug/pprof/profile?seconds=1", nil, nil); status != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Errorf("CPU profile: %d %.200q", status, body)
	}
	if status, body := e.call("POST", "/debug/pprof/heap", nil, nil); status != http.StatusMethodNotAllowed || errCode(body) != codeMethodNotAllowed {
		t.Errorf("POST heap: %d %s, want 405", status, body)
	}
}
