package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/attempt"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/metrics"
	"github.com/htqueue/htq/internal/model"
)

// Limits of the pull-worker calls.
const (
	// MaxFetchWait bounds wait_s of a fetch.
	MaxFetchWait = 30 * time.Second
	// MaxFetchCount bounds count of a fetch.
	MaxFetchCount = 100
	// DefaultLease is the lease a fetch grants without lease_s.
	DefaultLease = 30 * time.Second
	// MinLease and MaxLease bound lease_s.
	MinLease = 500 * time.Millisecond
	MaxLease = 24 * time.Hour
	// maxFetchQueues bounds how many queues one fetch names.
	maxFetchQueues = 100
)

type fetchRequest struct {
	Queues []string `json:"queues"`
	Count  int      `json:"count"`
	WaitS  float64  `json:"wait_s"`
	LeaseS float64  `json:"lease_s"`
	// WorkerID names the worker in the storage's records (optional).
	WorkerID string `json:"worker_id"`
}

type leasedTask struct {
	ID            string          `json:"id"`
	Queue         string          `json:"queue"`
	Type          string          `json:"type"`
	Payload       json.RawMessage `json:"payload"` // see payloadJSON
	PayloadBase64 string          `json:"payload_base64,omitempty"`
	Retried       int             `json:"retried"`
	MaxRetry      int             `json:"max_retry"`
	TimeoutMS     int64           `json:"timeout_ms,omitempty"`
	Deadline      *time.Time      `json:"deadline,omitempty"`
	Token         string          `json:"token"`
	LeaseDeadline time.Time       `json:"lease_deadline"`
	// Headers is the context the enqueuer propagated (W3C traceparent and
	// tracestate), for the worker's OpenTelemetry propagator.
	Headers map[string]string `json:"headers,omitempty"`
	// Workflow is set for a task of a workflow.
	Workflow *leasedWorkflow `json:"workflow,omitempty"`
}

// leasedWorkflow is what a workflow task's fetch answer says of its
// workflow: its ID, the task's ID within it, and its dependencies'
// outcomes with their results.
type leasedWorkflow struct {
	ID           string                 `json:"id"`
	Task         string                 `json:"task"`
	Dependencies []model.DependencyView `json:"dependencies"`
}

type fetchResponse struct {
	Tasks []leasedTask `json:"tasks"`
}

func leaseDuration(s float64, what string) (time.Duration, error) {
	if s == 0 {
		return DefaultLease, nil
	}
	d, err := seconds(what, s)
	if err != nil {
		return 0, err
	}
	if d < MinLease || d > MaxLease {
		return 0, invalid(fmt.Sprintf("%s %v is out of range [%v, %v]", what, s, MinLease.Seconds(), MaxLease.Seconds()))
	}
	return d, nil
}

// pullRetryDelay is the delay before a failed or recovered pull task runs
// again: htq's default retry delay.
func pullRetryDelay(n int, msg string) time.Duration {
	return htq.DefaultRetryDelayFunc(n, errors.New(msg), nil)
}

