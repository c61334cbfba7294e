package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
)

// ErrTargetNotAllowed means the target guard refused a URL task's target.
// Nothing was written.
var ErrTargetNotAllowed = errors.New("target not allowed")

// Registry applies the queue model to the storage: it resolves the queue a
// task goes to, builds the task against the queue's record and the target
// guard, and defines and changes queues. Both HTTP faces of htq serve (the
// native API and the HTQ-compatible one) call it; their handlers only
// decode, call and encode.
type Registry struct {
	cache       *Cache
	insp        *htq.Inspector
	checkTarget func(context.Context, *url.URL) error
	defaults    Defaults
	logger      *slog.Logger
}

// NewRegistry returns a Registry over the queue records of cache and the
// storage insp inspects. checkTarget, when not nil, vets the target of
// every URL task (dispatch.Guard.CheckURL): an error wrapping
// base.ErrInvalidArgument is a malformed URL, any other a refused target.
// defaults are htq serve's policies for what neither a task nor its queue
// sets.
func NewRegistry(cache *Cache, insp *htq.Inspector, checkTarget func(context.Context, *url.URL) error, defaults Defaults, logger *slog.Logger) *Registry {
	return &Registry{cache: cache, insp: insp, checkTarget: checkTarget, defaults: defaults, logger: logger}
}

// Defaults returns htq serve's policies the registry applies.
func (r *Registry) Defaults() Defaults { return r.defaults }

// Queues returns the cache of queue records the registry reads.
func (r *Registry) Queues() *Cache { return r.cache }

// Build turns a spec into an htq task with its options (the queue option
// not included), checked against the queue's record and, for a URL task,
// the target guard. A task that sets no retention gets its queue's
// completed retention (Queue.CompletedRetention), so that the result a
// worker sends, or a URL task's answer, can be read after it completes.
func (r *Registry) Build(ctx context.Context, s *TaskSpec, q *Queue) (*htq.Task, []htq.Option, error) {
	var check func(*url.URL) error
	if r.checkTarget != nil && s.IsURL() {
		check = func(target *url.URL) error { return r.checkTarget(ctx, target) }
	}
	task, opts, err := Build(s, q, check)
	if err != nil {
		return nil, nil, err
	}
	if s.Options == nil || s.Options.Retention == nil {
		if d := q.CompletedRetention(r.defaults); d > 0 {
			opts = append(opts, htq.Retention(d))
		}
	}
	return task, opts, nil
}

// ScheduleOptions returns the options a schedule of task s into queue q
// keeps: the task's own, with what Build adds where the task sets none
// (the queue's max_attempts for a URL task, the completed retention).
// They are fixed when the schedule is created, since the schedule's ID
// depends on them (model.Schedule).
func (r *Registry) ScheduleOptions(s *TaskSpec, q *Queue) TaskOptions {
	var o TaskOptions
	if s.Options != nil {
		o = *s.Options
	}
	if n, ok := q.MaxRetry(); ok && o.MaxRetry == nil && s.IsURL() {
		o.MaxRetry = &n
	}
	if d := q.CompletedRetention(r.defaults); d > 0 && o.Retention == nil {
		rd := Duration(d)
		o.Retention = &rd
	}
	return o
}

// Resolve returns the record of the queue a task of mode's kind goes to. A
// queue without a record gets a provisional one of that mode, and isNew is
// true: the caller checks its tasks against it and then defines the queue
// with Define, so a refused task leaves no queue behind.
func (r *Registry) Resolve(ctx context.Context, name string, mode Mode) (q *Queue, isNew bool, err error) {
	if err := base.ValidateQueueName(name); err != nil {
		return nil, false, err
	}
	q, err = r.cache.Get(ctx, name)
	switch {
	case err == nil:
		return q, false, nil
	case errors.Is(err, base.ErrQueueNotFound):
		return New(name, mode, time.Now()), true, nil
	default:
		return nil, false, err
	}
}

// Prepare resolves the queue of a task, builds the task and, when the
// queue had no record, defines it. The caller enqueues the task after.
func (r *Registry) Prepare(ctx context.Context, name string, spec *TaskSpec) (*htq.Task, []htq.Option, *Queue, error) {
	q, isNew, err := r.Resolve(ctx, name, spec.Mode())
	if err != nil {
		return nil, nil, nil, err
	}
	task, opts, err := r.Build(ctx, spec, q)
	if err != nil {
		return nil, nil, nil, err
	}
	if isNew {
		if q, err = r.Define(ctx, q, nil, DefineFirstTask); err != nil {
			return nil, nil, nil, err
		}
	}
	return task, opts, q, nil
}

// Known reports whether a queue exists: it has a record or the storage
// knows it.
func (r *Registry) Known(ctx context.Context, name string) (bool, error) {
	if _, err := r.cache.Get(ctx, name); err == nil {
		return true, nil
	} else if !errors.Is(err, base.ErrQueueNotFound) {
		return false, err
	}
	_, err := r.insp.GetQueueInfo(name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, base.ErrQueueNotFound):
		return false, nil
	default:
		return false, err
	}
}

