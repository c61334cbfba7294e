package api

import (
	"fmt"
	"net/http"
	"path"
	"strings"
)

// The catch-all patterns: every request no route takes reaches noRoute
// through one of them (the /v1 one behind the token), so that even a
// wrong method or path is answered in JSON.
const (
	routeV1Fallback = "/v1/"
	routeFallback   = "/"
)

// probeMethods are the methods noRoute tries on a path to say which the
// path allows.
var probeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// noRoute answers a request no route takes: 405 method_not_allowed with
// an Allow header when the path has routes for other methods, else 404
// not_found. The allowed methods come from the mux itself, so the route
// list is written once.
func (h *handler) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range probeMethods {
		probe := *r
		probe.Method = m
		if _, pattern := h.mux.Handler(&probe); pattern != routeV1Fallback && pattern != routeFallback && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		h.writeError(w, r, fmt.Errorf("%w: no route %s %s", errNoRoute, r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	h.writeError(w, r, fmt.Errorf("%w: %s %s: the path allows %s", errMethodNotAllowed, r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// unclean reports whether http.ServeMux would redirect a request for p
// rather than route it: p is not in its clean form (/v1/queues//tasks,
// whose queue name is empty; a "." or ".." segment), or is "/v1", which
// the mux redirects to the /v1/ subtree. A redirect has no JSON body.
func unclean(p string) bool {
	if p == "/v1" {
		return true
	}
	c := path.Clean(p)
	if strings.HasSuffix(p, "/") && c != "/" {
		c += "/"
	}
	return c != p
}
