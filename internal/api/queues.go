package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/queuemeta"
)

// queueRequest is the body of a queue create (POST /v1/queues) or update
// (PATCH /v1/queues/{queue}). Absent fields keep their value (update) or
// take their default (create).
type queueRequest struct {
	Name              string         `json:"name"`
	Mode              queuemeta.Mode `json:"mode"`
	SteppingTimeS     *int           `json:"stepping_time_s"`
	MaxIntervalS      *int           `json:"max_interval_s"`
	MaxAttempts       *int           `json:"max_attempts"`
	MinBackoffMS      *int64         `json:"min_backoff_ms"`
	MaxBackoffMS      *int64         `json:"max_backoff_ms"`
	DispatchTimeoutMS *int64         `json:"dispatch_timeout_ms"`
	Retry4xx          *bool          `json:"retry_4xx"`
	MaxConcurrency    *int           `json:"max_concurrency"`
	RateLimit         *float64       `json:"rate_limit"`
	RateBurst         *int           `json:"rate_burst"`
	LeaseMS           *int64         `json:"lease_ms"`
	Paused            *bool          `json:"paused"`
}

// applyPolicy copies the request's policy fields onto q.
func (req *queueRequest) applyPolicy(q *queuemeta.Queue) {
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
	set(&q.SteppingTimeS, req.SteppingTimeS)
	set(&q.MaxIntervalS, req.MaxIntervalS)
	set(&q.MaxAttempts, req.MaxAttempts)
	set64(&q.MinBackoffMS, req.MinBackoffMS)
	set64(&q.MaxBackoffMS, req.MaxBackoffMS)
	set64(&q.DispatchTimeoutMS, req.DispatchTimeoutMS)
	if req.Retry4xx != nil {
		q.Retry4xx = *req.Retry4xx
	}
}

// hasSettings reports whether the request sets a storage setting.
func (req *queueRequest) hasSettings() bool {
	return req.MaxConcurrency != nil || req.RateLimit != nil || req.RateBurst != nil || req.LeaseMS != nil
}

// applySettings copies the request's settings onto s and checks them.
func (req *queueRequest) applySettings(s *htq.QueueSettings) error {
	if req.MaxConcurrency != nil {
		s.MaxConcurrency = *req.MaxConcurrency
	}
	if req.RateLimit != nil {
		s.RateLimit = *req.RateLimit
	}
	if req.RateBurst != nil {
		s.RateBurst = *req.RateBurst
	}
	if req.LeaseMS != nil {
		if *req.LeaseMS < 0 || *req.LeaseMS > int64(24*time.Hour/time.Millisecond) {
			return invalid(fmt.Sprintf("lease_ms %d is out of range [0, %d]", *req.LeaseMS, int64(24*time.Hour/time.Millisecond)))
		}
		s.LeaseDuration = time.Duration(*req.LeaseMS) * time.Millisecond
	}
	if s.MaxConcurrency < 0 || s.RateBurst < 0 || s.RateLimit < 0 || math.IsNaN(s.RateLimit) || math.IsInf(s.RateLimit, 0) {
		return invalid("max_concurrency, rate_limit and rate_burst must be finite and not negative")
	}
	return nil
}

type settingsJSON struct {
	MaxConcurrency int     `json:"max_concurrency"`
	RateLimit      float64 `json:"rate_limit"`
	RateBurst      int     `json:"rate_burst"`
	LeaseMS        int64   `json:"lease_ms"`
}

type statsJSON struct {
	Size           int       `json:"size"`
	Pending        int       `json:"pending"`
	Active         int       `json:"active"`
	Scheduled      int       `json:"scheduled"`
	Retry          int       `json:"retry"`
	Archived       int       `json:"archived"`
	Completed      int       `json:"completed"`
	Aggregating    int       `json:"aggregating"`
	Groups         int       `json:"groups"`
	Processed      int       `json:"processed"`
	Failed         int       `json:"failed"`
	ProcessedTotal int       `json:"processed_total"`
	FailedTotal    int       `json:"failed_total"`
	LatencyMS      int64     `json:"latency_ms"`
	MemoryBytes    int64     `json:"memory_bytes"`
	Timestamp      time.Time `json:"timestamp"`
}

