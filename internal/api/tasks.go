package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// MaxBatch is the most tasks one batch enqueue takes.
const MaxBatch = 10000

// enqueueResponse is the answer to an enqueue.
type enqueueResponse struct {
	ID            string     `json:"id"`
	Queue         string     `json:"queue"`
	Type          string     `json:"type"`
	State         string     `json:"state"`
	NextProcessAt *time.Time `json:"next_process_at,omitempty"`
}

// writeEnqueued answers an enqueue: status and the enqueueResponse of
// info, written without encoding/json's reflection (the bytes are those
// writeJSON writes: TestWriteEnqueued).
func writeEnqueued(w http.ResponseWriter, status int, info *htq.TaskInfo) {
	at := info.NextProcessAt.UTC()
	if !info.NextProcessAt.IsZero() && (at.Year() < 0 || at.Year() > 9999) {
		writeJSON(w, status, newEnqueueResponse(info)) // a time encoding/json refuses: its error answer
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.Reset()
	b := append(buf.AvailableBuffer(), `{"id":`...)
	b = model.AppendString(b, info.ID)
	b = append(b, `,"queue":`...)
	b = model.AppendString(b, info.Queue)
	b = append(b, `,"type":`...)
	b = model.AppendString(b, info.Type)
	b = append(b, `,"state":`...)
	b = model.AppendString(b, info.State.String())
	if !info.NextProcessAt.IsZero() {
		b = append(b, `,"next_process_at":"`...)
		b = at.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, "}\n"...)
	writeBody(w, status, b)
	if n := cap(b); n > buf.Cap() {
		buf.Grow(n) // the next answer starts with what this one needed
	}
}

func newEnqueueResponse(info *htq.TaskInfo) enqueueResponse {
	r := enqueueResponse{ID: info.ID, Queue: info.Queue, Type: info.Type, State: info.State.String()}
	if !info.NextProcessAt.IsZero() {
		t := info.NextProcessAt.UTC()
		r.NextProcessAt = &t
	}
	return r
}

// enqueue: POST /v1/queues/{queue}/tasks. With an Idempotency-Key the
// task's ID is derived from the key, so a repeat answers as the first did
// (201, the same ID) and stores nothing more.
func (h *handler) enqueue(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var spec model.TaskSpec
	if err := h.decodeBody(w, r, &spec, func(b []byte) bool {
		if model.DecodeSpec(b, &spec) {
			return true
		}
		spec = model.TaskSpec{} // what DecodeSpec left is unspecified: encoding/json starts afresh
		return false
	}); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := spec.CheckKind(); err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	name := r.PathValue("queue")
	if key != "" {
		if err := keyTask(&spec, key, name, -1); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	task, opts, _, err := h.reg.Prepare(ctx, name, &spec)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	info, err := h.client.EnqueueContext(model.EnqueueContext(ctx), task, append(opts, htq.Queue(name))...)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeEnqueued(w, http.StatusCreated, info)
}

type batchRequest struct {
	Tasks []model.TaskSpec `json:"tasks"`
}

// batchItem is one task's result: what was stored, or the error.
type batchItem struct {
	ID            string       `json:"id,omitempty"`
	Queue         string       `json:"queue,omitempty"`
	Type          string       `json:"type,omitempty"`
	State         string       `json:"state,omitempty"`
	NextProcessAt *time.Time   `json:"next_process_at,omitempty"`
	Error         *errorDetail `json:"error,omitempty"`
}

type batchResponse struct {
	Enqueued int         `json:"enqueued"`
	Failed   int         `json:"failed"`
	Results  []batchItem `json:"results"`
}

// enqueueBatch: POST /v1/queues/{queue}/tasks/batch. Every task is
// checked before any is written: one bad task refuses the batch with
// nothing written. Past that each task is stored on its own; the answer
// has one result per task, in order. With an Idempotency-Key each task's
// ID is derived from the key and its index.
func (h *handler) enqueueBatch(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var req batchRequest
	if err := h.decodeBody(w, r, &req, func(b []byte) bool { return model.DecodeSpecs(b, &req.Tasks) }); err != nil {
		h.writeError(w, r, err)
		return
	}
	if len(req.Tasks) == 0 {
		h.writeError(w, r, invalid("tasks is empty"))
		return
	}
	if len(req.Tasks) > MaxBatch {
		h.writeError(w, r, invalid(fmt.Sprintf("%d tasks in one batch; the limit is %d", len(req.Tasks), MaxBatch)))
		return
	}
	ctx := r.Context()
	name := r.PathValue("queue")
	for i := range req.Tasks {
		if err := req.Tasks[i].CheckKind(); err != nil {
			h.writeError(w, r, fmt.Errorf("task %d: %w", i, err))
			return
		}
		if key != "" {
			if err := keyTask(&req.Tasks[i], key, name, i); err != nil {
				h.writeError(w, r, fmt.Errorf("task %d: %w", i, err))
				return
			}
		}
	}
	q, isNew, err := h.reg.Resolve(ctx, name, req.Tasks[0].Mode())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	tasks := make([]*htq.Task, len(req.Tasks))
	for i := range req.Tasks {
		task, opts, err := h.reg.Build(ctx, &req.Tasks[i], q)
		if err != nil {
			h.writeError(w, r, fmt.Errorf("task %d: %w", i, err))
			return
		}
		if len(opts) > 0 {
			// Per-task options become the task's own; the queue comes
			// from the call.
			task = htq.NewTask(task.Type(), task.Payload(), opts...)
		}
		tasks[i] = task
	}
	if isNew {
		if _, err := h.reg.Define(ctx, q, nil, model.DefineFirstTask); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	infos, err := h.client.EnqueueBatch(model.EnqueueContext(ctx), tasks, htq.Queue(name))
	var batchErr *htq.BatchError
	if err != nil && !errors.As(err, &batchErr) {
		h.writeError(w, r, err)
		return
	}
	resp := batchResponse{Results: make([]batchItem, len(tasks))}
	unavailable := 0 // tasks that failed because the storage was unavailable
	for i, info := range infos {
		if info != nil {
			er := newEnqueueResponse(info)
			resp.Results[i] = batchItem{ID: er.ID, Queue: er.Queue, Type: er.Type, State: er.State, NextProcessAt: er.NextProcessAt}
			resp.Enqueued++
			continue
		}
		var itemErr error = errors.New("not enqueued")
		if batchErr != nil && i < len(batchErr.Errs) && batchErr.Errs[i] != nil {
			itemErr = batchErr.Errs[i]
		}
		resp.Results[i].Error = itemError(itemErr)
		resp.Failed++
		if errors.Is(itemErr, htq.ErrUnavailable) {
			unavailable++
		}
	}
	if unavailable == len(tasks) {
		// The storage is down: the batch as a whole is a 503.
		h.writeError(w, r, batchErr.Errs[0])
		return
	}
	status := http.StatusCreated
	if resp.Failed > 0 {
		status = http.StatusMultiStatus
	}
	if unavailable > 0 {
		w.Header().Set("Retry-After", RetryAfter)
	}
	writeJSON(w, status, resp)
}

// taskJSON is a task as the API shows it.
type taskJSON struct {
	ID            string          `json:"id"`
	Queue         string          `json:"queue"`
	Type          string          `json:"type"`
	State         string          `json:"state"`
	Payload       json.RawMessage `json:"payload"` // see payloadJSON
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
	// Callbacks are a URL task's callbacks, in GET of one task only.
	Callbacks []callbackJSON `json:"callbacks,omitempty"`
}

// callbackJSON is one of a URL task's callbacks as GET of the task shows
// it: the URL (credentials hidden) and the task that makes (or made) its
// request, while that task is kept.
type callbackJSON struct {
	Kind   string            `json:"kind"`
	URL    string            `json:"url"`
	TaskID string            `json:"task_id"`
	Task   *callbackTaskJSON `json:"task,omitempty"`
}

// callbackTaskJSON is the state of a callback's task.
type callbackTaskJSON struct {
	State       string     `json:"state"`
	Retried     int        `json:"retried"`
	MaxRetry    int        `json:"max_retry"`
	LastError   string     `json:"last_error,omitempty"`
	CompletedAt *time.Time `json:"completed_at,omitempty"`
}

// payloadJSON is how a task's payload is shown: as JSON when it is valid
// JSON, else as base64 with payload null. payload is always present (null
// for an empty payload), so that a worker can read it without checking.
func payloadJSON(payload []byte) (json.RawMessage, string) {
	if raw, ok := rawJSON(payload); ok {
		return raw, ""
	}
	if len(payload) > 0 {
		return nil, base64.StdEncoding.EncodeToString(payload)
	}
	return nil, ""
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func newTaskJSON(info *htq.TaskInfo) *taskJSON {
	t := &taskJSON{
		ID: info.ID, Queue: info.Queue, Type: info.Type, State: info.State.String(),
		MaxRetry: info.MaxRetry, Retried: info.Retried, LastError: info.LastErr,
		LastFailedAt: timePtr(info.LastFailedAt), TimeoutMS: info.Timeout.Milliseconds(),
		Deadline: timePtr(info.Deadline), Group: info.Group, NextProcessAt: timePtr(info.NextProcessAt),
		IsOrphaned: info.IsOrphaned, RetentionMS: info.Retention.Milliseconds(), CompletedAt: timePtr(info.CompletedAt),
		Priority: info.Priority, Key: info.Key,
		Workflow: info.Workflow, WorkflowTask: info.WorkflowTask,
	}
	payload := info.Payload
	if info.Type == model.TypeURL {
		payload = model.WithoutProcessAt(payload)
	}
	t.Payload, t.PayloadBase64 = payloadJSON(payload)
	if raw, ok := rawJSON(info.Result); ok {
		t.Result = raw
	} else if len(info.Result) > 0 {
		t.ResultBase64 = base64.StdEncoding.EncodeToString(info.Result)
	}
	return t
}

// taskView is a task as the API shows it: newTaskJSON, with a URL task's
// timeout_ms the timeout that bounds its next attempt (its request
// timeout from the task, its queue or the service; shorter when the task's
// own timeout option is).
func (h *handler) taskView(ctx context.Context, info *htq.TaskInfo) *taskJSON {
	t := newTaskJSON(info)
	if info.Type != model.TypeURL {
		return t
	}
	ut, err := model.DecodeURLTask(info.Payload)
	if err != nil {
		return t
	}
	q, err := h.queues.Get(ctx, info.Queue)
	if err != nil {
		q = nil // no record (any more): the service's default applies
	}
	t.TimeoutMS = ut.AttemptTimeout(info.Timeout, q, h.reg.Defaults()).Milliseconds()
	return t
}

// getTask: GET /v1/queues/{queue}/tasks/{id}.
func (h *handler) getTask(w http.ResponseWriter, r *http.Request) {
	info, err := h.inspector.GetTaskInfo(r.PathValue("queue"), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	t := h.taskView(r.Context(), info)
	if t.Callbacks, err = h.callbacks(info); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

// callbacks are the callbacks of a URL task (none for another task): each
// URL set at enqueue, redacted as storage URLs are (base.RedactURL), with
// the ID of the task that makes its request (model.CallbackTaskID) and
// that task's state while it is kept. The task is stored when the outcome
// it reports is written, so there is none before; after its retention
// there is none again.
func (h *handler) callbacks(info *htq.TaskInfo) ([]callbackJSON, error) {
	if info.Type != model.TypeURL {
		return nil, nil
	}
	ut, err := model.DecodeURLTask(info.Payload)
	if err != nil {
		return nil, nil // shown as the payload it is; nothing to add
	}
	var out []callbackJSON
	for _, cb := range []struct{ kind, url string }{{model.CallbackSuccess, ut.Callback}, {model.CallbackFailure, ut.FailureCallback}} {
		if cb.url == "" {
			continue
		}
		c := callbackJSON{Kind: cb.kind, URL: base.RedactURL(cb.url), TaskID: model.CallbackTaskID(info.ID, cb.kind)}
		ct, err := h.inspector.GetTaskInfo(info.Queue, c.TaskID)
		switch {
		case err == nil:
			c.Task = &callbackTaskJSON{State: ct.State.String(), Retried: ct.Retried, MaxRetry: ct.MaxRetry,
				LastError: ct.LastErr, CompletedAt: timePtr(ct.CompletedAt)}
		case !errors.Is(err, htq.ErrTaskNotFound):
			return nil, fmt.Errorf("task %s: its %s's task: %w", info.ID, cb.kind, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// MaxPageSize bounds page_size in listings.
const MaxPageSize = 1000

type taskList struct {
	Tasks    []*taskJSON `json:"tasks"`
	Page     int         `json:"page"`
	PageSize int         `json:"page_size"`
	// NextPage is the next page's number, 0 on the last page.
	NextPage int `json:"next_page,omitempty"`
}

// listTasks: GET /v1/queues/{queue}/tasks?state=&page=&page_size=&group=.
func (h *handler) listTasks(w http.ResponseWriter, r *http.Request) {
	qv := r.URL.Query()
	queue := r.PathValue("queue")
	page, err := intParam(qv.Get("page"), "page", 1, 1, 1<<30)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	size, err := intParam(qv.Get("page_size"), "page_size", 30, 1, MaxPageSize)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	stateName := qv.Get("state")
	if stateName == "" {
		stateName = "pending"
	}
	state, err := base.ParseState(stateName)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	group := qv.Get("group")
	if state == base.StateAggregating && group == "" {
		h.writeError(w, r, invalid("state=aggregating needs a group parameter"))
		return
	}
	if _, err := h.inspector.GetQueueInfo(queue); err != nil {
		h.writeError(w, r, err)
		return
	}
	opts := []htq.ListOption{htq.Page(page), htq.PageSize(size)}
	var infos []*htq.TaskInfo
	switch state {
	case base.StateActive:
		infos, err = h.inspector.ListActiveTasks(queue, opts...)
	case base.StatePending:
		infos, err = h.inspector.ListPendingTasks(queue, opts...)
	case base.StateScheduled:
		infos, err = h.inspector.ListScheduledTasks(queue, opts...)
	case base.StateRetry:
		infos, err = h.inspector.ListRetryTasks(queue, opts...)
	case base.StateArchived:
		infos, err = h.inspector.ListArchivedTasks(queue, opts...)
	case base.StateCompleted:
		infos, err = h.inspector.ListCompletedTasks(queue, opts...)
	case base.StateAggregating:
		infos, err = h.inspector.ListAggregatingTasks(queue, group, opts...)
	case base.StateWaiting:
		infos, err = h.inspector.ListWaitingTasks(queue, opts...)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := taskList{Tasks: make([]*taskJSON, len(infos)), Page: page, PageSize: size}
	for i, info := range infos {
		out.Tasks[i] = h.taskView(r.Context(), info)
	}
	if len(infos) == size {
		out.NextPage = page + 1
	}
	writeJSON(w, http.StatusOK, out)
}

func intParam(s, name string, def, lo, hi int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, invalid(fmt.Sprintf("%s %q: want a whole number from %d to %d", name, s, lo, hi))
	}
	return n, nil
}

// deleteTask: DELETE /v1/queues/{queue}/tasks/{id}.
func (h *handler) deleteTask(w http.ResponseWriter, r *http.Request) {
	h.noContent(w, r, h.inspector.DeleteTask(r.PathValue("queue"), r.PathValue("id")))
}

// runTask: POST /v1/queues/{queue}/tasks/{id}/run.
func (h *handler) runTask(w http.ResponseWriter, r *http.Request) {
	h.noContent(w, r, h.inspector.RunTask(r.PathValue("queue"), r.PathValue("id")))
}

// archiveTask: POST /v1/queues/{queue}/tasks/{id}/archive.
func (h *handler) archiveTask(w http.ResponseWriter, r *http.Request) {
	h.noContent(w, r, h.inspector.ArchiveTask(r.PathValue("queue"), r.PathValue("id")))
}

// cancelTask: POST /v1/queues/{queue}/tasks/{id}/cancel asks whoever runs
// the active task to stop it (202: the worker decides the outcome).
func (h *handler) cancelTask(w http.ResponseWriter, r *http.Request) {
	queue, id := r.PathValue("queue"), r.PathValue("id")
	info, err := h.inspector.GetTaskInfo(queue, id)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if info.State != htq.TaskStateActive {
		h.writeError(w, r, fmt.Errorf("%w: task %s/%s is %s; only an active task can be canceled (delete or archive it instead)", htq.ErrWrongState, queue, id, info.State))
		return
	}
	if err := h.inspector.CancelProcessing(id); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// noContent answers 204 or the error.
func (h *handler) noContent(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
