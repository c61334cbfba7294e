package model

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// Every key decodeStrict's fast path takes as known is a field that the
// strict decoder takes too (a key it took wrongly would let an unknown
// field through), and the fast path knows some.
func TestFieldKeys(t *testing.T) {
	for _, tc := range []struct {
		name   string
		keys   map[string]bool
		decode func([]byte) error
	}{
		{"options", optionKeys, func(b []byte) error { var o TaskOptions; return o.unmarshal(b, nil) }},
		{"variable", variableKeys, func(b []byte) error { var v Variable; return v.unmarshal(b, nil) }},
	} {
		if len(tc.keys) == 0 {
			t.Errorf("%s: no known keys", tc.name)
		}
		for k := range tc.keys {
			if err := tc.decode([]byte(`{"` + k + `":null}`)); err != nil {
				t.Errorf("%s: known key %q: %v", tc.name, k, err)
			}
		}
	}
	if !optionKeys["delay"] || !optionKeys["process_at"] || optionKeys["Delay"] {
		t.Errorf("optionKeys = %v", optionKeys)
	}
}

// FuzzDecodeStrict checks that the options and variable objects decode
// as they do without decodeStrict's fast path: the same value, the same
// error.
func FuzzDecodeStrict(f *testing.F) {
	for _, s := range []string{`{"delay":3600}`, `{"delay":"1m","unique":"1h","task_id":"t1","retention":60}`,
		`{"process_at":"2030-01-02T03:04:05Z","max_retry":3}`, `{"deadline":"x"}`, `{"Delay":1}`, `{"delay":1,"x":2}`,
		`{"max_retry":"a","x":1}`, `{"x":1,"max_retry":"a"}`, `{ "timeout" : [1, {"a":"}"}] , "group":"g"}`, `[]`, `null`,
		`{"delay":1e999}`, `{"del\u0061y":1}`, `{"interval_s":1.5}`, `{"interval_s":"x"}`, `{"delay":1`, `{}x`, ` {} `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, old TaskOptions
		errFast, errOld := fast.UnmarshalJSON(b), old.unmarshal(b, nil)
		if fmt.Sprint(errFast) != fmt.Sprint(errOld) || !reflect.DeepEqual(fast, old) {
			t.Fatalf("options %q: %+v %v, without the fast path %+v %v", b, fast, errFast, old, errOld)
		}
		var fastV, oldV Variable
		errFast, errOld = fastV.UnmarshalJSON(b), oldV.unmarshal(b, nil)
		if fmt.Sprint(errFast) != fmt.Sprint(errOld) || fastV != oldV {
			t.Fatalf("variable %q: %+v %v, without the fast path %+v %v", b, fastV, errFast, oldV, errOld)
		}
	})
}

// FuzzDuration checks Duration.UnmarshalJSON against its reading through
// json.Unmarshal alone.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{`3600`, `-1.5e3`, `0.25`, `1e999`, `"1m30s"`, `"1h\u0030m"`, `"x"`, `"\xff"`, `5 `, ` 5`, `1.`,
		`01`, `-`, `null`, `true`, `"1s`, `""`, `9223372037`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, old Duration = 7, 7
		errFast, errOld := fast.UnmarshalJSON(bytes.Clone(b)), old.unmarshal(b, false)
		if fmt.Sprint(errFast) != fmt.Sprint(errOld) || fast != old {
			t.Fatalf("%q: %v %v, want %v %v", b, fast, errFast, old, errOld)
		}
	})
}

// IsEmptyArray and IsEmptyObject take "[]" and "{}" with any white space,
// and nothing else.
func TestIsEmpty(t *testing.T) {
	for s, want := range map[string][2]bool{
		`[]`: {true, false}, " [ \n] ": {true, false}, `{}`: {false, true}, "\t{ \r\n}\n": {false, true},
		`[1]`: {}, `{"a":1}`: {}, `{}x`: {}, `{`: {}, `}`: {}, ``: {}, `[}`: {}, `{]`: {}, `"{}"`: {},
	} {
		if got := [2]bool{IsEmptyArray([]byte(s)), IsEmptyObject([]byte(s))}; got != want {
			t.Errorf("%q: IsEmptyArray, IsEmptyObject = %v, want %v", s, got, want)
		}
	}
}
