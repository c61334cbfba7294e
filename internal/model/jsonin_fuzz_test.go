package model

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
)

// Every key of TaskOptions and Variable is known to decodeStrict's fast
// path, and nothing else is.
func TestFieldKeys(t *testing.T) {
	want := map[string]bool{"delay": true, "process_at": true, "max_retry": true, "timeout": true, "deadline": true,
		"unique": true, "task_id": true, "retention": true, "group": true, "callback": true, "failure_callback": true, "priority": true, "key": true}
	if !reflect.DeepEqual(optionKeys, want) {
		t.Errorf("optionKeys = %v, want %v", optionKeys, want)
	}
	if !reflect.DeepEqual(variableKeys, map[string]bool{"interval_s": true}) {
		t.Errorf("variableKeys = %v", variableKeys)
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
