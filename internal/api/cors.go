package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// CORS of the native API. Browsers on another origin may call /v1 only
// when their origin is on the allow-list (Options.CORSOrigins); no
// credentials (cookies) are ever allowed, since the API authenticates
// with the Authorization header.
const (
	corsAllowMethods = "GET, POST, PATCH, DELETE"
	corsAllowHeaders = "Authorization, Content-Type, Last-Event-ID"
	corsMaxAge       = "600"
)

// codeOriginNotAllowed is the JSON code of a refused preflight (403).
const codeOriginNotAllowed = "origin_not_allowed"

// errOriginNotAllowed refuses the preflight of an origin that is not on
// the allow-list.
var errOriginNotAllowed = errors.New("origin not allowed")

// cors is the allow-list of origins; empty: CORS is off.
type cors struct {
	any     bool
	origins []string
}

// CheckCORSOrigins checks an allow-list of origins: each is "*" (any
// origin) or scheme://host[:port] with scheme http or https and nothing
// after the host.
func CheckCORSOrigins(origins []string) error {
	for _, o := range origins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("CORS origin %q: want * or scheme://host[:port], e.g. https://dash.example.com", o)
		}
	}
	return nil
}

func newCORS(origins []string) *cors {
	c := &cors{}
	for _, o := range origins {
		if o == "*" {
			c.any = true
			continue
		}
		c.origins = append(c.origins, strings.ToLower(strings.TrimSuffix(o, "/")))
	}
	return c
}

func (c *cors) on() bool { return c.any || len(c.origins) > 0 }

func (c *cors) allows(origin string) bool {
	return c.any || slices.Contains(c.origins, strings.ToLower(origin))
}

// wrap answers the preflights of /v1 and adds the CORS headers to the
// answers to allowed origins; other requests pass through unchanged.
func (c *cors) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		hdr := w.Header()
		hdr.Add("Vary", "Origin")
		preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
		allowed := c.allows(origin)
		if allowed {
			if c.any {
				hdr.Set("Access-Control-Allow-Origin", "*")
			} else {
				hdr.Set("Access-Control-Allow-Origin", origin)
			}
		}
		if !preflight {
			next.ServeHTTP(w, r)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("%s: origin %s may not call this API from a browser; ", errOriginNotAllowed, origin)
			if c.on() {
				msg += "add it to htq serve's --cors-origins"
			} else {
				msg += "CORS is off (start htq serve with --cors-origins to allow it)"
			}
			writeJSON(w, http.StatusForbidden, errorBody{Error: errorDetail{Code: codeOriginNotAllowed, Message: msg}})
			return
		}
		hdr.Add("Vary", "Access-Control-Request-Method")
		hdr.Add("Vary", "Access-Control-Request-Headers")
		hdr.Set("Access-Control-Allow-Methods", corsAllowMethods)
		hdr.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		hdr.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
	})
}
