package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// queueRequest is the body of a queue create (POST /v1/queues) or update
// (PATCH /v1/queues/{queue}): the queue's name and mode, and the changes
// of model.QueueChange. Absent fields keep their value (update) or take
// their default (create).
type queueRequest struct {
	Name string     `json:"name"`
	Mode model.Mode `json:"mode"`
	model.QueueChange
}

// lookupQueue returns a queue's record and its storage snapshot. A queue
// the storage knows without a record (made by Go clients) is a pull queue;
// a queue known to neither is ErrQueueNotFound. info is nil for a record
// the storage does not know yet.
func (h *handler) lookupQueue(ctx context.Context, name string) (*model.Queue, *htq.QueueInfo, error) {
	if err := base.ValidateQueueName(name); err != nil {
		return nil, nil, err
	}
	q, qerr := model.Get(ctx, h.meta, name)
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
		q = &model.Queue{Name: name, Mode: model.ModePull}
	}
	return q, info, nil
}

// createQueue: POST /v1/queues.
func (h *handler) createQueue(w http.ResponseWriter, r *http.Request) {
	var req queueRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.Mode == "" {
		req.Mode = model.ModePull
	}
	q := &model.Queue{Name: req.Name, Mode: req.Mode, CreatedAt: time.Now().UTC()}
	req.ApplyPolicy(q)
	if err := q.WithDefaults().Validate(); err != nil {
		h.writeError(w, r, err)
		return
	}
	var s htq.QueueSettings
	if err := req.ApplySettings(&s); err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	if _, err := model.Get(ctx, h.meta, q.Name); err == nil {
		h.writeError(w, r, fmt.Errorf("queue %s: %w", q.Name, model.ErrQueueExists))
		return
	} else if !errors.Is(err, base.ErrQueueNotFound) {
		h.writeError(w, r, err)
		return
	}
	if _, err := h.reg.Define(ctx, q, &req.QueueChange, model.DefineExplicit); err != nil {
		h.writeError(w, r, err)
		return
	}
	q, info, err := h.lookupQueue(ctx, q.Name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, model.NewQueueView(q, info))
}

// getQueue: GET /v1/queues/{queue}.
func (h *handler) getQueue(w http.ResponseWriter, r *http.Request) {
	q, info, err := h.lookupQueue(r.Context(), r.PathValue("queue"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, model.NewQueueView(q, info))
}

// listKeys: GET /v1/queues/{queue}/keys lists the queue's fair-sharing
// keys that have pending or running tasks, with their counts.
func (h *handler) listKeys(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("queue")
	if _, _, err := h.lookupQueue(r.Context(), name); err != nil {
		h.writeError(w, r, err)
		return
	}
	keys, err := h.inspector.Keys(name)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	type keyJSON struct {
		Key     string `json:"key"`
		Pending int    `json:"pending"`
		Active  int    `json:"active"`
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = keyJSON{Key: k.Key, Pending: k.Pending, Active: k.Active}
	}
	writeJSON(w, http.StatusOK, map[string]any{"keys": out})
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
	byName := make(map[string]*model.Queue, len(recs))
	for _, q := range recs {
		byName[q.Name] = q
		if !slices.Contains(names, q.Name) {
			names = append(names, q.Name)
		}
	}
	slices.Sort(names)
	out := struct {
		Queues []*model.QueueView `json:"queues"`
	}{Queues: make([]*model.QueueView, 0, len(names))}
	for _, name := range names {
		q := byName[name]
		if q == nil {
			q = &model.Queue{Name: name, Mode: model.ModePull}
		}
		info, err := h.inspector.GetQueueInfo(name)
		if err != nil && !errors.Is(err, base.ErrQueueNotFound) {
			h.writeError(w, r, err)
			return
		}
		out.Queues = append(out.Queues, model.NewQueueView(q, info))
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
		h.writeError(w, r, fmt.Errorf("%w: queue %s is a %s queue; to change its mode (its tasks stay) send the PATCH with ?force=true", model.ErrModeMismatch, name, cur.Mode))
		return
	}
	if changeMode {
		// An operator's repair: the mode's default max concurrency comes
		// with it unless the request sets one.
		s.MaxConcurrency = model.DefaultMaxConcurrency(req.Mode)
	}
	if err := req.ApplySettings(&s); err != nil {
		h.writeError(w, r, err)
		return
	}
	var q *model.Queue
	if changeMode {
		q, err = h.reg.ChangeMode(ctx, cur, req.Mode, &req.QueueChange)
	} else {
		if cur.CreatedAt.IsZero() { // a pull queue of Go clients gets its record now
			cur.CreatedAt = time.Now().UTC()
			if _, err := h.queues.Create(ctx, cur); err != nil && !errors.Is(err, model.ErrQueueExists) {
				h.writeError(w, r, err)
				return
			}
		}
		q, err = h.queues.Update(ctx, name, func(q *model.Queue) error {
			req.ApplyPolicy(q)
			return nil
		})
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.HasSettings() || changeMode {
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
	writeJSON(w, http.StatusOK, model.NewQueueView(q, info))
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
	_, recErr := model.Get(ctx, h.meta, name)
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
