// Command floor is the net/http floor of htq serve's CPU per request: a
// bare net/http server whose one handler reads the request body and writes
// a fixed 60-byte JSON answer, started the way cpu-ab-paired.sh starts
// htq serve (`floor serve`, listening on HTQ_ADDR; every other variable is
// ignored). Measured beside htq serve under the same load tools, its CPU
// per request is what net/http and the kernel's loopback cost on this
// machine; what htq serve spends above it is htq's.
//
// So that the load tools' checks pass, an answer under /v1/ has status 201
// and any other 200, and a body naming the target 10.9.9.9 (the request
// cpu-ab-paired.sh expects refused) gets error_code 1001 instead of 0: one
// bytes.Contains over the body, well under a microsecond. FLOOR_TIMEOUTS=htq
// adds htq serve's read, write and idle timeouts (the floor has only the
// read-header timeout), whose deadlines net/http sets on every request.
//
//	go build -o /tmp/floor ./floor
//	bench/serve/cpu-ab-paired.sh floor=/tmp/floor htq=/tmp/htq
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// Both answers are 60 bytes, as the floor asks.
var (
	accepted = []byte(`{"error_code":0,"message":"ok","id":"0123456789abcdefghijk"}`)
	refused  = []byte(`{"error_code":1001,"message":"refused","id":"0123456789abc"}`)
	badIP    = []byte("//10.9.9.9")
	ctype    = []string{"application/json"}
	clen     = []string{"60"}
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "usage: HTQ_ADDR=host:port floor serve")
		os.Exit(2)
	}
	addr := os.Getenv("HTQ_ADDR")
	if addr == "" {
		addr = "127.0.0.1:5999"
	}
	srv := &http.Server{
		Addr:              addr,
		ReadHeaderTimeout: 10 * time.Second,
		Handler:           http.HandlerFunc(answer),
	}
	if os.Getenv("FLOOR_TIMEOUTS") == "htq" {
		// htq serve's other default timeouts (service.Default…Timeout):
		// what the deadlines net/http sets per request cost.
		srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = 60*time.Second, 90*time.Second, 120*time.Second
	}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}

// answer reads the body and writes the fixed answer.
func answer(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := accepted
	if bytes.Contains(body, badIP) {
		out = refused
	}
	h := w.Header()
	h["Content-Type"] = ctype
	h["Content-Length"] = clen
	code := http.StatusOK
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		code = http.StatusCreated
	}
	w.WriteHeader(code)
	_, _ = w.Write(out)
}
