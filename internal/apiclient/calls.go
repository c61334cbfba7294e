package apiclient

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/htqueue/htq/internal/model"
)

// Task is a task as the API shows it (internal/api's taskJSON). Payload
// and Result hold the bytes when they are JSON; else the Base64 fields
// hold them.
type Task struct {
	ID            string          `json:"id"`
	Queue         string          `json:"queue"`
	Type          string          `json:"type"`
	State         string          `json:"state"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 string          `json:"payload_base64,omitempty"`
	MaxRetry      int             `json:"max_retry"`
	Retried       int             `json:"retried"`
	LastError     string          `json:"last_error,omitempty"`
	LastFailedAt  *time.Time      `json:"last_failed_at,omitempty"`
	TimeoutMS     int64           `json:"timeout_ms,omitempty"`
	Deadline      *time.Time      `json:"deadline,omitempty"`
	Group         string          `json:"group,omitempty"`
	Priority      int             `json:"priority,omitempty"`
	Key           string          `json:"key,omitempty"`
	NextProcessAt *time.Time      `json:"next_process_at,omitempty"`
	IsOrphaned    bool            `json:"is_orphaned,omitempty"`
	RetentionMS   int64           `json:"retention_ms,omitempty"`
	CompletedAt   *time.Time      `json:"completed_at,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	ResultBase64  string          `json:"result_base64,omitempty"`
	Workflow      string          `json:"workflow,omitempty"`
	WorkflowTask  string          `json:"workflow_task,omitempty"`
}

// Workflow is a workflow as the API shows it (internal/api's
// workflowJSON).
type Workflow struct {
	ID          string          `json:"id"`
	State       string          `json:"state"`
	CreatedAt   time.Time       `json:"created_at"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
	RetentionMS int64           `json:"retention_ms"`
	Tasks       []*WorkflowTask `json:"tasks"`
}

// WorkflowTask is one task of a Workflow.
type WorkflowTask struct {
	ID        string `json:"id"`
	Queue     string `json:"queue"`
	TaskID    string `json:"task_id"`
	DependsOn []struct {
		ID        string `json:"id"`
		OnFailure string `json:"on_failure"`
	} `json:"depends_on,omitempty"`
	State        string          `json:"state,omitempty"`
	Outcome      string          `json:"outcome,omitempty"`
	LastError    string          `json:"last_error,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBase64 string          `json:"result_base64,omitempty"`
	FinishedAt   *time.Time      `json:"finished_at,omitempty"`
}

// TaskList is one page of a queue's tasks in one state.
type TaskList struct {
	Tasks    []*Task `json:"tasks"`
	Page     int     `json:"page"`
	PageSize int     `json:"page_size"`
	// NextPage is the next page's number, 0 on the last page.
	NextPage int `json:"next_page,omitempty"`
}

// ListQuery selects a page of tasks: State (default pending), Group (for
// aggregating), Page from 1, PageSize up to 1000 (0: the service's
// default).
type ListQuery struct {
	State    string
	Group    string
	Page     int
	PageSize int
}

// Enqueued is the answer to an enqueue.
type Enqueued struct {
	ID            string     `json:"id"`
	Queue         string     `json:"queue"`
	Type          string     `json:"type"`
	State         string     `json:"state"`
	NextProcessAt *time.Time `json:"next_process_at,omitempty"`
}

// ScheduleRequest creates a schedule: Task enqueued into Queue at every
// tick of Cron.
type ScheduleRequest struct {
	Cron  string         `json:"cron"`
	Queue string         `json:"queue"`
	Task  model.TaskSpec `json:"task"`
}

// Rotated is the answer to a token rotation.
type Rotated struct {
	Token string `json:"token"`
	// PreviousValidUntil is when the replaced token stops being accepted;
	// nil when it stopped at once.
	PreviousValidUntil *time.Time `json:"previous_valid_until,omitempty"`
}

// Group is a group of a queue's aggregating tasks.
type Group struct {
	Group string `json:"group"`
	Size  int    `json:"size"`
}

// Queues lists every queue: GET /v1/queues.
func (c *Client) Queues(ctx context.Context) ([]*model.QueueView, error) {
	var out struct {
		Queues []*model.QueueView `json:"queues"`
	}
	if err := c.do(ctx, "GET", path("queues"), nil, nil, &out); err != nil {
		return nil, err
	}
	for _, q := range out.Queues {
		withRecord(q)
	}
	return out.Queues, nil
}

// withRecord gives a queue view without record fields an empty record, so
// that its fields can be read.
func withRecord(q *model.QueueView) *model.QueueView {
	if q.Queue == nil {
		q.Queue = &model.Queue{}
	}
	return q
}

// Queue returns one queue: GET /v1/queues/{queue}.
func (c *Client) Queue(ctx context.Context, name string) (*model.QueueView, error) {
	var out model.QueueView
	if err := c.do(ctx, "GET", path("queues", name), nil, nil, &out); err != nil {
		return nil, err
	}
	return withRecord(&out), nil
}

// UpdateQueue changes a queue's policies and settings: PATCH
// /v1/queues/{queue}.
func (c *Client) UpdateQueue(ctx context.Context, name string, change *model.QueueChange) (*model.QueueView, error) {
	var out model.QueueView
	if err := c.do(ctx, "PATCH", path("queues", name), nil, change, &out); err != nil {
		return nil, err
	}
	return withRecord(&out), nil
}

// DeleteQueue deletes a queue: DELETE /v1/queues/{queue}; with force its
// tasks go too.
func (c *Client) DeleteQueue(ctx context.Context, name string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return c.do(ctx, "DELETE", path("queues", name), q, nil, nil)
}

