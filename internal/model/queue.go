// Package model is htq serve's model: queue records, URL tasks, task specs
// and how a task is built from one, queue definition (Registry), and
// persisted schedules.
//
// A queue's record holds its mode (pull, or one of the URL modes
// real_time, timing, variable) and the policies the service applies to it
// (variable-queue stepping, retry policy, dispatch timeout). It is JSON
// kept through broker.MetaStore under "queue/<name>", so every htq serve
// process sharing the storage sees the same model.
//
// Limits that every server must obey at fetch time (max concurrency, rate
// limit, lease length) are not kept here: they are the storage's queue
// settings (htq.Inspector.SetQueueSettings). DefaultMaxConcurrency says
// what a new queue of each mode gets.
package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// KeyPrefix starts the MetaStore key of every queue record.
const KeyPrefix = "queue/"

// Key returns the MetaStore key of queue name.
func Key(name string) string { return KeyPrefix + name }

// Mode says who runs a queue's tasks.
type Mode string

// The queue modes.
const (
	// ModePull queues hold typed tasks fetched by Go Servers or by pull
	// workers over HTTP.
	ModePull Mode = "pull"
	// ModeRealTime queues hold URL tasks run as soon as they are due, one
	// at a time by default (as HTQ ran them).
	ModeRealTime Mode = "real_time"
	// ModeTiming queues hold URL tasks that carry a time and start at it.
	ModeTiming Mode = "timing"
	// ModeVariable queues hold URL tasks that repeat, each run setting the
	// interval to the next (HTQ's variable queue).
	ModeVariable Mode = "variable"
)

// Modes lists every mode, pull first.
var Modes = []Mode{ModePull, ModeRealTime, ModeTiming, ModeVariable}

// IsURL reports whether the mode's tasks are URL tasks run by the
// service's dispatcher.
func (m Mode) IsURL() bool { return m == ModeRealTime || m == ModeTiming || m == ModeVariable }

// Valid reports whether m is one of the modes.
func (m Mode) Valid() bool { return m == ModePull || m.IsURL() }

// ParseMode returns the mode named s, or an ErrInvalidArgument error.
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if !m.Valid() {
		return "", fmt.Errorf("%w: unknown queue mode %q (want pull, real_time, timing or variable)", base.ErrInvalidArgument, s)
	}
	return m, nil
}

// Errors of the queue model. Test them with errors.Is.
var (
	// ErrModeMismatch means a task of one kind was sent to a queue of the
	// other (a URL task into a pull queue, a typed task into a URL queue),
	// or a queue was asked to change its mode. Nothing was written.
	ErrModeMismatch = errors.New("htq: queue mode mismatch")
	// ErrQueueExists means a create found the queue already defined.
	ErrQueueExists = errors.New("htq: queue already exists")
)

// Defaults the model applies to fields left zero (see Queue.WithDefaults).
const (
	// DefaultSteppingTime is a variable queue's stepping time.
	DefaultSteppingTime = 60
	// DefaultMaxInterval is a variable queue's longest interval, in
	// seconds (raised to the stepping time when that is longer).
	DefaultMaxInterval = 3600
	// DefaultMinBackoff and DefaultMaxBackoff bound the delay before a
	// failed URL task is tried again (exponential between them).
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = time.Hour
	// DefaultDispatchTimeout bounds one request of a URL task when
	// neither the task, its queue nor htq serve's --dispatch-timeout
	// says (see URLTask.RequestTimeout).
	DefaultDispatchTimeout = 30 * time.Second
)

// Bounds on the policies, so a typo cannot park a task for centuries.
const (
	// MaxSteppingTime and MaxIntervalLimit are in seconds (30 days).
	MaxSteppingTime  = 30 * 24 * 3600
	MaxIntervalLimit = 30 * 24 * 3600
	// MaxAttemptsLimit bounds MaxAttempts.
	MaxAttemptsLimit = 10000
	// MaxBackoffLimit bounds MaxBackoffMS.
	MaxBackoffLimit = 30 * 24 * time.Hour
	// MaxDispatchTimeout bounds a queue's DispatchTimeoutMS and htq
	// serve's --dispatch-timeout: a request may not take longer than the
	// dispatcher allows (MaxRequestTimeout).
	MaxDispatchTimeout = MaxRequestTimeout
	// MaxCompletedRetention bounds CompletedRetentionS and htq serve's
	// --completed-retention.
	MaxCompletedRetention = 366 * 24 * time.Hour
)

