package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/attempt"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/internal/metrics"
	"github.com/htqueue/htq/internal/model"
)

// urlResult is a URL task's Result, stored as JSON.
type urlResult struct {
	Status     int         `json:"status"`
	Headers    http.Header `json:"headers"`
	Body       string      `json:"body,omitempty"`
	BodyBase64 string      `json:"body_base64,omitempty"`
	Truncated  bool        `json:"truncated"`
	DurationMS float64     `json:"duration_ms"`
}

// queueModels is what the URL handler needs of the queue model.
type queueModels interface {
	Get(ctx context.Context, name string) (*model.Queue, error)
}

// urlHandler is the URL worker's htq.Handler: it runs one URL task through
// the dispatch package and turns the answer into the task's outcome.
type urlHandler struct {
	disp    *dispatch.Dispatcher
	queues  queueModels
	client  *htq.Client
	metrics *metrics.Metrics
	logger  *slog.Logger
	// defaults holds the request timeout of a task when neither it nor
	// its queue sets one (--dispatch-timeout), and the completed retention
	// of a callback's task (--completed-retention).
	defaults model.Defaults
}

// retryError asks the URL worker's RetryDelayFunc for a retry after delay
// (the queue's backoff, or the target's Retry-After when longer).
type retryError struct {
	delay time.Duration
	err   error
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// retryDelay is the URL worker's RetryDelayFunc: the URL handler has already
// chosen the delay, from the queue's policy and the answer.
func retryDelay(n int, err error, t *htq.Task) time.Duration {
	var re *retryError
	if errors.As(err, &re) {
		return re.delay
	}
	// A panic or an error the URL handler did not classify: the default
	// policy's first step, growing with n.
	return backoff(n, model.DefaultMinBackoff, model.DefaultMaxBackoff)
}

// backoff is min·2ⁿ capped at max, with up to 10 % added at random so
// that tasks failed together are not all retried in the same instant.
func backoff(n int, lo, hi time.Duration) time.Duration {
	if lo <= 0 {
		return 0
	}
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	if hi > 0 && d > hi {
		d = hi
	}
	if jitter := int64(d / 10); jitter > 0 {
		d += time.Duration(rand.Int64N(jitter))
	}
	return d
}

// logFailure is the URL worker's ErrorHandler: a failed attempt that will
// be retried is logged at info level with the target's status (when it
// answered) and when the next attempt is due; one that archives the task
// (a permanent failure, or the last retry) as a warning.
func (x *urlHandler) logFailure(ctx context.Context, t *htq.Task, err error) {
	id, _ := htq.GetTaskID(ctx)
	queue, _ := htq.GetQueueName(ctx)
	retried, _ := htq.GetRetryCount(ctx)
	maxRetry, _ := htq.GetMaxRetry(ctx)
	attrs := []any{"queue", queue, "id", id, "retried", retried}
	var se *dispatch.StatusError
	if errors.As(err, &se) {
		attrs = append(attrs, "status", se.Status)
	}
	if attempt.Archives(retried, maxRetry, errors.Is(err, htq.SkipRetry), isFailure(err)) {
		x.logger.Warn("URL task archived", append(attrs, "err", err)...)
		return
	}
	var re *retryError
	if errors.As(err, &re) {
		// The URL worker's RetryDelayFunc (retryDelay) takes this delay.
		attrs = append(attrs, "next_attempt", time.Now().Add(re.delay).UTC().Format(time.RFC3339Nano), "retry_in", re.delay)
	}
	x.logger.Info("URL task attempt failed; it will be retried", append(attrs, "err", err)...)
}

// permanent archives the task at once.
func permanent(err error) error { return fmt.Errorf("%w: %w", htq.SkipRetry, err) }

// ProcessTask runs one URL task.
func (x *urlHandler) ProcessTask(ctx context.Context, t *htq.Task) error {
	id, _ := htq.GetTaskID(ctx)
	queue, _ := htq.GetQueueName(ctx)
	retried, _ := htq.GetRetryCount(ctx)
	if t.Type() != model.TypeURL {
		return permanent(fmt.Errorf("task %s of type %q is in URL queue %s, whose tasks must be URL tasks", id, t.Type(), queue))
	}
	q, err := x.queues.Get(ctx, queue)
	if err != nil {
		if errors.Is(err, base.ErrQueueNotFound) {
			return permanent(fmt.Errorf("task %s: queue %s has no definition (deleted?): %w", id, queue, err))
		}
		return &retryError{delay: time.Second, err: fmt.Errorf("task %s: read queue %s: %w", id, queue, err)}
	}
	maxRetry, _ := htq.GetMaxRetry(ctx)
	p, err := model.DecodeURLTask(t.Payload())
	if err != nil {
		return permanent(fmt.Errorf("task %s: %w", id, err))
	}
	req, err := x.request(id, queue, retried, q, p)
	if err != nil {
		return permanent(err)
	}
	if req.Workflow, req.WorkflowTask, _ = htq.GetWorkflowID(ctx); req.Workflow != "" {
		deps, err := htq.Dependencies(ctx)
		if err == nil {
			req.Dependencies, err = model.DependencyHeader(model.NewDependencyViews(deps))
		}
		if err != nil {
			return &retryError{delay: backoff(retried, q.MinBackoff(), q.MaxBackoff()), err: fmt.Errorf("task %s: %w", id, err)}
		}
	}

	start := time.Now()
	if retried == 0 {
		// A retry is due at its backoff, not at the time the task
		// carries.
		if p.ProcessAt != nil {
			x.metrics.ObserveLateness(queue, start.Sub(*p.ProcessAt))
		}
	}
	res, derr := x.disp.Dispatch(ctx, req)
	if res != nil {
		x.writeResult(t, res)
	}
	outcome := dispatch.Policy{RetryClientErrors: q.Retry4xx}.Classify(derr)
	if res != nil {
		x.metrics.ObserveDispatch(queue, outcome.String(), res.Duration)
	} else {
		x.metrics.ObserveDispatch(queue, outcome.String(), time.Since(start))
	}
	// A callback is stored before the outcome it reports is written (see
	// callback.go); when it cannot be, the task runs again, its retries
	// untouched.
	again := func(err error) error {
		return &retryError{delay: backoff(retried, q.MinBackoff(), q.MaxBackoff()), err: err}
	}
	switch outcome {
	case dispatch.Succeeded:
		if q.Mode == model.ModeVariable && p.CallbackOf == nil {
			if err := x.scheduleNext(ctx, q, p, res); err != nil {
				// Run it again rather than lose the chain (the target sees
				// this run twice, as with any retry).
				return again(err)
			}
		}
		if err := x.callback(ctx, q, id, p, model.CallbackSuccess, retried+1, maxRetry, res, nil); err != nil {
			return again(err)
		}
		return nil
	case dispatch.Archive:
		if err := x.callback(ctx, q, id, p, model.CallbackFailure, retried+1, maxRetry, res, derr); err != nil {
			return again(err)
		}
		return permanent(derr)
	default:
		delay := backoff(retried, q.MinBackoff(), q.MaxBackoff())
		if ra, ok := dispatch.RetryAfter(derr); ok && ra > delay {
			delay = ra
		}
		if attempt.Archives(retried, maxRetry, false, true) {
			if err := x.callback(ctx, q, id, p, model.CallbackFailure, retried+1, maxRetry, res, derr); err != nil {
				return again(err)
			}
		}
		return &retryError{delay: delay, err: derr}
	}
}

// lostCallback makes the failure callback of a task whose last attempt
// was lost with its worker (err wraps htq.ErrLeaseExpired); the attempt's
// answer, if any came, is not known. It is the URL worker's
// Config.BeforeArchiveLost: when the callback cannot be stored the error
// (wrapping errCallbackNotStored) keeps the task, which is retried, so that
// it is never archived without its failure callback.
func (x *urlHandler) lostCallback(ctx context.Context, t *htq.Task, err error) error {
	id, _ := htq.GetTaskID(ctx)
	queue, _ := htq.GetQueueName(ctx)
	retried, _ := htq.GetRetryCount(ctx)
	maxRetry, _ := htq.GetMaxRetry(ctx)
	p, derr := model.DecodeURLTask(t.Payload())
	if derr != nil || p.FailureCallback == "" {
		return nil
	}
	q, qerr := x.queues.Get(ctx, queue)
	if qerr != nil {
		return fmt.Errorf("failure callback of task %s: %w: %w", id, errCallbackNotStored, qerr)
	}
	return x.callback(ctx, q, id, p, model.CallbackFailure, retried+1, maxRetry, nil, err)
}

// request builds the dispatch request of a task.
func (x *urlHandler) request(id, queue string, retried int, q *model.Queue, p *model.URLTask) (dispatch.Request, error) {
	req := dispatch.Request{TaskID: id, Queue: queue, RetryCount: retried, URL: p.URL, Method: p.Method}
	if len(p.Headers) > 0 || p.CallbackOf != nil {
		req.Header = make(http.Header, len(p.Headers)+1)
		for k, v := range p.Headers {
			req.Header.Set(k, v)
		}
	}
	if p.CallbackOf != nil {
		req.Header.Set(dispatch.HeaderCallbackOf, p.CallbackOf.TaskID)
	}
	body, err := p.BodyBytes()
	if err != nil {
		return req, fmt.Errorf("task %s: %w", id, err)
	}
	req.Body = body
	req.Timeout = p.RequestTimeout(q, x.defaults)
	return req, nil
}

// writeResult stores the answer as the task's result. A failure to store
// it is logged: the outcome of the attempt matters more.
func (x *urlHandler) writeResult(t *htq.Task, res *dispatch.Result) {
	r := urlResult{Status: res.Status, Headers: res.Header, Truncated: res.Truncated,
		DurationMS: float64(res.Duration.Microseconds()) / 1000}
	if utf8.Valid(res.Body) {
		r.Body = string(res.Body)
	} else {
		r.BodyBase64 = base64.StdEncoding.EncodeToString(res.Body)
	}
	data, err := json.Marshal(r)
	if err == nil {
		_, err = t.ResultWriter().Write(data)
	}
	if err != nil {
		x.logger.Warn("store URL task result", "id", t.ResultWriter().TaskID(), "err", err)
	}
}

// scheduleNext enqueues a variable task's next run after the interval
// HTQ's rule gives, unless the target said "done". The next run's ID is
// derived from this run's, so a run that is repeated (its worker died
// after the enqueue but before the task completed, and the run was
// recovered when its lease ran out) finds the next run already there
// instead of starting a second chain. For that, the next run keeps its ID
// for variableRunRetention after it completes, longer than a lost run
// takes to be recovered.
func (x *urlHandler) scheduleNext(ctx context.Context, q *model.Queue, p *model.URLTask, res *dispatch.Result) error {
	id, _ := htq.GetTaskID(ctx)
	maxRetry, _ := htq.GetMaxRetry(ctx)
	var current time.Duration
	if p.Variable != nil {
		current = time.Duration(p.Variable.IntervalS * float64(time.Second))
	}
	next, done := dispatch.NextInterval(res.Body, res.Header, current, q.SteppingTime(), q.MaxInterval())
	if done {
		return nil
	}
	nextTask := *p
	nextTask.Variable = &model.Variable{IntervalS: next.Seconds()}
	due := time.Now().Add(next).UTC()
	nextTask.ProcessAt = &due
	payload, err := nextTask.Encode()
	if err != nil {
		return fmt.Errorf("task %s: next run: %w", id, err)
	}
	_, err = x.client.EnqueueContext(context.WithoutCancel(ctx), htq.NewTask(model.TypeURL, payload),
		htq.Queue(q.Name), htq.TaskID(nextRunID(id)), htq.ProcessIn(next), htq.MaxRetry(maxRetry),
		htq.Retention(variableRunRetention))
	if err != nil && !errors.Is(err, htq.ErrTaskIDConflict) {
		return fmt.Errorf("task %s: enqueue next run: %w", id, err)
	}
	return nil
}

// variableRunRetention is how long a completed run of a variable task is
// kept (with its result): it holds the run's ID against a repeated
// previous run, which is recovered within its lease (30 s by default) and
// a retry delay.
const variableRunRetention = 10 * time.Minute

// nextRunID names the run after the one with ID id: "<root>~<n+1>" after
// "<root>~<n>", "<id>~1" after an ID without a run number. An ID that
// would grow past the limit is replaced by a hash of it.
func nextRunID(id string) string {
	root, n := id, 0
	if i := strings.LastIndexByte(id, '~'); i >= 0 {
		if k, err := strconv.Atoi(id[i+1:]); err == nil && k > 0 && strconv.Itoa(k) == id[i+1:] {
			root, n = id[:i], k
		}
	}
	return model.DerivedID(root, "~"+strconv.Itoa(n+1))
}
