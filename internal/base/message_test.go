package base

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateHeaders(t *testing.T) {
	many := map[string]string{}
	for i := 0; i <= MaxHeaders; i++ {
		many[string(rune('a'+i))] = "v"
	}
	tests := []struct {
		name string
		h    map[string]string
		ok   bool
	}{
		{"nil", nil, true},
		{"trace context", map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "congo=t61rcWkgMzE"}, true},
		{"empty value", map[string]string{"baggage": ""}, true},
		{"empty map", map[string]string{}, false},
		{"empty name", map[string]string{"": "x"}, false},
		{"upper case name", map[string]string{"Traceparent": "x"}, false},
		{"space in name", map[string]string{"trace parent": "x"}, false},
		{"newline in value", map[string]string{"traceparent": "a\nb"}, false},
		{"non-ASCII value", map[string]string{"tracestate": "é"}, false},
		{"too many", many, false},
		{"too large", map[string]string{"tracestate": strings.Repeat("x", MaxHeadersSize)}, false},
	}
	for _, tc := range tests {
		err := ValidateHeaders(tc.h)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: error %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	m := &TaskMessage{ID: "a", Type: "t", Queue: "q", Headers: map[string]string{"Bad Name": "x"}}
	if err := m.Validate(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Validate with a bad header = %v, want ErrInvalidArgument", err)
	}
	a := &TaskMessage{ID: "a", Type: "t", Queue: "q", Headers: map[string]string{"traceparent": "1"}}
	b := &TaskMessage{ID: "a", Type: "t", Queue: "q", Headers: map[string]string{"traceparent": "2"}}
	if !a.SameEnqueue(b) {
		t.Error("SameEnqueue compares Headers; a repeated enqueue from another trace would conflict")
	}
}
