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
		_, _, _, err := Build(&spec, q)
		if !errors.Is(err, base.ErrInvalidArgument) || !strings.Contains(err.Error(), "Go-library feature") {
			t.Errorf("%+v: Build = %v", spec, err)
		}
	}
}
