package htqcompat

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// FuzzParseExecuteTime checks HTQ's execute_time reader: it never panics,
// refuses with an ErrInvalidArgument error, reads "" and "0" as now (the
// zero time), and a time it reads is in the server's zone and prints back
// as a time it reads the same.
func FuzzParseExecuteTime(f *testing.F) {
	for _, s := range []string{"", "0", " 0 ", "2026-12-01 09:30:00", "2026-03-08 02:30:00", "2026-11-01 01:30:00",
		"2026-13-01 00:00:00", "0000-01-01 00:00:00", "9999-12-31 23:59:59", "2026-12-01T09:30:00Z", "2026-12-01 9:30:00"} {
		f.Add(s, uint8(0))
	}
	zones := []string{"UTC", "Asia/Shanghai", "America/New_York", "Australia/Lord_Howe"}
	locs := make([]*time.Location, len(zones))
	for i, z := range zones {
		loc, err := time.LoadLocation(z)
		if err != nil {
			f.Skipf("time zone %s: %v", z, err)
		}
		locs[i] = loc
	}
	f.Fuzz(func(t *testing.T, s string, zone uint8) {
		loc := locs[int(zone)%len(locs)]
		at, err := parseExecuteTime(s, loc)
		if err != nil {
			if !errors.Is(err, base.ErrInvalidArgument) {
				t.Fatalf("parseExecuteTime(%q): %v does not wrap ErrInvalidArgument", s, err)
			}
			return
		}
		if trimmed := strings.TrimSpace(s); trimmed == "" || trimmed == "0" {
			if !at.IsZero() {
				t.Fatalf("parseExecuteTime(%q) = %v, want now (the zero time)", s, at)
			}
			return
		}
		if at.IsZero() {
			return // 0001-01-01 00:00:00 UTC: a past time, run now as HTQ did
		}
		if at.Location() != loc {
			t.Fatalf("parseExecuteTime(%q) is in %v, want %v", s, at.Location(), loc)
		}
		again, err := parseExecuteTime(at.Format(ExecuteTimeLayout), loc)
		if err != nil || !again.Equal(at) {
			t.Fatalf("parseExecuteTime(%q) = %v prints as %q, which reads %v, %v", s, at, at.Format(ExecuteTimeLayout), again, err)
		}
	})
}

// FuzzHTQFields checks the readers of addTask's JSON form fields, header
// and data: no panic, ErrInvalidArgument errors, and header values that
// are text.
func FuzzHTQFields(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"X-A":"b","X-N":1,"X-B":true}`, `{"a":[1,"x",null,{"b":2}],"c":{"d":[]}}`, `{"a":null}`, `[1]`, `{"a":{}}`, `"x"`, `{"a":1e999}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if _, err := htqHeader(s); err != nil && !errors.Is(err, base.ErrInvalidArgument) {
			t.Fatalf("htqHeader(%q): %v does not wrap ErrInvalidArgument", s, err)
		}
		vals, err := htqData(s)
		if err != nil {
			if !errors.Is(err, base.ErrInvalidArgument) {
				t.Fatalf("htqData(%q): %v does not wrap ErrInvalidArgument", s, err)
			}
			return
		}
		_ = vals.Encode()
	})
}

// FuzzWriteHTQReply checks that an HTQ reply written by hand is, byte for
// byte and header for header, what writeHTQ writes of it.
func FuzzWriteHTQReply(f *testing.F) {
	f.Add(1001, "添加失败: URL task: url \"http://a/<b>&c\" is not allowed\n\xff")
	f.Add(0, "")
	f.Add(-7, "\u2028")
	f.Fuzz(func(t *testing.T, code int, msg string) {
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		writeHTQReply(got, http.StatusOK, htqReply{ErrorCode: code, Message: msg})
		writeHTQ(want, http.StatusOK, htqReply{ErrorCode: code, Message: msg})
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("writeHTQReply: %d %q\nwriteHTQ:      %d %q", got.Code, got.Body, want.Code, want.Body)
		}
		if !reflect.DeepEqual(got.Header(), want.Header()) {
			t.Fatalf("headers %v, writeHTQ %v", got.Header(), want.Header())
		}
	})
}