// KeepNoCompleted is the CompletedRetentionS of a queue whose completed
// tasks are not kept (unless a task sets its own retention).
const KeepNoCompleted = -1

// Defaults are the policies htq serve applies where neither a task nor
// its queue's record sets one: its settings --completed-retention and
// --dispatch-timeout.
type Defaults struct {
	// CompletedRetention is how long a completed task is kept, with its
	// result, when neither the task nor its queue says (0: not kept).
	CompletedRetention time.Duration
	// DispatchTimeout bounds one request of a URL task when neither the
	// task nor its queue says (0: DefaultDispatchTimeout).
	DispatchTimeout time.Duration
}

// Queue is one queue's record. Durations are whole seconds (_s) or
// milliseconds (_ms) so the JSON reads the same from every language.
type Queue struct {
	// Name is the queue's name (base.ValidateQueueName).
	Name string `json:"name"`
	// Mode is fixed when the queue is created.
	Mode Mode `json:"mode"`
	// SteppingTimeS and MaxIntervalS drive a variable queue: after a run,
	// the next waits one more stepping time, up to MaxIntervalS (see
	// dispatch.NextInterval). Zero for the other modes.
	SteppingTimeS int `json:"stepping_time_s,omitempty"`
	MaxIntervalS  int `json:"max_interval_s,omitempty"`
	// MaxAttempts bounds the attempts of the queue's URL tasks that did
	// not set max_retry themselves (0: htq's default, DefaultMaxRetry+1).
	MaxAttempts int `json:"max_attempts,omitempty"`
	// MinBackoffMS and MaxBackoffMS bound the delay before a failed URL
	// task is tried again.
	MinBackoffMS int64 `json:"min_backoff_ms,omitempty"`
	MaxBackoffMS int64 `json:"max_backoff_ms,omitempty"`
	// DispatchTimeoutMS bounds one request of a URL task that sets no
	// timeout of its own (0: htq serve's, Defaults.DispatchTimeout).
	DispatchTimeoutMS int64 `json:"dispatch_timeout_ms,omitempty"`
	// Retry4xx retries a URL task whose target answered a 4xx other than
	// 429 (by default such a task is archived at once).
	Retry4xx bool `json:"retry_4xx"`
	// CompletedRetentionS is how long, in seconds, a completed task of the
	// queue is kept with its result when the task sets no retention of
	// its own: 0 leaves it to htq serve (Defaults.CompletedRetention),
	// KeepNoCompleted (-1) keeps none. Any mode.
	CompletedRetentionS int64 `json:"completed_retention_s,omitempty"`
	// CreatedAt is when the queue was defined.
	CreatedAt time.Time `json:"created_at"`
}

// New returns a queue record of the given mode with every default.
func New(name string, mode Mode, now time.Time) *Queue {
	q := &Queue{Name: name, Mode: mode, CreatedAt: now.UTC()}
	q.WithDefaults()
	return q
}

// WithDefaults fills the fields left zero with their defaults for the
// queue's mode and returns q. Fields that do not apply to the mode are
// left as they are (Validate refuses them).
func (q *Queue) WithDefaults() *Queue {
	if q.Mode == ModeVariable {
		if q.SteppingTimeS == 0 {
			q.SteppingTimeS = DefaultSteppingTime
		}
		if q.MaxIntervalS == 0 {
			q.MaxIntervalS = max(DefaultMaxInterval, q.SteppingTimeS)
		}
	}
	if q.Mode.IsURL() {
		if q.MinBackoffMS == 0 {
			q.MinBackoffMS = DefaultMinBackoff.Milliseconds()
		}
		if q.MaxBackoffMS == 0 {
			q.MaxBackoffMS = max(DefaultMaxBackoff.Milliseconds(), q.MinBackoffMS)
		}
	}
	return q
}