// fetch: POST /v1/fetch leases up to count pending tasks of the queues
// (tried in the order given), waiting up to wait_s for one to be ready.
// The wait is woken by the storage's events, not by polling. The answer
// holds at most about MaxFetchBytes: the tasks past that bound (but never
// the first) go back to the front of their queue unseen.
func (h *handler) fetch(w http.ResponseWriter, r *http.Request) {
	var req fetchRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if err := h.checkFetch(ctx, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	lease, err := leaseDuration(req.LeaseS, "lease_s")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	wait, err := seconds("wait_s", req.WaitS)
	if err != nil || wait > MaxFetchWait {
		h.writeError(w, r, invalid(fmt.Sprintf("wait_s %v is out of range [0, %v]", req.WaitS, MaxFetchWait.Seconds())))
		return
	}
	serverID := req.WorkerID
	if serverID == "" {
		serverID = anonymousWorker
	}
	h.workers.fetched(req.WorkerID, remoteHost(r), req.Queues, req.Count, nil)
	deadline := time.Now().Add(wait)
	var wt *waiter
	if wait > 0 {
		wt = h.hub.add(req.Queues)
		defer h.hub.remove(wt)
	}
	out := fetchResponse{Tasks: []leasedTask{}}
	var size int64 // the answer's size so far, about
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		next := deadline
		for _, q := range req.Queues {
			next = earliest(next, h.upkeep.run(ctx, q, pullRetryDelay))
		}
		for _, q := range req.Queues {
			if len(out.Tasks) >= req.Count || size >= h.opts.MaxFetchBytes {
				break
			}
			leases, err := h.b.Fetch(ctx, broker.FetchParams{Queue: q, Max: req.Count - len(out.Tasks), LeaseDuration: lease, ServerID: serverID})
			var throttled *broker.ThrottledError
			switch {
			case errors.As(err, &throttled):
				next = earliest(next, time.Now().Add(throttled.RetryIn))
				continue
			case err != nil && len(out.Tasks) > 0:
				h.logger.Warn("fetch failed; answering with the tasks leased already", "queue", q, "err", err)
				continue
			case err != nil:
				h.writeError(w, r, err)
				return
			}
			for i, l := range leases {
				t := newLeasedTask(l)
				if err := h.addDependencies(ctx, &t, l); err != nil {
					h.logger.Warn("fetch: read a workflow task's dependencies; it goes back to its queue", "queue", l.Msg.Queue, "id", l.Msg.ID, "err", err)
					h.giveBack(ctx, leases[i:i+1])
					continue
				}
				n := t.size()
				if len(out.Tasks) > 0 && size+n > h.opts.MaxFetchBytes {
					h.giveBack(ctx, leases[i:])
					size = h.opts.MaxFetchBytes
					break
				}
				out.Tasks = append(out.Tasks, t)
				h.metrics.Leased(l.Msg.Queue)
				size += n
			}
		}
		now := time.Now()
		if len(out.Tasks) > 0 || wt == nil || !now.Before(deadline) {
			h.metrics.Fetched(len(out.Tasks))
			h.workers.fetched(req.WorkerID, remoteHost(r), nil, 0, out.Tasks)
			writeJSON(w, http.StatusOK, out)
			return
		}
		d := max(next.Sub(now), time.Millisecond)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		select {
		case <-wt.wake:
		case <-timer.C:
		case <-ctx.Done():
			return // the client left
		case <-h.opts.Context.Done():
			h.metrics.Fetched(0)
			writeJSON(w, http.StatusOK, out) // shutting down: empty answer
			return
		}
	}
}

// checkFetch checks a fetch request and its queues' modes.
func (h *handler) checkFetch(ctx context.Context, req *fetchRequest) error {
	if len(req.Queues) == 0 {
		return invalid("queues is empty; name the queues to fetch from")
	}
	if len(req.Queues) > maxFetchQueues {
		return invalid(fmt.Sprintf("%d queues; at most %d", len(req.Queues), maxFetchQueues))
	}
	if req.Count == 0 {
		req.Count = 1
	}
	if req.Count < 1 || req.Count > MaxFetchCount {
		return invalid(fmt.Sprintf("count %d is out of range [1, %d]", req.Count, MaxFetchCount))
	}
	if err := checkWorkerID(req.WorkerID); err != nil {
		return err
	}
	req.Queues = slices.Compact(req.Queues)
	for _, q := range req.Queues {
		if err := base.ValidateQueueName(q); err != nil {
			return err
		}
		rec, err := h.queues.Get(ctx, q)
		switch {
		case errors.Is(err, base.ErrQueueNotFound):
		case err != nil:
			return err
		case rec.Mode != model.ModePull:
			return fmt.Errorf("%w: queue %s is a %s queue: its URL tasks are run by htq serve, not fetched", model.ErrModeMismatch, q, rec.Mode)
		}
	}
	return nil
}

func newLeasedTask(l *broker.Lease) leasedTask {
	m := l.Msg
	t := leasedTask{ID: m.ID, Queue: m.Queue, Type: m.Type, Retried: m.Retried, MaxRetry: m.MaxRetry,
		TimeoutMS: m.Timeout.Milliseconds(), Deadline: timePtr(m.Deadline), Token: l.Token, LeaseDeadline: l.Deadline.UTC(),
		Headers: m.Headers}
	t.Payload, t.PayloadBase64 = payloadJSON(m.Payload)
	return t
}

