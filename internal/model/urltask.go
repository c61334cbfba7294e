package model

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq/internal/base"
)

// MaxRequestTimeout is the longest request timeout a URL task may have
// (its timeout_ms, or its queue's dispatch_timeout_ms): the URL worker's
// dispatcher is configured with it as its maximum and would archive a task
// that asked for more, so the API refuses one at enqueue.
const MaxRequestTimeout = 30 * time.Minute

// TypeURL is the htq task type of a URL task: its payload is a URLTask in
// JSON, and the service's dispatcher makes the request it describes.
const TypeURL = "htq:url"

// URLTask is the payload of a URL task: the HTTP request htq makes for it.
type URLTask struct {
	// URL is the target, http or https.
	URL string `json:"url"`
	// Method is the request's method (upper case; default POST through
	// the native API, GET through HTQ's addTask).
	Method string `json:"method"`
	// Headers are the request's own headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is the request body as text; BodyBase64 as base64 for bodies
	// that are not UTF-8 text. At most one is set.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
	// TimeoutMS bounds one request (0: the queue's dispatch timeout; see
	// RequestTimeout).
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Variable is set on the tasks of variable queues: the task repeats.
	Variable *Variable `json:"variable,omitempty"`
	// Callback and FailureCallback are the URLs htq POSTs the task's
	// outcome to (a Callback body) when it succeeds, and when it is
	// archived after its last attempt (options.callback and
	// options.failure_callback at enqueue).
	Callback        string `json:"callback,omitempty"`
	FailureCallback string `json:"failure_callback,omitempty"`
	// CallbackOf is set on the task that makes a callback's request: it
	// names the task whose outcome the request reports.
	CallbackOf *CallbackOf `json:"callback_of,omitempty"`
	// ProcessAt is when the task was due, for a task that waited (a
	// delay or process_at at enqueue, the next run of a variable task):
	// the dispatcher measures how late it started from it
	// (htq_dispatch_lateness_seconds). API views leave it out (see
	// WithoutProcessAt).
	ProcessAt *time.Time `json:"process_at,omitempty"`
}

// DerivedID is the ID of a task made on behalf of task id: id followed by
// suffix, or, when that would be longer than the limit, a hash of id
// followed by suffix.
func DerivedID(id, suffix string) string {
	if len(id)+len(suffix) <= base.MaxIDLen {
		return id + suffix
	}
	sum := sha256.Sum256([]byte(id))
	return "v" + hex.EncodeToString(sum[:16]) + suffix
}

// CallbackTaskID is the ID of the task that makes task id's callback of
// kind (CallbackSuccess or CallbackFailure): "<id>~callback" or
// "<id>~failure_callback" (see DerivedID for long IDs).
func CallbackTaskID(id, kind string) string { return DerivedID(id, "~"+kind) }

// CallbackOf names the task a callback reports on.
type CallbackOf struct {
	// TaskID is the ID of the task whose outcome the callback reports.
	TaskID string `json:"task_id"`
	// Kind is CallbackSuccess or CallbackFailure.
	Kind string `json:"kind"`
}

// The kinds of callback: the field of the options that named its URL.
const (
	CallbackSuccess = "callback"
	CallbackFailure = "failure_callback"
)

// Variable is the repeating state of a task of a variable queue.
type Variable struct {
	// IntervalS is the interval that preceded the current run, in
	// seconds (0 before the first repeat), as dispatch.NextInterval
	// takes it.
	IntervalS float64 `json:"interval_s"`
}

// RequestTimeout is the timeout of the task's request: its own
// timeout_ms, else its queue's dispatch_timeout_ms, else htq serve's
// (d.DispatchTimeout), else DefaultDispatchTimeout.
func (t *URLTask) RequestTimeout(q *Queue, d Defaults) time.Duration {
	switch {
	case t.TimeoutMS > 0:
		return time.Duration(t.TimeoutMS) * time.Millisecond
	case q != nil && q.DispatchTimeoutMS > 0:
		// A record written before the bound existed may ask for more
		// than the dispatcher takes.
		return min(q.DispatchTimeout(), MaxRequestTimeout)
	case d.DispatchTimeout > 0:
		return d.DispatchTimeout
	}
	return DefaultDispatchTimeout
}

// AttemptTimeout is what bounds one attempt of the task: the shorter of
// its request timeout and attempt, the task's htq timeout (its timeout
// option, htq.DefaultTimeout when it has none; 0: none).
func (t *URLTask) AttemptTimeout(attempt time.Duration, q *Queue, d Defaults) time.Duration {
	req := t.RequestTimeout(q, d)
	if attempt > 0 && attempt < req {
		return attempt
	}
	return req
}

// UnmarshalJSON reads the variable object, or [] for an empty one,
// refusing unknown fields.
func (v *Variable) UnmarshalJSON(b []byte) error { return v.unmarshal(b, variableKeys) }

// unmarshal is UnmarshalJSON with the keys decodeStrict's fast path
// knows (nil: none).
func (v *Variable) unmarshal(b []byte, known map[string]bool) error {
	if IsEmptyArray(b) {
		*v = Variable{}
		return nil
	}
	type plain Variable
	return decodeStrict("variable", b, (*plain)(v), known)
}

// variableKeys are the JSON keys of Variable's fields.
var variableKeys = fieldKeys(reflect.TypeFor[Variable]())

