package api

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPI is the OpenAPI 3 document of the native API (/v1).
//
//go:embed openapi.json
var openAPI []byte

// serveOpenAPI: GET /v1/openapi.json (no token needed).
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(openAPI)))
	hdr.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPI)
}
