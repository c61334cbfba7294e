package api

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

var (
	docOnce sync.Once
	doc     *openapi3.T
	docErr  error
)

// openAPIDoc loads the embedded OpenAPI document once.
func openAPIDoc(t *testing.T) *openapi3.T {
	t.Helper()
	docOnce.Do(func() {
		doc, docErr = openapi3.NewLoader().LoadFromData(openAPI)
		if docErr == nil {
			docErr = doc.Validate(t.Context())
		}
	})
	if docErr != nil {
		t.Fatal(docErr)
	}
	return doc
}

// conforms fails the test unless data, the answer of method pattern with
// status, is what the OpenAPI document says: its required fields present,
// its types right, and no field the document does not describe.
func (e *env) conforms(method, pattern string, status int, data []byte) {
	e.t.Helper()
	item := openAPIDoc(e.t).Paths.Find(pattern)
	if item == nil || item.GetOperation(method) == nil {
		e.t.Fatalf("%s %s is not in the OpenAPI document", method, pattern)
	}
	resp := item.GetOperation(method).Responses.Status(status)
	if resp == nil || resp.Value.Content.Get("application/json") == nil {
		e.t.Fatalf("%s %s: the document has no JSON answer %d", method, pattern, status)
	}
	schema := resp.Value.Content.Get("application/json").Schema.Value
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		e.t.Fatalf("%s %s: %v", method, pattern, err)
	}
	if err := schema.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		e.t.Errorf("%s %s %d does not match the document: %v\n%s", method, pattern, status, err, data)
	}
	if extra := undocumented(schema, v, ""); len(extra) > 0 {
		e.t.Errorf("%s %s %d: fields missing from the document: %s", method, pattern, status, strings.Join(extra, ", "))
	}
}

// conformsTo fails the test unless data is what the document's schema
// name describes (as conforms checks an answer).
func (e *env) conformsTo(name string, data []byte) {
	e.t.Helper()
	ref := openAPIDoc(e.t).Components.Schemas[name]
	if ref == nil {
		e.t.Fatalf("the document has no schema %s", name)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		e.t.Fatalf("schema %s: %v", name, err)
	}
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
		e.t.Errorf("%s does not match schema %s: %v", data, name, err)
	}
	if extra := undocumented(ref.Value, v, ""); len(extra) > 0 {
		e.t.Errorf("%s: fields missing from schema %s: %s", data, name, strings.Join(extra, ", "))
	}
}

// undocumented lists the object fields of v that schema does not name.
func undocumented(schema *openapi3.Schema, v any, at string) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if schema.AdditionalProperties.Schema != nil {
			for k, x := range v {
				out = append(out, undocumented(schema.AdditionalProperties.Schema.Value, x, at+"."+k)...)
			}
			break
		}
		for k, x := range v {
			p := schema.Properties[k]
			if p == nil {
				if len(schema.Properties) > 0 {
					out = append(out, at+"."+k)
				}
				continue
			}
			out = append(out, undocumented(p.Value, x, at+"."+k)...)
		}
	case []any:
		if schema.Items != nil {
			for k, x := range v {
				out = append(out, undocumented(schema.Items.Value, x, fmt.Sprintf("%s[%d]", at, k))...)
			}
		}
	}
	sort.Strings(out)
	return out
}