// How Define treats a queue that already has a record.
const (
	// DefineFirstTask: the queue is defined by its first task; a record
	// of the same mode (another first task won the race) is used, one of
	// another mode is ErrModeMismatch.
	DefineFirstTask = false
	// DefineExplicit: an operator's create; any record is ErrQueueExists.
	DefineExplicit = true
)

// Define stores the record of queue q, which had none when the caller
// looked, with its storage settings (the mode's defaults, then change's) and
// pause state. It returns the record in force: q, or for a first task the
// record another caller stored meanwhile.
//
// The order is what keeps every acknowledged task: a task is stored only
// after its queue's record exists (the caller enqueues after this
// returns), and a record, once stored, is never removed here on error,
// since another caller may already have stored tasks against it. So
//  1. a URL mode is refused (nothing written) for a queue that holds tasks
//     but has no record: those are typed tasks of Go clients;
//  2. the storage settings and pause state are written before the record,
//     so that no task of the queue runs under the wrong settings (a first
//     task writes them only while the queue has none, so settings an
//     operator gave are kept);
//  3. the record is created if absent, in one atomic storage operation
//     (broker.MetaStore.PutMetaIfAbsent).
//
// Two callers defining one queue with different modes at the same instant
// may leave the winner with the loser's default settings (max concurrency
// 1 of real_time); the loser gets ErrModeMismatch and an operator fixes
// the settings (PATCH /v1/queues/{queue}).
func (r *Registry) Define(ctx context.Context, q *Queue, change *QueueChange, explicit bool) (*Queue, error) {
	info, err := r.insp.GetQueueInfo(q.Name)
	switch {
	case errors.Is(err, base.ErrQueueNotFound):
		info = nil
	case err != nil:
		return nil, err
	}
	if q.Mode.IsURL() && info != nil && info.Size > 0 {
		// Either typed tasks of Go clients, or tasks of a caller that has
		// defined the queue since ours looked: read the record again.
		if cur, err := Get(ctx, r.cache.Store(), q.Name); err == nil {
			if explicit {
				return nil, fmt.Errorf("queue %s: %w", q.Name, ErrQueueExists)
			}
			return sameMode(cur, q.Mode)
		} else if !errors.Is(err, base.ErrQueueNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: queue %s already holds %d typed tasks; it cannot become a %s queue", ErrModeMismatch, q.Name, info.Size, q.Mode)
	}
	s := htq.QueueSettings{MaxConcurrency: DefaultMaxConcurrency(q.Mode)}
	if change != nil {
		if err := change.ApplySettings(&s); err != nil {
			return nil, err
		}
	}
	configured := info != nil && info.Settings != (htq.QueueSettings{})
	if (explicit || !configured) && (s != (htq.QueueSettings{}) || q.Mode.IsURL()) {
		if err := r.insp.SetQueueSettings(q.Name, s); err != nil {
			return nil, err
		}
	}
	if change != nil && change.Paused != nil && *change.Paused {
		if err := r.insp.PauseQueue(q.Name); err != nil {
			return nil, err
		}
	}
	got, err := r.cache.Create(ctx, q)
	switch {
	case err == nil:
		return got, nil
	case errors.Is(err, ErrQueueExists) && !explicit:
		return sameMode(got, q.Mode)
	default:
		return nil, err
	}
}

// sameMode returns cur when its mode is mode, and ErrModeMismatch when not.
func sameMode(cur *Queue, mode Mode) (*Queue, error) {
	if cur.Mode != mode {
		return nil, fmt.Errorf("%w: queue %s is a %s queue, not %s", ErrModeMismatch, cur.Name, cur.Mode, mode)
	}
	return cur, nil
}

// ChangeMode replaces the record of queue cur by one of mode, with that
// mode's defaults and change's policies. This is how an
// operator repairs a queue whose mode is wrong (for example one whose URL
// tasks a pull record keeps from the dispatcher): the tasks stay, and
// from now on the new mode's runner serves them. Policies of the old mode
// that the new one does not take are dropped.
func (r *Registry) ChangeMode(ctx context.Context, cur *Queue, mode Mode, change *QueueChange) (*Queue, error) {
	if !mode.Valid() {
		return nil, invalid(fmt.Sprintf("mode %q: want pull, real_time, timing or variable", mode))
	}
	created := cur.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	q := New(cur.Name, mode, created)
	q.CompletedRetentionS = cur.CompletedRetentionS // every mode takes it
	change.ApplyPolicy(q)
	if err := q.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	if err := r.cache.Put(ctx, q); err != nil {
		return nil, err
	}
	r.logger.Warn("queue mode changed by an operator", "queue", q.Name, "from", cur.Mode, "to", q.Mode)
	return q, nil
}

// QueueChange is what a create or an update of a queue may set, each field
// nil when not given: the queue's policies (kept in its record) and its
// storage settings and pause state (kept by the storage, enforced by every
// server). The native API reads it from JSON, the HTQ-compatible addQueue
// from form fields.
type QueueChange struct {
	SteppingTimeS       *int     `json:"stepping_time_s"`
	MaxIntervalS        *int     `json:"max_interval_s"`
	MaxAttempts         *int     `json:"max_attempts"`
	MinBackoffMS        *int64   `json:"min_backoff_ms"`
	MaxBackoffMS        *int64   `json:"max_backoff_ms"`
	DispatchTimeoutMS   *int64   `json:"dispatch_timeout_ms"`
	Retry4xx            *bool    `json:"retry_4xx"`
	CompletedRetentionS *int64   `json:"completed_retention_s"`
	MaxConcurrency      *int     `json:"max_concurrency"`
	RateLimit           *float64 `json:"rate_limit"`
	RateBurst           *int     `json:"rate_burst"`
	LeaseMS             *int64   `json:"lease_ms"`
	KeyMaxConcurrency   *int     `json:"key_max_concurrency"`
	KeyRateLimit        *float64 `json:"key_rate_limit"`
	KeyRateBurst        *int     `json:"key_rate_burst"`
	Paused              *bool    `json:"paused"`
}

// ApplyPolicy copies the change's policy fields onto q.
func (c *QueueChange) ApplyPolicy(q *Queue) {
	set := func(dst *int, src *int) {
		if src != nil {
			*dst = *src
		}
	}
	set64 := func(dst *int64, src *int64) {
		if src != nil {
			*dst = *src
		}
	}
	set(&q.SteppingTimeS, c.SteppingTimeS)
	set(&q.MaxIntervalS, c.MaxIntervalS)
	set(&q.MaxAttempts, c.MaxAttempts)
	set64(&q.MinBackoffMS, c.MinBackoffMS)
	set64(&q.MaxBackoffMS, c.MaxBackoffMS)
	set64(&q.DispatchTimeoutMS, c.DispatchTimeoutMS)
	set64(&q.CompletedRetentionS, c.CompletedRetentionS)
	if c.Retry4xx != nil {
		q.Retry4xx = *c.Retry4xx
	}
}

// HasSettings reports whether the change sets a storage setting.
func (c *QueueChange) HasSettings() bool {
	return c.MaxConcurrency != nil || c.RateLimit != nil || c.RateBurst != nil || c.LeaseMS != nil ||
		c.KeyMaxConcurrency != nil || c.KeyRateLimit != nil || c.KeyRateBurst != nil
}

// ApplySettings copies the change's settings onto s and checks them.
func (c *QueueChange) ApplySettings(s *htq.QueueSettings) error {
	if c.MaxConcurrency != nil {
		s.MaxConcurrency = *c.MaxConcurrency
	}
	if c.RateLimit != nil {
		s.RateLimit = *c.RateLimit
	}
	if c.RateBurst != nil {
		s.RateBurst = *c.RateBurst
	}
	if c.LeaseMS != nil {
		if *c.LeaseMS < 0 || *c.LeaseMS > int64(24*time.Hour/time.Millisecond) {
			return invalid(fmt.Sprintf("lease_ms %d is out of range [0, %d]", *c.LeaseMS, int64(24*time.Hour/time.Millisecond)))
		}
		s.LeaseDuration = time.Duration(*c.LeaseMS) * time.Millisecond
	}
	if s.MaxConcurrency < 0 || s.RateBurst < 0 || s.RateLimit < 0 || math.IsNaN(s.RateLimit) || math.IsInf(s.RateLimit, 0) {
		return invalid("max_concurrency, rate_limit and rate_burst must be finite and not negative")
	}
	if c.KeyMaxConcurrency != nil {
		s.KeyMaxConcurrency = *c.KeyMaxConcurrency
	}
	if c.KeyRateLimit != nil {
		s.KeyRateLimit = *c.KeyRateLimit
	}
	if c.KeyRateBurst != nil {
		s.KeyRateBurst = *c.KeyRateBurst
	}
	if s.KeyMaxConcurrency < 0 || s.KeyRateBurst < 0 || s.KeyRateLimit < 0 || math.IsNaN(s.KeyRateLimit) || math.IsInf(s.KeyRateLimit, 0) {
		return invalid("key_max_concurrency, key_rate_limit and key_rate_burst must be finite and not negative")
	}
	return nil
}

// EnqueueContext is the context in which htq serve stores a task that a
// request has asked for, once the request has been read and checked: ctx's
// values (the trace context) without its cancellation. A client that goes
// away while the task is being written no longer abandons the write
// halfway through its retries: the task is stored or refused as if the
// client had stayed, which is what it would have learned had it waited,
// and the write stays bounded by the Client's RetryFor. It also spares the
// storage call a registration under the request's context: a wait on Done
// (the embedded store's wait for its commit, a pipelined Redis call) arms
// one timer and nothing more (internal/lazydeadline).
func EnqueueContext(ctx context.Context) context.Context {
	return context.WithoutCancel(ctx)
}
