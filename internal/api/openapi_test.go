package api

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPIDocument: the document is valid OpenAPI 3, is what
// /v1/openapi.json serves, and describes every /v1 route the handler has.
func TestOpenAPIDocument(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid OpenAPI document: %v", err)
	}
	e := newEnv(t, "embedded", nil)
	status, data := e.callAuth("GET", "/v1/openapi.json", "", nil, nil)
	if status != http.StatusOK || string(data) != string(openAPI) {
		t.Errorf("GET /v1/openapi.json: %d, %d bytes", status, len(data))
	}
	src, err := os.ReadFile("api.go")
	if err != nil {
		t.Fatal(err)
	}
	routes := regexp.MustCompile(`(?:v1|mux\.HandleFunc)\("(GET|POST|PATCH|DELETE) (/v1/[^"]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(routes) < 20 {
		t.Fatalf("found only %d routes in api.go", len(routes))
	}
	for _, r := range routes {
		method, path := r[1], r[2]
		item := doc.Paths.Find(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("route %s %s is not in the OpenAPI document", method, path)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			want := method + " " + path
			if !strings.Contains(string(src), `"`+want+`"`) {
				t.Errorf("the document has %s, the handler does not", want)
			}
		}
	}
}