// queueJSON is a queue as the API shows it: its record, the storage's
// settings and a snapshot of its tasks.
type queueJSON struct {
	*queuemeta.Queue
	Paused   bool         `json:"paused"`
	Settings settingsJSON `json:"settings"`
	Stats    statsJSON    `json:"stats"`
}

func newQueueJSON(q *queuemeta.Queue, info *htq.QueueInfo) *queueJSON {
	out := &queueJSON{Queue: q}
	if info == nil {
		return out
	}
	out.Paused = info.Paused
	out.Settings = settingsJSON{MaxConcurrency: info.Settings.MaxConcurrency, RateLimit: info.Settings.RateLimit,
		RateBurst: info.Settings.RateBurst, LeaseMS: info.Settings.LeaseDuration.Milliseconds()}
	out.Stats = statsJSON{Size: info.Size, Pending: info.Pending, Active: info.Active, Scheduled: info.Scheduled,
		Retry: info.Retry, Archived: info.Archived, Completed: info.Completed, Aggregating: info.Aggregating,
		Groups: info.Groups, Processed: info.Processed, Failed: info.Failed, ProcessedTotal: info.ProcessedTotal,
		FailedTotal: info.FailedTotal, LatencyMS: info.Latency.Milliseconds(), MemoryBytes: info.MemoryUsage,
		Timestamp: info.Timestamp.UTC()}
	return out
}

// lookupQueue returns a queue's record and its storage snapshot. A queue
// the storage knows without a record (made by Go clients) is a pull queue;
// a queue known to neither is ErrQueueNotFound. info is nil for a record
// the storage does not know yet.
func (h *handler) lookupQueue(ctx context.Context, name string) (*queuemeta.Queue, *htq.QueueInfo, error) {
	if err := base.ValidateQueueName(name); err != nil {
		return nil, nil, err
	}
	q, qerr := queuemeta.Get(ctx, h.meta, name)
	if qerr != nil && !errors.Is(qerr, base.ErrQueueNotFound) {
		return nil, nil, qerr
	}
	info, err := h.inspector.GetQueueInfo(name)
	switch {
	case err == nil:
	case errors.Is(err, base.ErrQueueNotFound):
		if q == nil {
			return nil, nil, fmt.Errorf("%w: queue %s", base.ErrQueueNotFound, name)
		}
		info = nil
	default:
		return nil, nil, err
	}
	if q == nil {
		q = &queuemeta.Queue{Name: name, Mode: queuemeta.ModePull}
	}
	return q, info, nil
}

// How defineQueue treats a queue that already has a record.
const (
	// defineFirstTask: the queue is defined by its first task; a record
	// of the same mode (another first task won the race) is used, one of
	// another mode is ErrModeMismatch.
	defineFirstTask = false
	// defineExplicit: an operator's create; any record is ErrQueueExists.
	defineExplicit = true
)