// addDependencies adds to t, when it is a workflow task, its workflow and
// its dependencies' outcomes.
func (h *handler) addDependencies(ctx context.Context, t *leasedTask, l *broker.Lease) error {
	m := l.Msg
	if m.Workflow == "" {
		return nil
	}
	rs, err := h.b.DependencyResults(ctx, l.Ref())
	if err != nil {
		return err
	}
	deps := make([]*htq.DependencyResult, len(rs))
	for i, r := range rs {
		deps[i] = &htq.DependencyResult{ID: r.ID, Queue: r.Queue, TaskID: r.TaskID, OnFailure: htq.DependencyFailure(r.Policy),
			Outcome: htq.Outcome(r.Outcome), LastErr: r.LastErr, Result: r.Result}
	}
	t.Workflow = &leasedWorkflow{ID: m.Workflow, Task: m.WorkflowTask, Dependencies: model.NewDependencyViews(deps)}
	return nil
}

// size is about how many bytes t takes in a fetch's answer: its payload
// as written, plus its other fields and their names.
func (t *leasedTask) size() int64 {
	const fields = 256 // field names, numbers, times, punctuation
	n := fields + len(t.ID) + len(t.Queue) + len(t.Type) + len(t.Payload) + len(t.PayloadBase64) + len(t.Token)
	for k, v := range t.Headers {
		n += len(k) + len(v) + 6
	}
	if t.Workflow != nil {
		for _, d := range t.Workflow.Dependencies {
			n += fields + len(d.Result) + 4*len(d.ResultBase64)/3 + len(d.LastError)
		}
	}
	return int64(n)
}

// giveBack returns leased tasks that do not fit a fetch's answer to the
// front of their queue, in their order, without counting an attempt. A
// task that cannot be returned (the storage failed) runs again when its
// lease runs out.
func (h *handler) giveBack(ctx context.Context, leases []*broker.Lease) {
	ctx = context.WithoutCancel(ctx)
	for i := len(leases) - 1; i >= 0; i-- {
		l := leases[i]
		ref := broker.LeaseRef{Queue: l.Msg.Queue, ID: l.Msg.ID, Token: l.Token}
		if err := h.b.Requeue(ctx, ref); err != nil {
			h.logger.Warn("fetch: return a task that did not fit the answer", "queue", ref.Queue, "id", ref.ID, "err", err)
		}
	}
}

type ackRequest struct {
	Token        string          `json:"token"`
	Result       json.RawMessage `json:"result"`
	ResultBase64 string          `json:"result_base64"`
}

func (h *handler) leaseRef(r *http.Request, token string) (broker.LeaseRef, error) {
	ref := broker.LeaseRef{Queue: r.PathValue("queue"), ID: r.PathValue("id"), Token: token}
	if token == "" {
		return ref, invalid("token is empty; send the token the fetch returned")
	}
	return ref, base.ValidateQueueName(ref.Queue)
}

// ack: POST /v1/queues/{queue}/tasks/{id}/ack completes a leased task,
// storing its result first when one is given.
func (h *handler) ack(w http.ResponseWriter, r *http.Request) {
	var req ackRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	ref, err := h.leaseRef(r, req.Token)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	result := []byte(req.Result)
	if req.ResultBase64 != "" {
		if len(result) > 0 {
			h.writeError(w, r, invalid("set result or result_base64, not both"))
			return
		}
		if result, err = base64.StdEncoding.DecodeString(req.ResultBase64); err != nil {
			h.writeError(w, r, invalid("result_base64: "+err.Error()))
			return
		}
	}
	ctx := r.Context()
	if len(result) > 0 {
		if err := h.b.WriteResult(ctx, ref, result); err != nil {
			h.leaseError(w, r, ref.Queue, err)
			return
		}
	}
	errs := h.b.Complete(ctx, []broker.LeaseRef{ref})
	h.workers.finished(ref.Token, ref.Queue, ref.ID)
	if len(errs) == 1 && errs[0] != nil {
		h.leaseError(w, r, ref.Queue, errs[0])
		return
	}
	h.metrics.Acked(ref.Queue)
	w.WriteHeader(http.StatusNoContent)
}