// Validate checks a record; the error wraps base.ErrInvalidArgument and
// names the field at fault.
func (q *Queue) Validate() error {
	if err := base.ValidateQueueName(q.Name); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: queue %s: "+format, append([]any{base.ErrInvalidArgument, q.Name}, args...)...)
	}
	if !q.Mode.Valid() {
		return bad("unknown mode %q (want pull, real_time, timing or variable)", q.Mode)
	}
	if q.Mode == ModeVariable {
		if q.SteppingTimeS < 1 || q.SteppingTimeS > MaxSteppingTime {
			return bad("stepping_time_s %d is out of range [1, %d]", q.SteppingTimeS, MaxSteppingTime)
		}
		if q.MaxIntervalS < q.SteppingTimeS || q.MaxIntervalS > MaxIntervalLimit {
			return bad("max_interval_s %d must be between stepping_time_s (%d) and %d", q.MaxIntervalS, q.SteppingTimeS, MaxIntervalLimit)
		}
	} else if q.SteppingTimeS != 0 || q.MaxIntervalS != 0 {
		return bad("stepping_time_s and max_interval_s apply to variable queues only, not %s", q.Mode)
	}
	if q.CompletedRetentionS < KeepNoCompleted || q.CompletedRetentionS > int64(MaxCompletedRetention/time.Second) {
		return bad("completed_retention_s %d is out of range: want -1 (keep none), 0 (the service's default) or up to %d seconds", q.CompletedRetentionS, int64(MaxCompletedRetention/time.Second))
	}
	if q.Mode == ModePull {
		if q.MaxAttempts != 0 || q.MinBackoffMS != 0 || q.MaxBackoffMS != 0 || q.DispatchTimeoutMS != 0 || q.Retry4xx {
			return bad("max_attempts, min_backoff_ms, max_backoff_ms, dispatch_timeout_ms and retry_4xx apply to URL queues only (a pull worker decides its own retries through max_retry)")
		}
		return nil
	}
	if q.MaxAttempts < 0 || q.MaxAttempts > MaxAttemptsLimit {
		return bad("max_attempts %d is out of range [0, %d]", q.MaxAttempts, MaxAttemptsLimit)
	}
	if q.MinBackoffMS < 0 || q.MaxBackoffMS < 0 || q.MaxBackoffMS > MaxBackoffLimit.Milliseconds() {
		return bad("backoffs must be between 0 and %d ms", MaxBackoffLimit.Milliseconds())
	}
	if q.MaxBackoffMS != 0 && q.MinBackoffMS > q.MaxBackoffMS {
		return bad("min_backoff_ms %d is more than max_backoff_ms %d", q.MinBackoffMS, q.MaxBackoffMS)
	}
	if q.DispatchTimeoutMS < 0 || q.DispatchTimeoutMS > MaxDispatchTimeout.Milliseconds() {
		return bad("dispatch_timeout_ms %d is out of range [0, %d]", q.DispatchTimeoutMS, MaxDispatchTimeout.Milliseconds())
	}
	return nil
}

// MinBackoff, MaxBackoff and DispatchTimeout return the policies as
// durations (zero when unset: see URLTask.RequestTimeout for the timeout
// that applies).
func (q *Queue) MinBackoff() time.Duration { return time.Duration(q.MinBackoffMS) * time.Millisecond }

// MaxBackoff is the longest delay before a retry.
func (q *Queue) MaxBackoff() time.Duration { return time.Duration(q.MaxBackoffMS) * time.Millisecond }

// DispatchTimeout bounds one request of the queue's URL tasks.
func (q *Queue) DispatchTimeout() time.Duration {
	return time.Duration(q.DispatchTimeoutMS) * time.Millisecond
}

// CompletedRetention is how long a completed task of the queue is kept
// when the task sets no retention of its own: the queue's policy, else
// d's (0: not kept).
func (q *Queue) CompletedRetention(d Defaults) time.Duration {
	switch {
	case q.CompletedRetentionS == KeepNoCompleted:
		return 0
	case q.CompletedRetentionS > 0:
		return time.Duration(q.CompletedRetentionS) * time.Second
	}
	return max(d.CompletedRetention, 0)
}

// SteppingTime and MaxInterval return a variable queue's policy.
func (q *Queue) SteppingTime() time.Duration { return time.Duration(q.SteppingTimeS) * time.Second }

// MaxInterval is a variable queue's longest interval.
func (q *Queue) MaxInterval() time.Duration { return time.Duration(q.MaxIntervalS) * time.Second }

// MaxRetry returns the max_retry a task of the queue gets when it sets
// none itself, and false when the queue has no policy (htq's default).
func (q *Queue) MaxRetry() (int, bool) {
	if q.MaxAttempts <= 0 {
		return 0, false
	}
	return q.MaxAttempts - 1, true
}

// DefaultMaxConcurrency is the max concurrency a new queue of mode m is
// given in the storage's queue settings: 1 for real_time (HTQ ran one
// task at a time per queue), no bound (0) for the others.
func DefaultMaxConcurrency(m Mode) int {
	if m == ModeRealTime {
		return 1
	}
	return 0
}

