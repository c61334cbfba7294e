package api

import (
	"net/http"
	"net/http/pprof"
)

// routePprof is the subtree of the Go runtime's profiles (Options.Pprof).
const routePprof = "GET /debug/pprof/"

// mountPprof serves the Go runtime's profiles under /debug/pprof/ behind
// the bearer token: the index, cmdline, profile (CPU, ?seconds=N), symbol,
// trace, and every named profile (heap, allocs, goroutine, block, mutex,
// threadcreate). They are served from this handler's mux, not from
// http.DefaultServeMux, so nothing else is exposed.
func (h *handler) mountPprof(mux *http.ServeMux) {
	mux.Handle(routePprof, h.auth(pprof.Index))
	mux.Handle("GET /debug/pprof/cmdline", h.auth(pprof.Cmdline))
	mux.Handle("GET /debug/pprof/profile", h.auth(pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", h.auth(pprof.Symbol))
	mux.Handle("POST /debug/pprof/symbol", h.auth(pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", h.auth(pprof.Trace))
}
