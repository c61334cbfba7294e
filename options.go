package htq

import (
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// Option configures one task at Enqueue (or as a default in NewTask).
type Option interface {
	// String describes the option, e.g. `Queue("critical")`.
	String() string
	apply(*taskOptions) error
}

// taskOptions is what the options of one Enqueue add up to.
type taskOptions struct {
	queue     string
	maxRetry  int
	timeout   time.Duration
	deadline  time.Time
	processAt time.Time
	processIn time.Duration
	uniqueTTL time.Duration
	taskID    string
	retention time.Duration
	group     string
	priority  int
	key       string

	// wf holds the options of a workflow task (workflow.go); nil when
	// none was given.
	wf *workflowOptions
}

// inWorkflow tells whether the options are those of a workflow task.
func (o *taskOptions) inWorkflow() bool { return o.wf != nil }

// Defaults applied when no option says otherwise.
const (
	// DefaultMaxRetry is the retries a task gets without MaxRetry.
	DefaultMaxRetry = 25
	// DefaultTimeout bounds an attempt of a task that has neither Timeout
	// nor Deadline.
	DefaultTimeout = 30 * time.Minute
)

// Each option is a small type of its own that holds its argument: making
// one allocates at most the argument's box, and its description is
// written only when String is called (the Scheduler does; Enqueue does
// not).

// Queue puts the task in the named queue (default "default").
func Queue(name string) Option { return queueOption(name) }

type queueOption string

func (q queueOption) String() string { return fmt.Sprintf("Queue(%q)", string(q)) }
func (q queueOption) apply(o *taskOptions) error {
	if err := base.ValidateQueueName(string(q)); err != nil {
		return err
	}
	o.queue = string(q)
	return nil
}

// MaxRetry sets how many times the task is retried after a failure before
// it is archived (default 25). 0 means no retry.
func MaxRetry(n int) Option { return maxRetryOption(n) }

type maxRetryOption int

func (n maxRetryOption) String() string { return fmt.Sprintf("MaxRetry(%d)", int(n)) }
func (n maxRetryOption) apply(o *taskOptions) error {
	if n < 0 {
		return fmt.Errorf("%w: MaxRetry(%d) is negative", base.ErrInvalidArgument, int(n))
	}
	o.maxRetry = int(n)
	return nil
}

// Timeout bounds each attempt: the handler's ctx is cancelled after d.
// 0 means no timeout (then a Deadline should be set, or DefaultTimeout applies).
func Timeout(d time.Duration) Option { return timeoutOption(d) }

type timeoutOption time.Duration

func (d timeoutOption) String() string { return fmt.Sprintf("Timeout(%v)", time.Duration(d)) }
func (d timeoutOption) apply(o *taskOptions) error {
	if d < 0 {
		return fmt.Errorf("%w: Timeout(%v) is negative", base.ErrInvalidArgument, time.Duration(d))
	}
	o.timeout = time.Duration(d)
	return nil
}

// Deadline bounds every attempt: the handler's ctx is cancelled at t. A
// Deadline in the past is refused.
func Deadline(t time.Time) Option { return deadlineOption(t) }

type deadlineOption time.Time

func (t deadlineOption) String() string {
	return fmt.Sprintf("Deadline(%v)", time.Time(t).Format(time.RFC3339Nano))
}
func (t deadlineOption) apply(o *taskOptions) error {
	if time.Time(t).IsZero() {
		return fmt.Errorf("%w: Deadline is the zero time", base.ErrInvalidArgument)
	}
	o.deadline = time.Time(t)
	return nil
}

// ProcessAt makes the task wait until t (a time in the past means now).
func ProcessAt(t time.Time) Option { return processAtOption(t) }

type processAtOption time.Time

func (t processAtOption) String() string {
	return fmt.Sprintf("ProcessAt(%v)", time.Time(t).Format(time.RFC3339Nano))
}
func (t processAtOption) apply(o *taskOptions) error {
	o.processAt = time.Time(t)
	o.processIn = 0
	return nil
}

// ProcessIn makes the task wait for d from now.
func ProcessIn(d time.Duration) Option { return processInOption(d) }

type processInOption time.Duration

func (d processInOption) String() string { return fmt.Sprintf("ProcessIn(%v)", time.Duration(d)) }
func (d processInOption) apply(o *taskOptions) error {
	if d < 0 {
		return fmt.Errorf("%w: ProcessIn(%v) is negative", base.ErrInvalidArgument, time.Duration(d))
	}
	o.processIn = time.Duration(d)
	o.processAt = time.Time{}
	return nil
}

// Unique refuses (with ErrDuplicateTask) an Enqueue of a task with the same
// type and payload into the same queue while an earlier one holds the lock:
// until it completes or is deleted, and for at most ttl (at least 1 s).
func Unique(ttl time.Duration) Option { return uniqueOption(ttl) }

type uniqueOption time.Duration

func (ttl uniqueOption) String() string { return fmt.Sprintf("Unique(%v)", time.Duration(ttl)) }
func (ttl uniqueOption) apply(o *taskOptions) error {
	if time.Duration(ttl) < time.Second {
		return fmt.Errorf("%w: Unique(%v): the TTL must be at least 1s", base.ErrInvalidArgument, time.Duration(ttl))
	}
	o.uniqueTTL = time.Duration(ttl)
	return nil
}

// TaskID gives the task this ID instead of a random one. Enqueue fails with
// ErrTaskIDConflict while the queue holds a task with the same ID.
func TaskID(id string) Option { return taskIDOption(id) }

type taskIDOption string

func (id taskIDOption) String() string { return fmt.Sprintf("TaskID(%q)", string(id)) }
func (id taskIDOption) apply(o *taskOptions) error {
	if err := base.ValidateTaskID(string(id)); err != nil {
		return err
	}
	o.taskID = string(id)
	return nil
}

// Retention keeps the task, with its result, for d after it completes
// (default 0: deleted at once).
func Retention(d time.Duration) Option { return retentionOption(d) }

type retentionOption time.Duration

func (d retentionOption) String() string { return fmt.Sprintf("Retention(%v)", time.Duration(d)) }
func (d retentionOption) apply(o *taskOptions) error {
	if d < 0 {
		return fmt.Errorf("%w: Retention(%v) is negative", base.ErrInvalidArgument, time.Duration(d))
	}
	o.retention = time.Duration(d)
	return nil
}

// Group puts the task in the group key of its queue; the server's group
// aggregator turns the group's tasks into one task.
func Group(key string) Option { return groupOption(key) }

type groupOption string

func (key groupOption) String() string { return fmt.Sprintf("Group(%q)", string(key)) }
func (key groupOption) apply(o *taskOptions) error {
	if err := base.ValidateGroupKey(string(key)); err != nil {
		return err
	}
	o.group = string(key)
	return nil
}

// MaxPriority is the highest priority a task can have (Priority).
const MaxPriority = base.MaxPriority

// Priority sets the task's priority within its queue, from 0 (the
// default) to MaxPriority: a pending task of a higher priority is fetched
// before any of a lower one, and tasks of one priority in the order they
// became pending. A task keeps its priority through retries and delays.
// A task has a Priority or a Key, not both.
func Priority(p int) Option { return priorityOption(p) }

type priorityOption int

func (p priorityOption) String() string { return fmt.Sprintf("Priority(%d)", int(p)) }
func (p priorityOption) apply(o *taskOptions) error {
	if p < 0 || p > MaxPriority {
		return fmt.Errorf("%w: Priority(%d) is outside 0 to %d", base.ErrInvalidArgument, int(p), MaxPriority)
	}
	o.priority = int(p)
	return nil
}

// Key gives the task a fair-sharing key (a tenant, a user): the queue
// serves the keys of its pending tasks in turn, so that a key with a
// million tasks does not hold up one with ten, and applies its per-key
// limits (QueueSettings.KeyMaxConcurrency, KeyRateLimit) across all
// servers. Tasks without a key take their turn as one more key. A task has
// a Priority or a Key, not both.
func Key(key string) Option { return keyOption(key) }

type keyOption string

func (key keyOption) String() string { return fmt.Sprintf("Key(%q)", string(key)) }
func (key keyOption) apply(o *taskOptions) error {
	if err := base.ValidateFairKey(string(key)); err != nil {
		return err
	}
	o.key = string(key)
	return nil
}

// composeOptions applies the task's own options, then the call's.
func composeOptions(taskOpts, callOpts []Option) (taskOptions, error) {
	var o taskOptions
	err := composeOptionsInto(&o, taskOpts, callOpts)
	return o, err
}

// composeOptionsInto is composeOptions into *o (whose earlier content is
// replaced), for a caller that has o in an allocation of its own: an
// Option's apply takes o's address, which puts a local o on the heap.
func composeOptionsInto(o *taskOptions, taskOpts, callOpts []Option) error {
	*o = taskOptions{queue: base.DefaultQueue, maxRetry: DefaultMaxRetry}
	for _, list := range [][]Option{taskOpts, callOpts} {
		for _, opt := range list {
			if opt == nil {
				return fmt.Errorf("%w: nil Option", base.ErrInvalidArgument)
			}
			if err := opt.apply(o); err != nil {
				return err
			}
		}
	}
	return nil
}
