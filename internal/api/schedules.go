package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

type scheduleRequest struct {
	Cron  string         `json:"cron"`
	Queue string         `json:"queue"`
	Task  model.TaskSpec `json:"task"`
}

// createSchedule: POST /v1/schedules. Creating the same schedule twice
// answers the existing one (200) instead of a second copy (201).
func (h *handler) createSchedule(w http.ResponseWriter, r *http.Request) {
	var req scheduleRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := req.Task.CheckKind(); err != nil {
		h.writeError(w, r, err)
		return
	}
	if o := req.Task.Options; o != nil && (o.ProcessAt != nil || o.Deadline != nil || o.TaskID != "") {
		h.writeError(w, r, invalid("a schedule's task cannot set process_at, deadline or task_id (they would hold for one tick only)"))
		return
	}
	if strings.TrimSpace(req.Cron) == "" {
		h.writeError(w, r, invalid("cron is empty; want a 5-field cron spec, a descriptor such as @daily, or @every <duration>"))
		return
	}
	ctx := r.Context()
	task, _, q, err := h.reg.Prepare(ctx, req.Queue, &req.Task)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	s := &model.Schedule{Cron: req.Cron, Queue: req.Queue, Task: req.Task, TaskType: task.Type(), Payload: task.Payload(),
		Options: h.reg.ScheduleOptions(&req.Task, q), CreatedAt: time.Now().UTC()}
	// Register checks the spec and the task and names the entry; this
	// Scheduler is never started.
	btask, bopts, err := s.Build()
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	s.ID, err = htq.NewScheduler(h.opts.Storage, nil).Register(s.Cron, btask, bopts...)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	data, err := json.Marshal(s)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	created, err := h.meta.PutMetaIfAbsent(ctx, model.ScheduleKeyPrefix+s.ID, data)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if !created {
		old, err := h.loadSchedule(ctx, s.ID)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, old)
		return
	}
	h.schedulesChanged()
	writeJSON(w, http.StatusCreated, s)
}

func (h *handler) schedulesChanged() {
	if h.opts.SchedulesChanged != nil {
		h.opts.SchedulesChanged()
	}
}

func (h *handler) loadSchedule(ctx context.Context, id string) (*model.Schedule, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") {
		return nil, invalid(fmt.Sprintf("schedule id %q is malformed", id))
	}
	data, err := h.meta.GetMeta(ctx, model.ScheduleKeyPrefix+id)
	if errors.Is(err, base.ErrNotFound) {
		return nil, fmt.Errorf("schedule %s: %w", id, base.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var s model.Schedule
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("api: schedule %s: corrupt record: %w", id, err)
	}
	return &s, nil
}

// getSchedule: GET /v1/schedules/{id}.
func (h *handler) getSchedule(w http.ResponseWriter, r *http.Request) {
	s, err := h.loadSchedule(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	runs, err := h.scheduleRuns()
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newScheduleView(s, runs))
}

// listSchedules: GET /v1/schedules.
func (h *handler) listSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := model.LoadSchedules(r.Context(), h.meta)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	runs, err := h.scheduleRuns()
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := struct {
		Schedules []*model.ScheduleView `json:"schedules"`
	}{make([]*model.ScheduleView, len(list))}
	for k, s := range list {
		out.Schedules[k] = newScheduleView(s, runs)
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSchedule: DELETE /v1/schedules/{id}.
func (h *handler) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if _, err := h.loadSchedule(ctx, id); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := h.meta.DeleteMeta(ctx, model.ScheduleKeyPrefix+id); err != nil {
		h.writeError(w, r, err)
		return
	}
	// The history goes with it (the storage's records, where the
	// Schedulers write it).
	if err := h.b.DeleteMeta(ctx, base.SchedulerHistoryKey(id)); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.schedulesChanged()
	w.WriteHeader(http.StatusNoContent)
}