// Get returns the record of queue name, with defaults applied. A queue
// without a record fails with an error wrapping base.ErrQueueNotFound.
func Get(ctx context.Context, ms broker.MetaStore, name string) (*Queue, error) {
	data, err := ms.GetMeta(ctx, Key(name))
	if errors.Is(err, base.ErrNotFound) {
		return nil, fmt.Errorf("model: queue %s: %w", name, base.ErrQueueNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("model: get queue %s: %w", name, err)
	}
	return decode(name, data)
}

func decode(name string, data []byte) (*Queue, error) {
	var q Queue
	if err := json.Unmarshal(data, &q); err != nil {
		return nil, fmt.Errorf("model: queue %s: corrupt record: %w", name, err)
	}
	if q.Name == "" {
		q.Name = name
	}
	return q.WithDefaults(), nil
}

func encode(q *Queue) ([]byte, error) {
	q.WithDefaults()
	if err := q.Validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(q)
	if err != nil {
		return nil, fmt.Errorf("model: encode queue %s: %w", q.Name, err)
	}
	return data, nil
}

// Put validates q (after filling its defaults) and stores it, replacing
// any earlier record. It does not check the mode against an earlier
// record: use Update for a change of policy.
func Put(ctx context.Context, ms broker.MetaStore, q *Queue) error {
	data, err := encode(q)
	if err != nil {
		return err
	}
	if err := ms.PutMeta(ctx, Key(q.Name), data); err != nil {
		return fmt.Errorf("model: put queue %s: %w", q.Name, err)
	}
	return nil
}

// Create stores q only if the queue has no record yet. When it has one,
// Create returns that record and an error wrapping ErrQueueExists.
func Create(ctx context.Context, ms broker.MetaStore, q *Queue) (*Queue, error) {
	data, err := encode(q)
	if err != nil {
		return nil, err
	}
	ok, err := ms.PutMetaIfAbsent(ctx, Key(q.Name), data)
	if err != nil {
		return nil, fmt.Errorf("model: create queue %s: %w", q.Name, err)
	}
	if ok {
		return q, nil
	}
	old, err := Get(ctx, ms, q.Name)
	if err != nil {
		return nil, err
	}
	return old, fmt.Errorf("model: create queue %s: %w", q.Name, ErrQueueExists)
}

// Ensure returns the record of queue name, creating it with mode and
// every default when there is none (the first task fixes the mode). It
// fails with ErrModeMismatch when the queue exists with another mode.
// created tells whether this call defined the queue.
func Ensure(ctx context.Context, ms broker.MetaStore, name string, mode Mode, now time.Time) (q *Queue, created bool, err error) {
	q, err = Create(ctx, ms, New(name, mode, now))
	switch {
	case err == nil:
		return q, true, nil
	case errors.Is(err, ErrQueueExists):
		if q.Mode != mode {
			return q, false, fmt.Errorf("%w: queue %s is a %s queue, not %s", ErrModeMismatch, name, q.Mode, mode)
		}
		return q, false, nil
	default:
		return nil, false, err
	}
}

// Update reads the record of queue name, applies change to it and stores
// the result. change may not alter the name, the mode or the creation
// time (ErrModeMismatch for a mode change). Two concurrent updates of one
// queue may overwrite each other; the last one wins.
func Update(ctx context.Context, ms broker.MetaStore, name string, change func(*Queue) error) (*Queue, error) {
	q, err := Get(ctx, ms, name)
	if err != nil {
		return nil, err
	}
	old := *q
	if err := change(q); err != nil {
		return nil, err
	}
	if q.Mode != old.Mode {
		return nil, fmt.Errorf("%w: queue %s is a %s queue; a queue's mode cannot change (delete and create it)", ErrModeMismatch, name, old.Mode)
	}
	q.Name, q.CreatedAt = old.Name, old.CreatedAt
	if err := Put(ctx, ms, q); err != nil {
		return nil, err
	}
	return q, nil
}

// Delete removes the record of queue name; a missing record is not an
// error.
func Delete(ctx context.Context, ms broker.MetaStore, name string) error {
	if err := ms.DeleteMeta(ctx, Key(name)); err != nil {
		return fmt.Errorf("model: delete queue %s: %w", name, err)
	}
	return nil
}

// List returns every queue record, sorted by name.
func List(ctx context.Context, ms broker.MetaStore) ([]*Queue, error) {
	recs, err := ms.ListMeta(ctx, KeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("model: list queues: %w", err)
	}
	out := make([]*Queue, 0, len(recs))
	for key, data := range recs {
		q, err := decode(strings.TrimPrefix(key, KeyPrefix), data)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
