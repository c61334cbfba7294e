package model

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// Every field the dispatcher would refuse at the first dispatch is refused
// by Validate at enqueue (internal/service's FuzzURLTaskAgreesWithDispatch
// checks the two agree on any input).
func TestURLTaskValidate(t *testing.T) {
	ok := []URLTask{
		{URL: "http://example.com/", Method: "POST"},
		{URL: "https://example.com:443/a?b=c", Method: "GET", Headers: map[string]string{"X-A": "tab\tok", "X-B": "ünïcode"}, TimeoutMS: MaxRequestTimeout.Milliseconds()},
		{URL: "http://[::1]:8080/", Method: "DELETE", BodyBase64: "AAE="},
	}
	for _, ut := range ok {
		if _, err := ut.Validate(); err != nil {
			t.Errorf("%+v: %v", ut, err)
		}
	}
	bad := map[string]URLTask{
		"timeout above the maximum": {URL: "http://example.com/", Method: "POST", TimeoutMS: MaxRequestTimeout.Milliseconds() + 1},
		"negative timeout":          {URL: "http://example.com/", Method: "POST", TimeoutMS: -1},
		"port 0":                    {URL: "http://127.0.0.1:0/", Method: "POST"},
		"port 65536":                {URL: "http://example.com:65536/", Method: "POST"},
		"control byte in a header":  {URL: "http://example.com/", Method: "POST", Headers: map[string]string{"X-A": "a\x01b"}},
		"DEL in a header":           {URL: "http://example.com/", Method: "POST", Headers: map[string]string{"X-A": "a\x7fb"}},
		"bad UTF-8 in a header":     {URL: "http://example.com/", Method: "POST", Headers: map[string]string{"X-A": "a\xffb"}},
		"Expect":                    {URL: "http://example.com/", Method: "POST", Headers: map[string]string{"Expect": "100-continue"}},
		"Proxy-Authorization":       {URL: "http://example.com/", Method: "POST", Headers: map[string]string{"proxy-authorization": "x"}},
		"bad UTF-8 in the URL":      {URL: "http://example.com/\xff", Method: "POST"},
		"bad UTF-8 in the body":     {URL: "http://example.com/", Method: "POST", Body: "\xfe"},
		"opaque URL":                {URL: "http:example.com", Method: "POST"},
		"lower-case method":         {URL: "http://example.com/", Method: "post"},
	}
	for name, ut := range bad {
		_, err := ut.Validate()
		if !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("%s: Validate = %v, want ErrInvalidArgument", name, err)
		}
	}
}

// A queue's dispatch timeout is bounded by what the dispatcher accepts.
func TestQueueDispatchTimeoutBound(t *testing.T) {
	q := &Queue{Name: "q", Mode: ModeRealTime, DispatchTimeoutMS: MaxRequestTimeout.Milliseconds() + 1}
	if err := q.WithDefaults().Validate(); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("dispatch_timeout_ms above %v: %v", MaxRequestTimeout, err)
	}
	q.DispatchTimeoutMS = MaxRequestTimeout.Milliseconds()
	if err := q.Validate(); err != nil {
		t.Errorf("dispatch_timeout_ms at the maximum: %v", err)
	}
}

// options.group is refused with a message saying why, on both kinds of
// task: htq serve runs no aggregator.
func TestGroupRefused(t *testing.T) {
	for _, spec := range []TaskSpec{
		{Type: "t", Options: &TaskOptions{Group: "g"}},
		{URL: "http://example.com/", Options: &TaskOptions{Group: "g"}},
	} {
		q := New("q", spec.Mode(), time.Now())
		_, _, err := Build(&spec, q, nil)
		if !errors.Is(err, base.ErrInvalidArgument) || !strings.Contains(err.Error(), "Go-library feature") {
			t.Errorf("%+v: Build = %v", spec, err)
		}
	}
}

// A URL task's callbacks are checked like its URL, each error naming its
// option; a typed task takes none, and a callback's own task has none.
func TestCallbackOptions(t *testing.T) {
	q := New("hooks", ModeRealTime, time.Now())
	spec := &TaskSpec{URL: "http://example.com/", Options: &TaskOptions{Callback: "https://example.com/ok", FailureCallback: "http://example.com/ko"}}
	task, _, err := Build(spec, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The stored task carries them.
	if ut, err := DecodeURLTask(task.Payload()); err != nil || ut.Callback != "https://example.com/ok" || ut.FailureCallback != "http://example.com/ko" {
		t.Errorf("built %+v, %v", ut, err)
	}
	for name, tc := range map[string]struct {
		spec  *TaskSpec
		field string
	}{
		"ftp callback":       {&TaskSpec{URL: "http://example.com/", Options: &TaskOptions{Callback: "ftp://example.com/"}}, "options.callback"},
		"no host":            {&TaskSpec{URL: "http://example.com/", Options: &TaskOptions{FailureCallback: "http:///x"}}, "options.failure_callback"},
		"user information":   {&TaskSpec{URL: "http://example.com/", Options: &TaskOptions{Callback: "http://a:b@example.com/"}}, "options.callback"},
		"bad port":           {&TaskSpec{URL: "http://example.com/", Options: &TaskOptions{FailureCallback: "http://example.com:0/"}}, "options.failure_callback"},
		"typed task":         {&TaskSpec{Type: "t", Options: &TaskOptions{Callback: "http://example.com/"}}, "options.callback"},
		"typed task failure": {&TaskSpec{Type: "t", Options: &TaskOptions{FailureCallback: "http://example.com/"}}, "options.failure_callback"},
	} {
		qq := q
		if tc.spec.Type != "" {
			qq = New("jobs", ModePull, time.Now())
		}
		_, _, err := Build(tc.spec, qq, nil)
		if !errors.Is(err, base.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want ErrInvalidArgument naming %s", name, err, tc.field)
		}
	}
	cb := URLTask{URL: "http://example.com/", Method: "POST", Callback: "http://example.com/", CallbackOf: &CallbackOf{TaskID: "t", Kind: CallbackSuccess}}
	if _, err := cb.Validate(); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("a callback's task with a callback: %v", err)
	}
}
