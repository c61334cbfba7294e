package model

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/htqueue/htq"
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

// MarshalJSON writes the schedule with its payload always a (base64)
// string, "" when the task has none, as the API documents it (a nil
// []byte would be null).
func (s Schedule) MarshalJSON() ([]byte, error) {
	type plain Schedule
	p := plain(s)
	if p.Payload == nil {
		p.Payload = []byte{}
	}
	return json.Marshal(p)
}

// ScheduleView is a schedule as the API shows it: the stored schedule and
// the next and previous tick its live schedulers report (nil while no
// scheduler holds it, and before its first tick).
type ScheduleView struct {
	*Schedule
	NextRunAt *time.Time `json:"next_run_at,omitempty"`
	PrevRunAt *time.Time `json:"prev_run_at,omitempty"`
}

// MarshalJSON writes the schedule's fields (with Schedule.MarshalJSON,
// which the embedding would otherwise let stand for the whole view) and
// the run times.
func (v ScheduleView) MarshalJSON() ([]byte, error) {
	s := v.Schedule
	if s == nil {
		s = &Schedule{}
	}
	data, err := json.Marshal(s)
	if err != nil || v.NextRunAt == nil && v.PrevRunAt == nil {
		return data, err
	}
	runs, err := json.Marshal(struct {
		NextRunAt *time.Time `json:"next_run_at,omitempty"`
		PrevRunAt *time.Time `json:"prev_run_at,omitempty"`
	}{v.NextRunAt, v.PrevRunAt})
	if err != nil {
		return nil, err
	}
	return append(append(data[:len(data)-1], ','), runs[1:]...), nil
}

// Build returns the task and options to register with htq.Scheduler:
//
//	task, opts, err := s.Build()
//	id, err := scheduler.Register(s.Cron, task, opts...) // id == s.ID
func (s *Schedule) Build() (*htq.Task, []htq.Option, error) {
	opts, err := s.Options.Options(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("schedule %s: %w", s.ID, err)
	}
	return htq.NewTask(s.TaskType, s.Payload), append(opts, htq.Queue(s.Queue)), nil
}

// LoadSchedules returns every persisted schedule, oldest first.
func LoadSchedules(ctx context.Context, ms broker.MetaStore) ([]*Schedule, error) {
	recs, err := ms.ListMeta(ctx, ScheduleKeyPrefix)
	if err != nil {
		return nil, fmt.Errorf("model: load schedules: %w", err)
	}
	out := make([]*Schedule, 0, len(recs))
	for key, data := range recs {
		var s Schedule
		if err := json.Unmarshal(data, &s); err != nil {
			return nil, fmt.Errorf("model: schedule %s: corrupt record: %w", strings.TrimPrefix(key, ScheduleKeyPrefix), err)
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