// PauseQueue pauses a queue: POST /v1/queues/{queue}/pause.
func (c *Client) PauseQueue(ctx context.Context, name string) error {
	return c.do(ctx, "POST", path("queues", name, "pause"), nil, nil, nil)
}

// ResumeQueue resumes a paused queue: POST /v1/queues/{queue}/resume.
func (c *Client) ResumeQueue(ctx context.Context, name string) error {
	return c.do(ctx, "POST", path("queues", name, "resume"), nil, nil, nil)
}

// Tasks lists a page of a queue's tasks: GET /v1/queues/{queue}/tasks.
func (c *Client) Tasks(ctx context.Context, queue string, lq ListQuery) (*TaskList, error) {
	q := url.Values{}
	if lq.State != "" {
		q.Set("state", lq.State)
	}
	if lq.Group != "" {
		q.Set("group", lq.Group)
	}
	if lq.Page > 0 {
		q.Set("page", strconv.Itoa(lq.Page))
	}
	if lq.PageSize > 0 {
		q.Set("page_size", strconv.Itoa(lq.PageSize))
	}
	var out TaskList
	if err := c.do(ctx, "GET", path("queues", queue, "tasks"), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Task returns one task: GET /v1/queues/{queue}/tasks/{id}.
func (c *Client) Task(ctx context.Context, queue, id string) (*Task, error) {
	var out Task
	if err := c.do(ctx, "GET", path("queues", queue, "tasks", id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TaskAction is what can be done to one task.
type TaskAction string

// The task actions.
const (
	ActionRun     TaskAction = "run"
	ActionArchive TaskAction = "archive"
	ActionDelete  TaskAction = "delete"
	ActionCancel  TaskAction = "cancel"
)

// Act runs, archives, deletes or cancels one task: POST
// /v1/queues/{queue}/tasks/{id}/{run,archive,cancel}, DELETE for delete.
func (c *Client) Act(ctx context.Context, action TaskAction, queue, id string) error {
	switch action {
	case ActionDelete:
		return c.do(ctx, "DELETE", path("queues", queue, "tasks", id), nil, nil, nil)
	case ActionRun, ActionArchive, ActionCancel:
		return c.do(ctx, "POST", path("queues", queue, "tasks", id, string(action)), nil, nil, nil)
	}
	return invalidf("task action %q: want run, archive, delete or cancel", action)
}

// Enqueue enqueues one task: POST /v1/queues/{queue}/tasks.
func (c *Client) Enqueue(ctx context.Context, queue string, spec *model.TaskSpec) (*Enqueued, error) {
	var out Enqueued
	if err := c.do(ctx, "POST", path("queues", queue, "tasks"), nil, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EnqueueWorkflow stores a workflow: POST /v1/workflows with body (the
// request as docs/api.md describes it, sent as is).
func (c *Client) EnqueueWorkflow(ctx context.Context, body json.RawMessage) (*Workflow, error) {
	var out Workflow
	if err := c.do(ctx, "POST", path("workflows"), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Workflow returns a workflow: GET /v1/workflows/{id}.
func (c *Client) Workflow(ctx context.Context, id string) (*Workflow, error) {
	var out Workflow
	if err := c.do(ctx, "GET", path("workflows", id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// CancelWorkflow cancels a workflow and returns how many tasks it
// archived: POST /v1/workflows/{id}/cancel.
func (c *Client) CancelWorkflow(ctx context.Context, id string) (int, error) {
	var out struct {
		Canceled int `json:"canceled"`
	}
	if err := c.do(ctx, "POST", path("workflows", id, "cancel"), nil, nil, &out); err != nil {
		return 0, err
	}
	return out.Canceled, nil
}

// Schedules lists the schedules with their run times: GET /v1/schedules.
func (c *Client) Schedules(ctx context.Context) ([]*model.ScheduleView, error) {
	var out struct {
		Schedules []*model.ScheduleView `json:"schedules"`
	}
	err := c.do(ctx, "GET", path("schedules"), nil, nil, &out)
	return out.Schedules, err
}

// CreateSchedule creates a schedule (or returns the same one made before):
// POST /v1/schedules.
func (c *Client) CreateSchedule(ctx context.Context, req *ScheduleRequest) (*model.Schedule, error) {
	var out model.Schedule
	if err := c.do(ctx, "POST", path("schedules"), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSchedule deletes a schedule: DELETE /v1/schedules/{id}.
func (c *Client) DeleteSchedule(ctx context.Context, id string) error {
	return c.do(ctx, "DELETE", path("schedules", id), nil, nil, nil)
}

// Groups lists a queue's groups of aggregating tasks: GET
// /v1/queues/{queue}/groups.
func (c *Client) Groups(ctx context.Context, queue string) ([]*Group, error) {
	var out struct {
		Groups []*Group `json:"groups"`
	}
	err := c.do(ctx, "GET", path("queues", queue, "groups"), nil, nil, &out)
	return out.Groups, err
}

// Key is one fair-sharing key of a queue with its pending and running
// tasks.
type Key struct {
	Key     string `json:"key"`
	Pending int    `json:"pending"`
	Active  int    `json:"active"`
}

// Keys lists a queue's fair-sharing keys that have pending or running
// tasks: GET /v1/queues/{queue}/keys.
func (c *Client) Keys(ctx context.Context, queue string) ([]*Key, error) {
	var out struct {
		Keys []*Key `json:"keys"`
	}
	err := c.do(ctx, "GET", path("queues", queue, "keys"), nil, nil, &out)
	return out.Keys, err
}

// RotateToken replaces the service's stored token; the one the client
// holds stays accepted for grace: POST /v1/token/rotate.
func (c *Client) RotateToken(ctx context.Context, grace time.Duration) (*Rotated, error) {
	var out Rotated
	body := map[string]string{"grace": grace.String()}
	if err := c.do(ctx, "POST", path("token", "rotate"), nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
