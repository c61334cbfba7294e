package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// ScheduleKeyPrefix starts the MetaStore key of every schedule.
const ScheduleKeyPrefix = "schedule/"

// Schedule is a persisted periodic task: every tick of Cron, the service's
// htq.Scheduler enqueues the task into Queue. Its ID is the entry ID
// htq.Scheduler.Register gives the same spec, task and options, so every
// htq serve process registering it agrees on its ticks.
type Schedule struct {
	ID    string `json:"id"`
	Cron  string `json:"cron"`
	Queue string `json:"queue"`
	// Task is the task as the client gave it.
	Task TaskSpec `json:"task"`
	// TaskType, Payload and Options are the task as htq enqueues it
	// (the queue's policies applied when the schedule was created).
	TaskType  string      `json:"task_type"`
	Payload   []byte      `json:"payload"`
	Options   TaskOptions `json:"options"`
	CreatedAt time.Time   `json:"created_at"`
}

// Build returns the task and options to register with htq.Scheduler:
//
//	task, opts, err := s.Build()
//	id, err := scheduler.Register(s.Cron, task, opts...) // id == s.ID
func (s *Schedule) Build() (*htq.Task, []htq.Option, error) {
	opts, err := s.Options.options(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("schedule %s: %w", s.ID, err)
	}
	return htq.NewTask(s.TaskType, s.Payload), append(opts, htq.Queue(s.Queue)), nil
}

// LoadSchedules returns every persisted schedule, oldest first.
func LoadSchedules(ctx context.Context, ms broker.MetaStore) ([]*Schedule, error) {
	recs, err := ms.ListMeta(ctx, ScheduleKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("api: load schedules: %w", err)
	}
	out := make([]*Schedule, 0, len(recs))
	for key, data := range recs {
		var s Schedule
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("api: schedule %s: corrupt record: %w", strings.TrimPrefix(key, ScheduleKeyPrefix), err)
		}
		out = append(out, &s)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

type scheduleRequest struct {
	Cron  string   `json:"cron"`
	Queue string   `json:"queue"`
	Task  TaskSpec `json:"task"`
}

// createSchedule: POST /v1/schedules. Creating the same schedule twice
// answers the existing one (200) instead of a second copy (201).
func (h *handler) createSchedule(w http.ResponseWriter, r *http.Request) {
	var req scheduleRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := req.Task.checkKind(); err != nil {
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
	task, _, q, err := h.prepare(ctx, req.Queue, &req.Task)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	s := &Schedule{Cron: req.Cron, Queue: req.Queue, Task: req.Task, TaskType: task.Type(), Payload: task.Payload(), CreatedAt: time.Now().UTC()}
	if req.Task.Options != nil {
		s.Options = *req.Task.Options
	}
	if n, ok := q.MaxRetry(); ok && s.Options.MaxRetry == nil && req.Task.isURL() {
		s.Options.MaxRetry = &n
	}
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
	created, err := h.meta.PutMetaIfAbsent(ctx, ScheduleKeyPrefix+s.ID, data)
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

func (h *handler) loadSchedule(ctx context.Context, id string) (*Schedule, error) {
	if id == "" || strings.ContainsAny(id, "/\x00") {
		return nil, invalid(fmt.Sprintf("schedule id %q is malformed", id))
	}
	data, err := h.meta.GetMeta(ctx, ScheduleKeyPrefix+id)
	if errors.Is(err, base.ErrNotFound) {
		return nil, fmt.Errorf("schedule %s: %w", id, base.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var s Schedule
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
	writeJSON(w, http.StatusOK, s)
}

// listSchedules: GET /v1/schedules.
func (h *handler) listSchedules(w http.ResponseWriter, r *http.Request) {
	list, err := LoadSchedules(r.Context(), h.meta)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Schedules []*Schedule `json:"schedules"`
	}{list})
}

// deleteSchedule: DELETE /v1/schedules/{id}.
func (h *handler) deleteSchedule(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	if _, err := h.loadSchedule(ctx, id); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := h.meta.DeleteMeta(ctx, ScheduleKeyPrefix+id); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.schedulesChanged()
	w.WriteHeader(http.StatusNoContent)
}
