package apiclient

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/htqueue/htq/internal/model"
)

// Server is a live server as GET /v1/servers shows it: a Go Server, htq
// serve's URL worker, or a pull worker (Status "pull").
type Server struct {
	ID             string         `json:"id"`
	Host           string         `json:"host"`
	PID            int            `json:"pid"`
	Concurrency    int            `json:"concurrency"`
	Queues         map[string]int `json:"queues"`
	StrictPriority bool           `json:"strict_priority"`
	Started        time.Time      `json:"started"`
	// Status is "active", "stopped" (shutting down) or "pull".
	Status      string        `json:"status"`
	ActiveTasks []*ActiveTask `json:"active_tasks"`
}

// ActiveTask is a task a server is running now.
type ActiveTask struct {
	TaskID  string    `json:"task_id"`
	Queue   string    `json:"queue"`
	Type    string    `json:"type"`
	Started time.Time `json:"started"`
}

// BulkRequest asks for one action on every task of a state of a queue:
// Action "run", "archive" or "delete"; Group only with State
// "aggregating".
type BulkRequest struct {
	Action string `json:"action"`
	State  string `json:"state"`
	Group  string `json:"group,omitempty"`
}

// BulkResult says how many tasks a bulk action changed.
type BulkResult struct {
	Action string `json:"action"`
	State  string `json:"state"`
	Group  string `json:"group,omitempty"`
	Count  int    `json:"count"`
}

// Day is one day of a queue's history.
type Day struct {
	// Date is YYYY-MM-DD, in UTC.
	Date      string `json:"date"`
	Processed int    `json:"processed"`
	Failed    int    `json:"failed"`
}

// ScheduleRun is one tick of a schedule: the task it enqueued, or why
// none was.
type ScheduleRun struct {
	Tick        time.Time `json:"tick"`
	EnqueuedAt  time.Time `json:"enqueued_at"`
	TaskID      string    `json:"task_id,omitempty"`
	SchedulerID string    `json:"scheduler_id"`
	Error       string    `json:"error,omitempty"`
}

// Servers lists the live servers and what each runs: GET /v1/servers.
func (c *Client) Servers(ctx context.Context) ([]*Server, error) {
	var out struct {
		Servers []*Server `json:"servers"`
	}
	err := c.do(ctx, "GET", path("servers"), nil, nil, &out)
	return out.Servers, err
}

// Bulk runs, archives or deletes every task of a state of a queue in one
// call: POST /v1/queues/{queue}/bulk. An action the state does not take
// is an error wrapping htq.ErrWrongState.
func (c *Client) Bulk(ctx context.Context, queue string, req *BulkRequest) (*BulkResult, error) {
	var out BulkResult
	if err := c.do(ctx, "POST", path("queues", queue, "bulk"), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// History returns the processed and failed counts of each of a queue's
// last days days, today (UTC) first: GET /v1/queues/{queue}/history.
func (c *Client) History(ctx context.Context, queue string, days int) ([]*Day, error) {
	var out struct {
		Days []*Day `json:"days"`
	}
	err := c.do(ctx, "GET", path("queues", queue, "history"), url.Values{"days": {strconv.Itoa(days)}}, nil, &out)
	return out.Days, err
}

// Schedule returns one schedule with its run times: GET
// /v1/schedules/{id}.
func (c *Client) Schedule(ctx context.Context, id string) (*model.ScheduleView, error) {
	var out model.ScheduleView
	if err := c.do(ctx, "GET", path("schedules", id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ScheduleHistory returns the last ticks of a schedule (or of a Go
// program's scheduler entry), newest first: GET
// /v1/schedules/{id}/history.
func (c *Client) ScheduleHistory(ctx context.Context, id string) ([]*ScheduleRun, error) {
	var out struct {
		History []*ScheduleRun `json:"history"`
	}
	err := c.do(ctx, "GET", path("schedules", id, "history"), nil, nil, &out)
	return out.History, err
}