// defineQueue stores the record of queue q, which had none when the caller
// looked, with its storage settings (the mode's defaults, then req's) and
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
// the settings with PATCH /v1/queues/{queue}.
func (h *handler) defineQueue(ctx context.Context, q *queuemeta.Queue, req *queueRequest, explicit bool) (*queuemeta.Queue, error) {
	info, err := h.inspector.GetQueueInfo(q.Name)
	switch {
	case errors.Is(err, base.ErrQueueNotFound):
		info = nil
	case err != nil:
		return nil, err
	}
	if q.Mode.IsURL() && info != nil && info.Size > 0 {
		// Either typed tasks of Go clients, or tasks of a caller that has
		// defined the queue since ours looked: read the record again.
		if cur, err := queuemeta.Get(ctx, h.meta, q.Name); err == nil {
			if explicit {
				return nil, fmt.Errorf("queue %s: %w", q.Name, queuemeta.ErrQueueExists)
			}
			return h.sameMode(cur, q.Mode)
		} else if !errors.Is(err, base.ErrQueueNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: queue %s already holds %d typed tasks; it cannot become a %s queue", queuemeta.ErrModeMismatch, q.Name, info.Size, q.Mode)
	}
	s := htq.QueueSettings{MaxConcurrency: queuemeta.DefaultMaxConcurrency(q.Mode)}
	if req != nil {
		if err := req.applySettings(&s); err != nil {
			return nil, err
		}
	}
	configured := info != nil && info.Settings != (htq.QueueSettings{})
	if (explicit || !configured) && (s != (htq.QueueSettings{}) || q.Mode.IsURL()) {
		if err := h.inspector.SetQueueSettings(q.Name, s); err != nil {
			return nil, err
		}
	}
	if req != nil && req.Paused != nil && *req.Paused {
		if err := h.inspector.PauseQueue(q.Name); err != nil {
			return nil, err
		}
	}
	got, err := h.queues.Create(ctx, q)
	switch {
	case err == nil:
		return got, nil
	case errors.Is(err, queuemeta.ErrQueueExists) && !explicit:
		return h.sameMode(got, q.Mode)
	default:
		return nil, err
	}
}

// sameMode returns cur when its mode is mode, and ErrModeMismatch when not.
func (h *handler) sameMode(cur *queuemeta.Queue, mode queuemeta.Mode) (*queuemeta.Queue, error) {
	if cur.Mode != mode {
		return nil, fmt.Errorf("%w: queue %s is a %s queue, not %s", queuemeta.ErrModeMismatch, cur.Name, cur.Mode, mode)
	}
	return cur, nil
}

// createQueue: POST /v1/queues.
func (h *handler) createQueue(w http.ResponseWriter, r *http.Request) {
	var req queueRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.Mode == "" {
		req.Mode = queuemeta.ModePull
	}
	q := &queuemeta.Queue{Name: req.Name, Mode: req.Mode, CreatedAt: time.Now().UTC()}
	req.applyPolicy(q)
	if err := q.WithDefaults().Validate(); err != nil {
		h.writeError(w, r, err)
		return
	}
	var s htq.QueueSettings
	if err := req.applySettings(&s); err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if _, err := queuemeta.Get(ctx, h.meta, q.Name); err == nil {
		h.writeError(w, r, fmt.Errorf("queue %s: %w", q.Name, queuemeta.ErrQueueExists))
		return
	} else if !errors.Is(err, base.ErrQueueNotFound) {
		h.writeError(w, r, err)
		return
	}
	if _, err := h.defineQueue(ctx, q, &req, defineExplicit); err != nil {
		h.writeError(w, r, err)
		return
	}
	q, info, err := h.lookupQueue(ctx, q.Name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, newQueueJSON(q, info))
}

// getQueue: GET /v1/queues/{queue}.
func (h *handler) getQueue(w http.ResponseWriter, r *http.Request) {
	q, info, err := h.lookupQueue(r.Context(), r.PathValue("queue"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newQueueJSON(q, info))
}

// listQueues: GET /v1/queues lists every queue, defined or known to the
// storage, sorted by name.
func (h *handler) listQueues(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	recs, err := h.queues.List(ctx)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	names, err := h.inspector.Queues()
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	byName := make(map[string]*queuemeta.Queue, len(recs))
	for _, q := range recs {
		byName[q.Name] = q
		if !slices.Contains(names, q.Name) {
			names = append(names, q.Name)
		}
	}
	slices.Sort(names)
	out := struct {
		Queues []*queueJSON `json:"queues"`
	}{Queues: make([]*queueJSON, 0, len(names))}
	for _, name := range names {
		q := byName[name]
		if q == nil {
			q = &queuemeta.Queue{Name: name, Mode: queuemeta.ModePull}
		}
		info, err := h.inspector.GetQueueInfo(name)
		if err != nil && !errors.Is(err, base.ErrQueueNotFound) {
			h.writeError(w, r, err)
			return
		}
		out.Queues = append(out.Queues, newQueueJSON(q, info))
	}
	writeJSON(w, http.StatusOK, out)
}

// updateQueue: PATCH /v1/queues/{queue}[?force=true] changes policies and
// settings, and with force the mode when the request names another one
// (see changeMode); the name cannot change.
func (h *handler) updateQueue(w http.ResponseWriter, r *http.Request) {
	var req queueRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	force, err := forceParam(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	name := r.PathValue("queue")
	if req.Name != "" && req.Name != name {
		h.writeError(w, r, invalid(fmt.Sprintf("name %q: a queue cannot be renamed", req.Name)))
		return
	}
	cur, info, err := h.lookupQueue(ctx, name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var s htq.QueueSettings
	if info != nil {
		s = info.Settings
	}
	changeMode := req.Mode != "" && req.Mode != cur.Mode
	if changeMode && !force {
		h.writeError(w, r, fmt.Errorf("%w: queue %s is a %s queue; to change its mode (its tasks stay) send the PATCH with ?force=true", queuemeta.ErrModeMismatch, name, cur.Mode))
		return
	}
	if changeMode {
		// An operator's repair: the mode's default max concurrency comes
		// with it unless the request sets one.
		s.MaxConcurrency = queuemeta.DefaultMaxConcurrency(req.Mode)
	}
	if err := req.applySettings(&s); err != nil {
		h.writeError(w, r, err)
		return
	}
	var q *queuemeta.Queue
	if changeMode {
		q, err = h.changeMode(ctx, cur, &req)
	} else {
		if cur.CreatedAt.IsZero() { // a pull queue of Go clients gets its record now
			cur.CreatedAt = time.Now().UTC()
			if _, err := h.queues.Create(ctx, cur); err != nil && !errors.Is(err, queuemeta.ErrQueueExists) {
				h.writeError(w, r, err)
				return
			}
		}
		q, err = h.queues.Update(ctx, name, func(q *queuemeta.Queue) error {
			req.applyPolicy(q)
			return nil
		})
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.hasSettings() || changeMode {
		if err := h.inspector.SetQueueSettings(name, s); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	if req.Paused != nil {
		if *req.Paused {
			err = h.inspector.PauseQueue(name)
		} else {
			err = h.inspector.UnpauseQueue(name)
		}
		if err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	if _, info, err = h.lookupQueue(ctx, name); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newQueueJSON(q, info))
}

// changeMode replaces the record of queue cur by one of the mode req
// names, with that mode's defaults and req's policies. This is how an
// operator repairs a queue whose mode is wrong (for example one whose URL
// tasks a pull record keeps from the dispatcher): the tasks stay, and
// from now on the new mode's runner serves them. Policies of the old mode
// that the new one does not take are dropped.
func (h *handler) changeMode(ctx context.Context, cur *queuemeta.Queue, req *queueRequest) (*queuemeta.Queue, error) {
	if !req.Mode.Valid() {
		return nil, invalid(fmt.Sprintf("mode %q: want pull, real_time, timing or variable", req.Mode))
	}
	created := cur.CreatedAt
	if created.IsZero() {
		created = time.Now()
	}
	q := queuemeta.New(cur.Name, req.Mode, created)
	req.applyPolicy(q)
	if err := q.WithDefaults().Validate(); err != nil {
		return nil, err
	}
	if err := h.queues.Put(ctx, q); err != nil {
		return nil, err
	}
	h.logger.Warn("queue mode changed by an operator", "queue", q.Name, "from", cur.Mode, "to", q.Mode)
	return q, nil
}

// deleteQueue: DELETE /v1/queues/{queue}[?force=true]. Without force a
// queue holding tasks is refused (409 queue_not_empty); with force its
// tasks go too, unless some are active.
func (h *handler) deleteQueue(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("queue")
	force, err := forceParam(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := base.ValidateQueueName(name); err != nil {
		h.writeError(w, r, err)
		return
	}
	_, recErr := queuemeta.Get(ctx, h.meta, name)
	if recErr != nil && !errors.Is(recErr, base.ErrQueueNotFound) {
		h.writeError(w, r, recErr)
		return
	}
	err = h.inspector.DeleteQueue(name, force)
	if errors.Is(err, base.ErrQueueNotFound) && recErr == nil {
		err = nil // defined but never used
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.noContent(w, r, h.queues.Delete(ctx, name))
}

// forceParam reads the force query parameter (absent: false).
func forceParam(r *http.Request) (bool, error) {
	switch r.URL.Query().Get("force") {
	case "", "false", "0":
		return false, nil
	case "true", "1":
		return true, nil
	default:
		return false, invalid("force: want true or false")
	}
}

// pauseQueue: POST /v1/queues/{queue}/pause.
func (h *handler) pauseQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if _, _, err := h.lookupQueue(r.Context(), name); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.noContent(w, r, h.inspector.PauseQueue(name))
}

// resumeQueue: POST /v1/queues/{queue}/resume.
func (h *handler) resumeQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if _, _, err := h.lookupQueue(r.Context(), name); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.noContent(w, r, h.inspector.UnpauseQueue(name))
}
