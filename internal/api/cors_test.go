package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestCORS(t *testing.T) {
	preflight := func(e *env, origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", e.srv.URL+"/v1/queues", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	get := func(e *env, origin string) *http.Response {
		req, _ := http.NewRequest("GET", e.srv.URL+"/v1/queues", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	const dash = "https://dash.example.com"

	e := newEnv(t, "embedded", func(o *Options) { o.CORSOrigins = []string{dash, "http://localhost:3000"} })
	resp := preflight(e, dash)
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != dash ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "PATCH") || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		h.Get("Access-Control-Max-Age") == "" || h.Get("Access-Control-Allow-Credentials") != "" || !strings.Contains(strings.Join(h.Values("Vary"), ","), "Origin") {
		t.Errorf("preflight of an allowed origin: %d %v", resp.StatusCode, h)
	}
	if resp := preflight(e, "https://evil.example.com"); resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of another origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := get(e, "http://localhost:3000"); resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" {
		t.Errorf("GET from an allowed origin: %d %v", resp.StatusCode, resp.Header)
	}
	if resp := get(e, "https://evil.example.com"); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET from another origin got CORS headers: %v", resp.Header)
	}
	status, data := e.callAuth("OPTIONS", "/v1/queues", "", nil, nil)
	if status != http.StatusUnauthorized {
		t.Errorf("OPTIONS without Origin is no preflight: %d %s", status, data)
	}

	off := newEnv(t, "embedded", nil)
	req, _ := http.NewRequest("OPTIONS", off.srv.URL+"/v1/queues", nil)
	req.Header.Set("Origin", dash)
	req.Header.Set("Access-Control-Request-Method", "GET")
	resp, err := off.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body errorBody
	_ = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || body.Error.Code != codeOriginNotAllowed || !strings.Contains(body.Error.Message, "CORS is off") {
		t.Errorf("preflight with CORS off: %d %+v", resp.StatusCode, body)
	}
	if resp := get(off, dash); resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("CORS off, GET got CORS headers: %v", resp.Header)
	}

	anyOrigin := newEnv(t, "embedded", func(o *Options) { o.CORSOrigins = []string{"*"} })
	if resp := preflight(anyOrigin, "https://x.example"); resp.StatusCode != http.StatusNoContent ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("preflight with *: %d %v", resp.StatusCode, resp.Header)
	}

	for _, bad := range []string{"dash.example.com", "ftp://x", "https://x/path", "https://user@x", "https://x?a=1", ""} {
		if _, err := New(Options{Storage: e.st, Token: testToken, CORSOrigins: []string{bad}}); err == nil || !strings.Contains(err.Error(), "CORS origin") {
			t.Errorf("CORS origin %q accepted: %v", bad, err)
		}
	}
}
