package model

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// FuzzAppendString compares AppendString with encoding/json's Marshal of
// the same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "http://a/b?c=1&d=<2>", "\"\\\b\f\n\r\t\x00\x1f\x7f", "é\u2028\u2029\xff\xe2\x80", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("AppendString(%q) = %q, json.Marshal %q", s, got, want)
		}
	})
}

// FuzzURLTaskEncode compares URLTask.Encode with json.Marshal of the same
// task.
func FuzzURLTaskEncode(f *testing.F) {
	f.Add("http://127.0.0.1:1/x?i=1&j=2", "POST", "X-A", "1", "{}", "", int64(0), "", "", int64(1796169600123456789), true, false)
	f.Add("https://a/<b>", "get", "", "", "", "AAEC", int64(5000), "http://c/", "http://d/", int64(0), false, true)
	f.Add("u", "M", "k\xff", "v\u2028", "b\n", "", int64(-1), "", "", int64(-1), true, false)
	f.Fuzz(func(t *testing.T, url, method, hk, hv, body, body64 string, timeout int64, cb, fcb string, nanos int64, due, variable bool) {
		task := &URLTask{URL: url, Method: method, Body: body, BodyBase64: body64, TimeoutMS: timeout,
			Callback: cb, FailureCallback: fcb}
		if hk != "" || hv != "" {
			task.Headers = map[string]string{hk: hv, hk + "2": hv, "A" + hk: ""}
		}
		if due {
			at := time.Unix(0, nanos).UTC()
			if nanos < 0 {
				at = at.AddDate(-3000, 0, 0)
			}
			if nanos%3 == 1 {
				at = at.In(time.FixedZone("z", 3600))
			}
			task.ProcessAt = &at
		}
		if variable {
			task.Variable = &Variable{IntervalS: float64(timeout) / 7}
		}
		got, gotErr := task.Encode()
		want, wantErr := json.Marshal(task)
		if (gotErr != nil) != (wantErr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("Encode: %q %v\njson.Marshal: %q %v", got, gotErr, want, wantErr)
		}
	})
}

// Encode writes by hand every field of URLTask but Variable and
// CallbackOf (which it leaves to json.Marshal): a field added to URLTask
// must be added to Encode, and here, or it would be dropped from the
// payload.
func TestURLTaskEncodeKnowsEveryField(t *testing.T) {
	written := map[string]bool{"URL": true, "Method": true, "Headers": true, "Body": true, "BodyBase64": true,
		"TimeoutMS": true, "Variable": true, "Callback": true, "FailureCallback": true, "CallbackOf": true, "ProcessAt": true}
	typ := reflect.TypeFor[URLTask]()
	for i := range typ.NumField() {
		if f := typ.Field(i); !written[f.Name] {
			t.Errorf("URLTask.%s: not written by Encode", f.Name)
		}
	}
	if typ.NumField() != len(written) {
		t.Errorf("URLTask has %d fields, Encode knows %d", typ.NumField(), len(written))
	}
}

// ContentLength gives the length in decimal, from the shared table below
// 1,024 bytes and afresh above.
func TestContentLength(t *testing.T) {
	for _, n := range []int{0, 1, 41, 148, 1023, 1024, 5000, 4 << 20} {
		if got := ContentLength(n); len(got) != 1 || got[0] != strconv.Itoa(n) {
			t.Errorf("ContentLength(%d) = %q", n, got)
		}
	}
	if a, b := ContentLength(148), ContentLength(148); &a[0] != &b[0] {
		t.Error("ContentLength(148) is not the shared slice")
	}
}
