package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// entryRuns is an entry's next and previous tick over every scheduler
// that holds it.
type entryRuns struct{ next, prev time.Time }

// scheduleRuns reads the entries of every live scheduler and returns the
// earliest next and latest previous tick of each entry ID.
func (h *handler) scheduleRuns() (map[string]entryRuns, error) {
	entries, err := h.inspector.SchedulerEntries()
	if err != nil {
		return nil, err
	}
	runs := make(map[string]entryRuns, len(entries))
	for _, e := range entries {
		r, seen := runs[e.ID]
		if !seen || e.Next.Before(r.next) {
			r.next = e.Next
		}
		if e.Prev.After(r.prev) {
			r.prev = e.Prev
		}
		runs[e.ID] = r
	}
	return runs, nil
}

// newScheduleView shows a stored schedule with the fire times its live
// schedulers report.
func newScheduleView(s *model.Schedule, runs map[string]entryRuns) *model.ScheduleView {
	r := runs[s.ID]
	return &model.ScheduleView{Schedule: s, NextRunAt: timePtr(r.next), PrevRunAt: timePtr(r.prev)}
}

// enqueueJSON is one tick of a schedule: the task enqueued, or the error.
type enqueueJSON struct {
	Tick        time.Time `json:"tick"`
	EnqueuedAt  time.Time `json:"enqueued_at"`
	TaskID      string    `json:"task_id,omitempty"`
	SchedulerID string    `json:"scheduler_id"`
	Error       string    `json:"error,omitempty"`
}

// scheduleHistory: GET /v1/schedules/{id}/history answers the last
// enqueues of a stored schedule or of any scheduler's entry (a Go
// program's), newest first. An ID with no history that is neither a
// stored schedule nor a live entry is not found.
func (h *handler) scheduleHistory(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	events, err := h.inspector.ListSchedulerEnqueueEvents(id)
	if err == nil && len(events) == 0 {
		err = h.knownSchedule(r.Context(), id)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := struct {
		History []enqueueJSON `json:"history"`
	}{make([]enqueueJSON, len(events))}
	for k, ev := range events {
		out.History[k] = enqueueJSON{Tick: ev.Tick.UTC(), EnqueuedAt: ev.EnqueuedAt.UTC(), TaskID: ev.TaskID, SchedulerID: ev.SchedulerID, Error: ev.Error}
	}
	writeJSON(w, http.StatusOK, out)
}

// knownSchedule fails with base.ErrNotFound unless id is a stored
// schedule or the entry of a live scheduler.
func (h *handler) knownSchedule(ctx context.Context, id string) error {
	_, err := h.loadSchedule(ctx, id)
	if !errors.Is(err, base.ErrNotFound) {
		return err
	}
	runs, err := h.scheduleRuns()
	if err != nil {
		return err
	}
	if _, live := runs[id]; !live {
		return fmt.Errorf("schedule %s: no stored schedule, live scheduler entry or history has this ID: %w", id, base.ErrNotFound)
	}
	return nil
}

// entryJSON is one periodic task of a live scheduler.
type entryJSON struct {
	ID            string          `json:"id"`
	SchedulerID   string          `json:"scheduler_id"`
	Spec          string          `json:"spec"`
	Type          string          `json:"type"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 string          `json:"payload_base64,omitempty"`
	Options       []string        `json:"options"`
	NextRunAt     time.Time       `json:"next_run_at"`
	PrevRunAt     *time.Time      `json:"prev_run_at,omitempty"`
}

// schedulerEntries: GET /v1/scheduler-entries lists the entries of every
// live Scheduler (htq serve's and Go programs'), one per scheduler and
// entry, by entry ID.
func (h *handler) schedulerEntries(w http.ResponseWriter, r *http.Request) {
	entries, err := h.inspector.SchedulerEntries()
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := struct {
		Entries []entryJSON `json:"entries"`
	}{make([]entryJSON, len(entries))}
	for k, e := range entries {
		out.Entries[k] = newEntryJSON(e)
	}
	sort.Slice(out.Entries, func(i, j int) bool {
		a, b := out.Entries[i], out.Entries[j]
		return a.ID < b.ID || a.ID == b.ID && a.SchedulerID < b.SchedulerID
	})
	writeJSON(w, http.StatusOK, out)
}

func newEntryJSON(e *htq.SchedulerEntry) entryJSON {
	opts := e.Opts
	if opts == nil {
		opts = []string{}
	}
	out := entryJSON{ID: e.ID, SchedulerID: e.SchedulerID, Spec: e.Spec, Type: e.Task.Type(),
		Options: opts, NextRunAt: e.Next.UTC(), PrevRunAt: timePtr(e.Prev)}
	if raw, ok := rawJSON(e.Task.Payload()); ok {
		out.Payload = raw
	} else if len(e.Task.Payload()) > 0 {
		out.PayloadBase64 = base64.StdEncoding.EncodeToString(e.Task.Payload())
	}
	return out
}