// leaseError answers a pull worker's call that failed with err, counting
// a lost lease.
func (h *handler) leaseError(w http.ResponseWriter, r *http.Request, queue string, err error) {
	if errors.Is(err, base.ErrLeaseLost) {
		h.metrics.LeaseLost(queue, metrics.LeaseRefused)
	}
	h.writeError(w, r, err)
}

type failRequest struct {
	Token     string `json:"token"`
	Error     string `json:"error"`
	SkipRetry bool   `json:"skip_retry"`
	// RetryInS overrides the delay before the retry (seconds).
	RetryInS *float64 `json:"retry_in_s"`
}

type failResponse struct {
	State string `json:"state"`
}

// fail: POST /v1/queues/{queue}/tasks/{id}/fail records a failed attempt:
// the task goes to retry while it has retries left (and skip_retry is
// false), else to archive.
func (h *handler) fail(w http.ResponseWriter, r *http.Request) {
	var req failRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	ref, err := h.leaseRef(r, req.Token)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.Error == "" {
		req.Error = "failed (the worker gave no error message)"
	}
	var delay time.Duration
	if req.RetryInS != nil {
		if delay, err = seconds("retry_in_s", *req.RetryInS); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	ctx := r.Context()
	ti, err := h.b.GetTaskInfo(ctx, ref.Queue, ref.ID)
	if errors.Is(err, base.ErrTaskNotFound) || errors.Is(err, base.ErrQueueNotFound) {
		// As ack and heartbeat answer: whatever became of the task, the
		// caller no longer holds it.
		err = fmt.Errorf("%w: task %s/%s: no such task (deleted, or never leased); stop working on it", base.ErrLeaseLost, ref.Queue, ref.ID)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if ti.State != base.StateActive {
		h.leaseError(w, r, ref.Queue, fmt.Errorf("%w: task %s/%s is %s, no longer leased", base.ErrLeaseLost, ref.Queue, ref.ID, ti.State))
		return
	}
	state, err := attempt.Fail(ctx, h.b, attempt.Failed{
		Lease: ref, Msg: ti.Message, ErrMsg: req.Error, SkipRetry: req.SkipRetry, IsFailure: true,
		Delay: func(retried int) time.Duration {
			if req.RetryInS != nil {
				return delay
			}
			return pullRetryDelay(retried, req.Error)
		},
	})
	h.workers.finished(ref.Token, ref.Queue, ref.ID)
	if err != nil {
		h.leaseError(w, r, ref.Queue, err)
		return
	}
	h.metrics.Failed(ref.Queue, state.String())
	if state == base.StateRetry {
		h.upkeep.scheduled(ref.Queue)
	}
	writeJSON(w, http.StatusOK, failResponse{State: state.String()})
}

type heartbeatRequest struct {
	Token  string  `json:"token"`
	LeaseS float64 `json:"lease_s"`
}

type heartbeatResponse struct {
	LeaseDeadline time.Time `json:"lease_deadline"`
	// Canceled tells the worker that someone asked to cancel the task.
	Canceled bool `json:"canceled"`
}

// heartbeat: POST /v1/queues/{queue}/tasks/{id}/heartbeat extends a lease
// to lease_s from now.
func (h *handler) heartbeat(w http.ResponseWriter, r *http.Request) {
	var req heartbeatRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	ref, err := h.leaseRef(r, req.Token)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	d, err := leaseDuration(req.LeaseS, "lease_s")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.hub.start()
	start := time.Now()
	lost, err := h.b.ExtendLeases(r.Context(), ref.Queue, []broker.LeaseRef{ref}, d)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if slices.Contains(lost, ref.ID) {
		h.workers.finished(ref.Token, ref.Queue, ref.ID)
		h.leaseError(w, r, ref.Queue, fmt.Errorf("%w: task %s/%s: the lease ran out or the task was recovered; stop working on it", base.ErrLeaseLost, ref.Queue, ref.ID))
		return
	}
	h.workers.extended(r.Context(), ref.Token, remoteHost(r), ref.Queue, ref.ID, start.Add(d))
	writeJSON(w, http.StatusOK, heartbeatResponse{LeaseDeadline: start.Add(d).UTC(), Canceled: h.hub.wasCanceled(ref.ID)})
}
