package model

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

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

	URL        string            `json:"url,omitempty"`
	Method     string            `json:"method,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Body       *string           `json:"body,omitempty"`
	BodyBase64 string            `json:"body_base64,omitempty"`
	TimeoutMS  int64             `json:"timeout_ms,omitempty"`
	Variable   *Variable         `json:"variable,omitempty"`

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
	Group     string    `json:"group,omitempty"`
}

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
	if o.Group != "" {
		dst = append(dst, htq.Group(o.Group))
	}
	return dst, nil
}

// Duration is a JSON duration: a Go duration string ("1m30s", "250ms") or
// a number of seconds (90, 0.25).
type Duration time.Duration

// UnmarshalJSON reads a duration string or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%w: duration %q: want a Go duration such as \"90s\" or a number of seconds", base.ErrInvalidArgument, s)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return fmt.Errorf("%w: duration %s: want a Go duration string or a number of seconds", base.ErrInvalidArgument, b)
	}
	if math.IsNaN(secs) || math.Abs(secs) > math.MaxInt64/float64(time.Second) {
		return fmt.Errorf("%w: duration %s is out of range", base.ErrInvalidArgument, b)
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Build turns a spec into an htq task with its options (the queue
// option not included), checked against the queue's record. For a URL
// task it also returns the URLTask it made.
func Build(s *TaskSpec, q *Queue) (*htq.Task, []htq.Option, *URLTask, error) {
	if err := s.CheckKind(); err != nil {
		return nil, nil, nil, err
	}
	opts, err := s.Options.Options(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if !s.IsURL() {
		if q.Mode != ModePull {
			return nil, nil, nil, fmt.Errorf("%w: queue %s is a %s queue: it takes URL tasks, not typed tasks", ErrModeMismatch, q.Name, q.Mode)
		}
		payload := []byte(s.Payload)
		if s.PayloadBase64 != "" {
			if payload, err = base64.StdEncoding.DecodeString(s.PayloadBase64); err != nil {
				return nil, nil, nil, invalid("payload_base64: " + err.Error())
			}
		}
		return htq.NewTask(s.Type, payload), opts, nil, nil
	}
	if !q.Mode.IsURL() {
		return nil, nil, nil, fmt.Errorf("%w: queue %s is a pull queue: it takes typed tasks, not URL tasks", ErrModeMismatch, q.Name)
	}
	ut := &URLTask{URL: s.URL, Method: strings.ToUpper(s.Method), Headers: s.Headers,
		BodyBase64: s.BodyBase64, TimeoutMS: s.TimeoutMS, Variable: s.Variable}
	if ut.Method == "" {
		ut.Method = http.MethodPost
	}
	if s.Body != nil {
		ut.Body = *s.Body
	}
	switch {
	case q.Mode == ModeVariable && ut.Variable == nil:
		ut.Variable = &Variable{}
	case q.Mode != ModeVariable && ut.Variable != nil:
		return nil, nil, nil, invalid(fmt.Sprintf("URL task: variable applies to tasks of variable queues; queue %s is %s", q.Name, q.Mode))
	}
	if ut.Variable != nil && (ut.Variable.IntervalS < 0 || ut.Variable.IntervalS > float64(MaxIntervalLimit)) {
		return nil, nil, nil, invalid(fmt.Sprintf("URL task: variable.interval_s %v is out of range", ut.Variable.IntervalS))
	}
	if _, err := ut.Validate(); err != nil {
		return nil, nil, nil, err
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
		return nil, nil, nil, err
	}
	return htq.NewTask(TypeURL, payload), opts, ut, nil
}

// invalid wraps a message as an ErrInvalidArgument error whose text is the
// message alone.
func invalid(msg string) error { return &invalidError{msg: msg} }

type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return base.ErrInvalidArgument }
