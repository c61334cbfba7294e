package model

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
)

// TaskSpec is a task as a client sends it: a typed task (Type with Payload
// or PayloadBase64) or a URL task (URL, Method, Headers, Body or
// BodyBase64, TimeoutMS), with its options.
type TaskSpec struct {
	Type          string          `json:"type,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 string          `json:"payload_base64,omitempty"`

	URL        string    `json:"url,omitempty"`
	Method     string    `json:"method,omitempty"`
	Headers    Headers   `json:"headers,omitempty"`
	Body       *string   `json:"body,omitempty"`
	BodyBase64 string    `json:"body_base64,omitempty"`
	TimeoutMS  int64     `json:"timeout_ms,omitempty"`
	Variable   *Variable `json:"variable,omitempty"`

	Options *TaskOptions `json:"options,omitempty"`

	// Idempotent is set by the API for a request that may be repeated
	// (an Idempotency-Key): every repeat must build the same task, so a
	// URL task's due time given as a delay, which depends on the moment of
	// the request, is not written into its payload (its lateness is then
	// not measured). Never read from JSON.
	Idempotent bool `json:"-"`
}

// TaskOptions are the core options of a task (htq's Option functions).
type TaskOptions struct {
	// Delay makes the task wait (ProcessIn); ProcessAt makes it wait
	// until a time. Set one at most.
	Delay     *Duration  `json:"delay,omitempty"`
	ProcessAt *time.Time `json:"process_at,omitempty"`
	MaxRetry  *int       `json:"max_retry,omitempty"`
	Timeout   *Duration  `json:"timeout,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	// Unique is the TTL of the uniqueness lock (at least 1s).
	Unique    *Duration `json:"unique,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	Retention *Duration `json:"retention,omitempty"`
	// Priority (0 to 9, higher first) orders the queue's pending tasks
	// (htq.Priority); Key is a fair-sharing key (htq.Key). Not both.
	Priority *int   `json:"priority,omitempty"`
	Key      string `json:"key,omitempty"`
	// Group is refused (see errGroupOverHTTP); it is kept as a field so
	// that a client that sends it hears why instead of "unknown field".
	Group string `json:"group,omitempty"`
	// Callback and FailureCallback are URLs htq POSTs a URL task's
	// outcome to when it succeeds, and when it is archived after its last
	// attempt (see URLTask.Callback). Typed tasks take neither.
	Callback        string `json:"callback,omitempty"`
	FailureCallback string `json:"failure_callback,omitempty"`
}

// Headers are a URL task's request headers, a JSON object of names to
// string values. An empty JSON array reads as no headers (see
// IsEmptyArray).
type Headers map[string]string

// UnmarshalJSON reads an object of header names to strings, or [] for
// none. A value that is not a string is a type error naming the header.
func (h *Headers) UnmarshalJSON(b []byte) error {
	if IsEmptyArray(b) || isNull(b) {
		*h = nil
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(Headers, len(raw))
	for name, v := range raw {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return &json.UnmarshalTypeError{Value: jsonKind(v), Type: reflect.TypeFor[string](), Field: name}
		}
		out[name] = s
	}
	*h = out
	return nil
}

// UnmarshalJSON reads the options object, or [] for none, refusing
// unknown fields and naming the field of a bad time or duration.
func (o *TaskOptions) UnmarshalJSON(b []byte) error { return o.unmarshal(b, optionKeys) }

// unmarshal is UnmarshalJSON with the keys decodeStrict's fast path
// knows (nil: none, as FuzzDecodeStrict reads them to compare).
func (o *TaskOptions) unmarshal(b []byte, known map[string]bool) error {
	if IsEmptyArray(b) {
		*o = TaskOptions{}
		return nil
	}
	// Plain has TaskOptions' fields without this method; the times are
	// read by jsonTime, whose errors encoding/json prefixes with the
	// field's name (and Plain's, which fieldPath leaves out).
	type Plain TaskOptions
	var v struct {
		Plain
		ProcessAt *jsonTime `json:"process_at,omitempty"`
		Deadline  *jsonTime `json:"deadline,omitempty"`
	}
	if err := decodeStrict("options", b, &v, known); err != nil {
		return err
	}
	*o = TaskOptions(v.Plain)
	o.ProcessAt, o.Deadline = (*time.Time)(v.ProcessAt), (*time.Time)(v.Deadline)
	return nil
}

// optionKeys are the JSON keys of TaskOptions' fields.
var optionKeys = fieldKeys(reflect.TypeFor[TaskOptions]())

// jsonTime is a time.Time read from RFC 3339 text whose errors are type
// errors (which encoding/json names with the field).
type jsonTime time.Time

func (t *jsonTime) UnmarshalJSON(b []byte) error {
	var tt time.Time
	if err := tt.UnmarshalJSON(b); err != nil {
		return typeError(jsonKind(b), timeType)
	}
	*t = jsonTime(tt)
	return nil
}

// errGroupOverHTTP explains why options.group is refused: htq serve runs
// no aggregator, so a grouped task would stay aggregating for ever.
const errGroupOverHTTP = "options.group: task groups are a Go-library feature (htq.Group, with a Server whose " +
	"Config.GroupAggregator combines them); htq serve runs no aggregator, so a grouped task sent over HTTP would never run"

// IsURL reports whether the spec is a URL task.
func (s *TaskSpec) IsURL() bool { return s.URL != "" }

// Mode is the queue mode a task of this kind fixes on a queue that has
// none yet.
func (s *TaskSpec) Mode() Mode {
	switch {
	case !s.IsURL():
		return ModePull
	case s.Variable != nil:
		return ModeVariable
	default:
		return ModeRealTime
	}
}

// CheckKind refuses a spec that mixes the two kinds or is neither.
func (s *TaskSpec) CheckKind() error {
	typed := s.Type != "" || len(s.Payload) > 0 || s.PayloadBase64 != ""
	url := s.URL != "" || s.Method != "" || s.Headers != nil || s.Body != nil || s.BodyBase64 != "" || s.TimeoutMS != 0 || s.Variable != nil
	switch {
	case typed && url:
		return invalid("a task is either typed (type, payload) or a URL task (url, method, headers, body), not both")
	case !typed && !url:
		return invalid("a task needs a type (typed task) or a url (URL task)")
	case url && s.URL == "":
		return invalid("URL task: url is empty")
	case typed && s.Type == "":
		return invalid("typed task: type is empty")
	case len(s.Payload) > 0 && s.PayloadBase64 != "":
		return invalid("set payload or payload_base64, not both")
	}
	return nil
}

// DueTime is when a task with these options is due, when they make it
// wait: process_at, or now plus a positive delay.
func (o *TaskOptions) DueTime() (time.Time, bool) {
	switch {
	case o == nil:
		return time.Time{}, false
	case o.ProcessAt != nil:
		return *o.ProcessAt, true
	case o.Delay != nil && *o.Delay > 0:
		return time.Now().Add(time.Duration(*o.Delay)), true
	}
	return time.Time{}, false
}

// Options converts the options (without the queue) to htq's.
func (o *TaskOptions) Options(dst []htq.Option) ([]htq.Option, error) {
	if o == nil {
		return dst, nil
	}
	if o.Delay != nil && o.ProcessAt != nil {
		return nil, invalid("options: set delay or process_at, not both")
	}
	if o.Group != "" {
		return nil, invalid(errGroupOverHTTP)
	}
	if o.Delay != nil {
		dst = append(dst, htq.ProcessIn(time.Duration(*o.Delay)))
	}
	if o.ProcessAt != nil {
		dst = append(dst, htq.ProcessAt(*o.ProcessAt))
	}
	if o.MaxRetry != nil {
		dst = append(dst, htq.MaxRetry(*o.MaxRetry))
	}
	if o.Timeout != nil {
		dst = append(dst, htq.Timeout(time.Duration(*o.Timeout)))
	}
	if o.Deadline != nil {
		dst = append(dst, htq.Deadline(*o.Deadline))
	}
	if o.Unique != nil {
		dst = append(dst, htq.Unique(time.Duration(*o.Unique)))
	}
	if o.TaskID != "" {
		dst = append(dst, htq.TaskID(o.TaskID))
	}
	if o.Retention != nil {
		dst = append(dst, htq.Retention(time.Duration(*o.Retention)))
	}
	if o.Priority != nil {
		dst = append(dst, htq.Priority(*o.Priority))
	}
	if o.Key != "" {
		dst = append(dst, htq.Key(o.Key))
	}
	return dst, nil
}

// Duration is a JSON duration: a Go duration string ("1m30s", "250ms") or
// a number of seconds (90, 0.25).
type Duration time.Duration

// UnmarshalJSON reads a duration string or a number of seconds. A bad one
// is a type error, which encoding/json names with the field.
func (d *Duration) UnmarshalJSON(b []byte) error { return d.unmarshal(b, true) }

// unmarshal is UnmarshalJSON; direct reads a plain string or a number
// without a decoder (false: every value through json.Unmarshal, as
// FuzzDuration reads them to compare).
func (d *Duration) unmarshal(b []byte, direct bool) error {
	if len(b) > 0 && b[0] == '"' {
		s, ok := plainString(b)
		if !ok || !direct {
			if err := json.Unmarshal(b, &s); err != nil {
				return err
			}
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return typeError(jsonKind(b), durationType)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	var err error
	if direct && isNumber(b) {
		// What json.Unmarshal does with a number, without a decoder.
		secs, err = strconv.ParseFloat(string(b), 64)
	} else {
		err = json.Unmarshal(b, &secs)
	}
	if err != nil || math.IsNaN(secs) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
		return typeError(jsonKind(b), durationType)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Build turns a spec into an htq task with its options (the queue
// option not included), checked against the queue's record. A URL task's
// target and callbacks, once known well formed, are checked with
// checkTarget when it is not nil (see checkTargets), before the task is
// encoded, so that a refused one costs little.
func Build(s *TaskSpec, q *Queue, checkTarget func(*url.URL) error) (*htq.Task, []htq.Option, error) {
	if err := s.CheckKind(); err != nil {
		return nil, nil, err
	}
	opts, err := s.Options.Options(nil)
	if err != nil {
		return nil, nil, err
	}
	if !s.IsURL() {
		if q.Mode != ModePull {
			return nil, nil, fmt.Errorf("%w: queue %s is a %s queue: it takes URL tasks, not typed tasks", ErrModeMismatch, q.Name, q.Mode)
		}
		payload := []byte(s.Payload)
		if !utf8.Valid(payload) {
			// A JSON payload is stored as its text and answered as JSON;
			// it must be UTF-8 to stay valid JSON.
			return nil, nil, invalid("payload: not valid UTF-8 (a JSON string in it holds bytes that are not UTF-8); send binary data as payload_base64")
		}
		if s.PayloadBase64 != "" {
			if payload, err = base64.StdEncoding.DecodeString(s.PayloadBase64); err != nil {
				return nil, nil, invalid("payload_base64: " + err.Error())
			}
		}
		if o := s.Options; o != nil && (o.Callback != "" || o.FailureCallback != "") {
			return nil, nil, invalid("options.callback and options.failure_callback apply to URL tasks, whose outcome htq knows; " +
				"a pull worker reports its own task's outcome")
		}
		return htq.NewTask(s.Type, payload), opts, nil
	}
	if !q.Mode.IsURL() {
		return nil, nil, fmt.Errorf("%w: queue %s is a pull queue: it takes typed tasks, not URL tasks", ErrModeMismatch, q.Name)
	}
	ut := &URLTask{URL: s.URL, Method: strings.ToUpper(s.Method), Headers: s.Headers,
		BodyBase64: s.BodyBase64, TimeoutMS: s.TimeoutMS, Variable: s.Variable}
	if ut.Method == "" {
		ut.Method = http.MethodPost
	}
	if s.Body != nil {
		ut.Body = *s.Body
	}
	if s.Options != nil {
		ut.Callback, ut.FailureCallback = s.Options.Callback, s.Options.FailureCallback
	}
	switch {
	case q.Mode == ModeVariable && ut.Variable == nil:
		ut.Variable = &Variable{}
	case q.Mode != ModeVariable && ut.Variable != nil:
		return nil, nil, invalid(fmt.Sprintf("URL task: variable applies to tasks of variable queues; queue %s is %s", q.Name, q.Mode))
	}
	if ut.Variable != nil && (ut.Variable.IntervalS < 0 || ut.Variable.IntervalS > float64(MaxIntervalLimit)) {
		return nil, nil, invalid(fmt.Sprintf("URL task: variable.interval_s %v is out of range", ut.Variable.IntervalS))
	}
	target, err := ut.Validate()
	if err != nil {
		return nil, nil, err
	}
	if checkTarget != nil {
		if err := checkTargets(ut, target, checkTarget); err != nil {
			return nil, nil, err
		}
	}
	if n, ok := q.MaxRetry(); ok && (s.Options == nil || s.Options.MaxRetry == nil) {
		opts = append([]htq.Option{htq.MaxRetry(n)}, opts...)
	}
	if due, ok := s.Options.DueTime(); ok && (!s.Idempotent || s.Options.ProcessAt != nil) {
		due = due.UTC()
		ut.ProcessAt = &due
	}
	payload, err := ut.Encode()
	if err != nil {
		return nil, nil, err
	}
	return htq.NewTask(TypeURL, payload), opts, nil
}

// checkTargets asks check about the target of URL task ut, parsed, and
// about its callbacks'. A refused target is ErrTargetNotAllowed (a
// malformed one, whose error wraps base.ErrInvalidArgument, is that
// error); a refused callback is bad input naming its field, since the
// task itself could run.
func checkTargets(ut *URLTask, target *url.URL, check func(*url.URL) error) error {
	if err := check(target); errors.Is(err, base.ErrInvalidArgument) {
		return err // a malformed URL, not a refused target
	} else if err != nil {
		return fmt.Errorf("%w: %v", ErrTargetNotAllowed, err)
	}
	for _, cb := range []struct{ field, url string }{
		{"options." + CallbackSuccess, ut.Callback}, {"options." + CallbackFailure, ut.FailureCallback}} {
		if cb.url == "" {
			continue
		}
		u, _ := url.Parse(cb.url) // Validate parsed it already
		if err := check(u); err != nil {
			return fmt.Errorf("%w: %s: %v", base.ErrInvalidArgument, cb.field, err)
		}
	}
	return nil
}

// invalid wraps a message as an ErrInvalidArgument error whose text is the
// message alone.
func invalid(msg string) error { return &invalidError{msg: msg} }

type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return base.ErrInvalidArgument }