// BodyBytes returns the request body.
func (t *URLTask) BodyBytes() ([]byte, error) {
	if t.BodyBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(t.BodyBase64)
		if err != nil {
			return nil, fmt.Errorf("%w: body_base64: %v", base.ErrInvalidArgument, err)
		}
		return b, nil
	}
	return []byte(t.Body), nil
}

// Methods a URL task may use.
var urlMethods = map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "OPTIONS": true}

// reservedHeaders are set by htq or by HTTP itself, never by a task.
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"keep-alive": true, "te": true, "trailer": true, "upgrade": true, "proxy-connection": true,
	"webhook-id": true, "webhook-timestamp": true, "webhook-signature": true,
	"proxy-authorization": true, "expect": true,
}

// Validate checks the request a URL task describes (without resolving
// its host) by every rule the dispatcher applies before it sends one, so
// that a task accepted at enqueue is never archived unsent for its form:
// an absolute http or https URL with a host, a port from 1 to 65535 if
// any and no user information, a known method, well-formed headers (no
// control character but tab in a value) that htq and HTTP do not set
// themselves, one body field at most, a timeout from 0 to
// MaxRequestTimeout, and text that is valid UTF-8 (the task is stored as
// JSON). Errors wrap base.ErrInvalidArgument.
func (t *URLTask) Validate() (*url.URL, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: URL task: "+format, append([]any{base.ErrInvalidArgument}, args...)...)
	}
	u, err := CheckTargetURL("url", t.URL)
	if err != nil {
		return nil, err
	}
	if !urlMethods[t.Method] {
		return nil, bad("method %q: want GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS", t.Method)
	}
	for _, cb := range []struct{ field, url string }{
		{"options." + CallbackSuccess, t.Callback}, {"options." + CallbackFailure, t.FailureCallback}} {
		if cb.url == "" {
			continue
		}
		if t.CallbackOf != nil {
			return nil, bad("%s: a callback's own request has no callbacks", cb.field)
		}
		if _, err := CheckTargetURL(cb.field, cb.url); err != nil {
			return nil, err
		}
	}
	for name, value := range t.Headers {
		if !validHeaderName(name) {
			return nil, bad("header name %q is not a valid HTTP token", name)
		}
		lower := strings.ToLower(name)
		if reservedHeaders[lower] || strings.HasPrefix(lower, "htq-") {
			return nil, bad("header %q is set by htq or by HTTP, not by a task", name)
		}
		if !validHeaderValue(value) {
			return nil, bad("header %q: the value holds a control character (only tab is allowed) or is not valid UTF-8", name)
		}
	}
	if t.Body != "" && t.BodyBase64 != "" {
		return nil, bad("set body or body_base64, not both")
	}
	if !utf8.ValidString(t.Body) {
		return nil, bad("body is not valid UTF-8; send it as body_base64")
	}
	if _, err := t.BodyBytes(); err != nil {
		return nil, err
	}
	if t.TimeoutMS < 0 || t.TimeoutMS > MaxRequestTimeout.Milliseconds() {
		return nil, bad("timeout_ms %d is out of range [0, %d]", t.TimeoutMS, MaxRequestTimeout.Milliseconds())
	}
	return u, nil
}

// CheckTargetURL checks the syntax of a URL htq will send requests to,
// given as field: an absolute http or https URL with a host, a port from
// 1 to 65535 if any and no user information, valid UTF-8 and one that
// net/http takes. Errors wrap base.ErrInvalidArgument and name the field.
func CheckTargetURL(field, raw string) (*url.URL, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: URL task: %s "+format, append([]any{base.ErrInvalidArgument, field}, args...)...)
	}
	if raw == "" {
		return nil, bad("is empty")
	}
	if !utf8.ValidString(raw) {
		return nil, bad("%q is not valid UTF-8", raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad("%q: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, bad("%q: the scheme must be http or https", raw)
	}
	if u.Opaque != "" || u.Host == "" || u.Hostname() == "" {
		return nil, bad("%q has no host", raw)
	}
	if u.User != nil {
		return nil, bad("%q: user information is not allowed (send credentials in a header)", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, bad("%q: port %q is not a number from 1 to 65535", raw, p)
		}
	}
	// The dispatcher makes its request from u.String(), which
	// http.NewRequest parses again (its method is known valid): that text
	// must parse too. It does when it is the URL as written, parsed above.
	if s := u.String(); s != raw {
		if _, err := url.Parse(s); err != nil {
			return nil, bad("%q: %v", raw, err)
		}
	}
	return u, nil
}

// validHeaderValue reports whether s is valid UTF-8 without a control
// character other than tab.
func validHeaderValue(s string) bool {
	for _, c := range []byte(s) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return utf8.ValidString(s)
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// WithoutProcessAt returns the payload of a URL task without its due time,
// as the API shows it; a payload that does not decode is returned as it is.
func WithoutProcessAt(payload []byte) []byte {
	t, err := DecodeURLTask(payload)
	if err != nil || t.ProcessAt == nil {
		return payload
	}
	t.ProcessAt = nil
	out, err := t.Encode()
	if err != nil {
		return payload
	}
	return out
}

// DecodeURLTask reads the payload of a URL task.
func DecodeURLTask(payload []byte) (*URLTask, error) {
	var t URLTask
	if err := json.Unmarshal(payload, &t); err != nil {
		return nil, fmt.Errorf("%w: URL task payload: %v", base.ErrInvalidArgument, err)
	}
	return &t, nil
}
