package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/queuemeta"
)

// MaxBatch is the most tasks one batch enqueue takes.
const MaxBatch = 10000

// TaskSpec is a task as a client sends it: a typed task (Type with Payload
// or PayloadBase64) or a URL task (URL, Method, Headers, Body or
// BodyBase64, TimeoutMS), with its options.
type TaskSpec struct {
	Type          string          `json:"type,omitempty"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 string          `json:"payload_base64,omitempty"`

	URL        string              `json:"url,omitempty"`
	Method     string              `json:"method,omitempty"`
	Headers    map[string]string   `json:"headers,omitempty"`
	Body       *string             `json:"body,omitempty"`
	BodyBase64 string              `json:"body_base64,omitempty"`
	TimeoutMS  int64               `json:"timeout_ms,omitempty"`
	Variable   *queuemeta.Variable `json:"variable,omitempty"`

	Options *TaskOptions `json:"options,omitempty"`
}

// TaskOptions are the core options of a task (htq's Option functions).
type TaskOptions struct {
	// Delay makes the task wait (ProcessIn); ProcessAt makes it wait
	// until a time. Set one at most.
	Delay     *Duration  `json:"delay,omitempty"`
	ProcessAt *time.Time `json:"process_at,omitempty"`
	MaxRetry  *int       `json:"max_retry,omitempty"`
	Timeout   *Duration  `json:"timeout,omitempty"`
	Deadline  *time.Time `json:"deadline,omitempty"`
	// Unique is the TTL of the uniqueness lock (at least 1s).
	Unique    *Duration `json:"unique,omitempty"`
	TaskID    string    `json:"task_id,omitempty"`
	Retention *Duration `json:"retention,omitempty"`
	Group     string    `json:"group,omitempty"`
}

// isURL reports whether the spec is a URL task.
func (s *TaskSpec) isURL() bool { return s.URL != "" }

// kindMode is the queue mode a task of this kind fixes on a queue that has
// none yet.
func (s *TaskSpec) kindMode() queuemeta.Mode {
	switch {
	case !s.isURL():
		return queuemeta.ModePull
	case s.Variable != nil:
		return queuemeta.ModeVariable
	default:
		return queuemeta.ModeRealTime
	}
}

// checkKind refuses a spec that mixes the two kinds or is neither.
func (s *TaskSpec) checkKind() error {
	typed := s.Type != "" || len(s.Payload) > 0 || s.PayloadBase64 != ""
	url := s.URL != "" || s.Method != "" || s.Headers != nil || s.Body != nil || s.BodyBase64 != "" || s.TimeoutMS != 0 || s.Variable != nil
	switch {
	case typed && url:
		return invalid("a task is either typed (type, payload) or a URL task (url, method, headers, body), not both")
	case !typed && !url:
		return invalid("a task needs a type (typed task) or a url (URL task)")
	case url && s.URL == "":
		return invalid("URL task: url is empty")
	case typed && s.Type == "":
		return invalid("typed task: type is empty")
	case len(s.Payload) > 0 && s.PayloadBase64 != "":
		return invalid("set payload or payload_base64, not both")
	}
	return nil
}

// dueTime is when a task with these options is due, when they make it
// wait: process_at, or now plus a positive delay.
func (o *TaskOptions) dueTime() (time.Time, bool) {
	switch {
	case o == nil:
		return time.Time{}, false
	case o.ProcessAt != nil:
		return *o.ProcessAt, true
	case o.Delay != nil && *o.Delay > 0:
		return time.Now().Add(time.Duration(*o.Delay)), true
	}
	return time.Time{}, false
}

// options converts the options (without the queue) to htq's.
func (o *TaskOptions) options(dst []htq.Option) ([]htq.Option, error) {
	if o == nil {
		return dst, nil
	}
	if o.Delay != nil && o.ProcessAt != nil {
		return nil, invalid("options: set delay or process_at, not both")
	}
	if o.Delay != nil {
		dst = append(dst, htq.ProcessIn(time.Duration(*o.Delay)))
	}
	if o.ProcessAt != nil {
		dst = append(dst, htq.ProcessAt(*o.ProcessAt))
	}
	if o.MaxRetry != nil {
		dst = append(dst, htq.MaxRetry(*o.MaxRetry))
	}
	if o.Timeout != nil {
		dst = append(dst, htq.Timeout(time.Duration(*o.Timeout)))
	}
	if o.Deadline != nil {
		dst = append(dst, htq.Deadline(*o.Deadline))
	}
	if o.Unique != nil {
		dst = append(dst, htq.Unique(time.Duration(*o.Unique)))
	}
	if o.TaskID != "" {
		dst = append(dst, htq.TaskID(o.TaskID))
	}
	if o.Retention != nil {
		dst = append(dst, htq.Retention(time.Duration(*o.Retention)))
	}
	if o.Group != "" {
		dst = append(dst, htq.Group(o.Group))
	}
	return dst, nil
}

// build turns a spec into an htq task with its options (the queue option
// not included), checked against the queue's record and, for a URL task,
// the target guard.
func (h *handler) build(ctx context.Context, s *TaskSpec, q *queuemeta.Queue) (*htq.Task, []htq.Option, error) {
	task, opts, ut, err := buildTask(s, q)
	if err != nil {
		return nil, nil, err
	}
	if ut != nil && h.opts.CheckTarget != nil {
		u, _ := url.Parse(ut.URL) // Validate parsed it already
		if err := h.opts.CheckTarget(ctx, u); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errTargetNotAllowed, err)
		}
	}
	return task, opts, nil
}

// buildTask turns a spec into an htq task with its options (the queue
// option not included), checked against the queue's record. For a URL
// task it also returns the URLTask it made.
func buildTask(s *TaskSpec, q *queuemeta.Queue) (*htq.Task, []htq.Option, *queuemeta.URLTask, error) {
	if err := s.checkKind(); err != nil {
		return nil, nil, nil, err
	}
	opts, err := s.Options.options(nil)
	if err != nil {
		return nil, nil, nil, err
	}
	if !s.isURL() {
		if q.Mode != queuemeta.ModePull {
			return nil, nil, nil, fmt.Errorf("%w: queue %s is a %s queue: it takes URL tasks, not typed tasks", queuemeta.ErrModeMismatch, q.Name, q.Mode)
		}
		payload := []byte(s.Payload)
		if s.PayloadBase64 != "" {
			if payload, err = base64.StdEncoding.DecodeString(s.PayloadBase64); err != nil {
				return nil, nil, nil, invalid("payload_base64: " + err.Error())
			}
		}
		return htq.NewTask(s.Type, payload), opts, nil, nil
	}
	if !q.Mode.IsURL() {
		return nil, nil, nil, fmt.Errorf("%w: queue %s is a pull queue: it takes typed tasks, not URL tasks", queuemeta.ErrModeMismatch, q.Name)
	}
	ut := &queuemeta.URLTask{URL: s.URL, Method: strings.ToUpper(s.Method), Headers: s.Headers,
		BodyBase64: s.BodyBase64, TimeoutMS: s.TimeoutMS, Variable: s.Variable}
	if ut.Method == "" {
		ut.Method = http.MethodPost
	}
	if s.Body != nil {
		ut.Body = *s.Body
	}
	switch {
	case q.Mode == queuemeta.ModeVariable && ut.Variable == nil:
		ut.Variable = &queuemeta.Variable{}
	case q.Mode != queuemeta.ModeVariable && ut.Variable != nil:
		return nil, nil, nil, invalid(fmt.Sprintf("URL task: variable applies to tasks of variable queues; queue %s is %s", q.Name, q.Mode))
	}
	if ut.Variable != nil && (ut.Variable.IntervalS < 0 || ut.Variable.IntervalS > float64(queuemeta.MaxIntervalLimit)) {
		return nil, nil, nil, invalid(fmt.Sprintf("URL task: variable.interval_s %v is out of range", ut.Variable.IntervalS))
	}
	if _, err := ut.Validate(); err != nil {
		return nil, nil, nil, err
	}
	if n, ok := q.MaxRetry(); ok && (s.Options == nil || s.Options.MaxRetry == nil) {
		opts = append([]htq.Option{htq.MaxRetry(n)}, opts...)
	}
	payload, err := ut.Encode()
	if err != nil {
		return nil, nil, nil, err
	}
	if due, ok := s.Options.dueTime(); ok {
		payload = WithDueTime(payload, due)
	}
	return htq.NewTask(queuemeta.TypeURL, payload), opts, ut, nil
}

// resolveQueue returns the record of the queue a task of mode's kind goes
// to. A queue without a record gets a provisional one of that mode, and
// isNew is true: the caller checks its tasks against it and then defines
// the queue with defineQueue, so a refused task leaves no queue behind.
func (h *handler) resolveQueue(ctx context.Context, name string, mode queuemeta.Mode) (q *queuemeta.Queue, isNew bool, err error) {
	if err := base.ValidateQueueName(name); err != nil {
		return nil, false, err
	}
	q, err = h.queues.Get(ctx, name)
	switch {
	case err == nil:
		return q, false, nil
	case errors.Is(err, base.ErrQueueNotFound):
		return queuemeta.New(name, mode, time.Now()), true, nil
	default:
		return nil, false, err
	}
}

// defineQueue stores the record of a queue that had none and gives it its
// storage settings. When another call defined it meanwhile with another
// mode, it fails with ErrModeMismatch.
func (h *handler) defineQueue(ctx context.Context, q *queuemeta.Queue) error {
	got, created, err := h.queues.Ensure(ctx, q.Name, q.Mode, q.CreatedAt)
	if err != nil {
		return err
	}
	if created {
		return h.setUpNewQueue(ctx, got, nil)
	}
	return nil
}

// prepare resolves the queue of a task, builds the task and, when the
// queue had no record, defines it.
func (h *handler) prepare(ctx context.Context, name string, spec *TaskSpec) (*htq.Task, []htq.Option, *queuemeta.Queue, error) {
	q, isNew, err := h.resolveQueue(ctx, name, spec.kindMode())
	if err != nil {
		return nil, nil, nil, err
	}
	task, opts, err := h.build(ctx, spec, q)
	if err != nil {
		return nil, nil, nil, err
	}
	if isNew {
		if err := h.defineQueue(ctx, q); err != nil {
			return nil, nil, nil, err
		}
	}
	return task, opts, q, nil
}

// enqueueResponse is the answer to an enqueue.
type enqueueResponse struct {
	ID            string     `json:"id"`
	Queue         string     `json:"queue"`
	Type          string     `json:"type"`
	State         string     `json:"state"`
	NextProcessAt *time.Time `json:"next_process_at,omitempty"`
}

func newEnqueueResponse(info *htq.TaskInfo) enqueueResponse {
	r := enqueueResponse{ID: info.ID, Queue: info.Queue, Type: info.Type, State: info.State.String()}
	if !info.NextProcessAt.IsZero() {
		t := info.NextProcessAt.UTC()
		r.NextProcessAt = &t
	}
	return r
}

// enqueue: POST /v1/queues/{queue}/tasks.
func (h *handler) enqueue(w http.ResponseWriter, r *http.Request) {
	var spec TaskSpec
	if err := h.decodeJSON(w, r, &spec); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := spec.checkKind(); err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	name := r.PathValue("queue")
	task, opts, _, err := h.prepare(ctx, name, &spec)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	info, err := h.client.EnqueueContext(ctx, task, append(opts, htq.Queue(name))...)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, newEnqueueResponse(info))
}

type batchRequest struct {
	Tasks []TaskSpec `json:"tasks"`
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
// has one result per task, in order.
func (h *handler) enqueueBatch(w http.ResponseWriter, r *http.Request) {
	var req batchRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
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
		if err := req.Tasks[i].checkKind(); err != nil {
			h.writeError(w, r, fmt.Errorf("task %d: %w", i, err))
			return
		}
	}
	q, isNew, err := h.resolveQueue(ctx, name, req.Tasks[0].kindMode())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	tasks := make([]*htq.Task, len(req.Tasks))
	for i := range req.Tasks {
		task, opts, err := h.build(ctx, &req.Tasks[i], q)
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
		if err := h.defineQueue(ctx, q); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	infos, err := h.client.EnqueueBatch(ctx, tasks, htq.Queue(name))
	var batchErr *htq.BatchError
	if err != nil && !errors.As(err, &batchErr) {
		h.writeError(w, r, err)
		return
	}
	resp := batchResponse{Results: make([]batchItem, len(tasks))}
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
	}
	status := http.StatusCreated
	if resp.Failed > 0 {
		status = http.StatusMultiStatus
	}
	writeJSON(w, status, resp)
}

// taskJSON is a task as the API shows it.
type taskJSON struct {
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
	NextProcessAt *time.Time      `json:"next_process_at,omitempty"`
	IsOrphaned    bool            `json:"is_orphaned,omitempty"`
	RetentionMS   int64           `json:"retention_ms,omitempty"`
	CompletedAt   *time.Time      `json:"completed_at,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	ResultBase64  string          `json:"result_base64,omitempty"`
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
	}
	payload := info.Payload
	if info.Type == queuemeta.TypeURL {
		payload = WithoutDueTime(payload)
	}
	if raw, ok := rawJSON(payload); ok {
		t.Payload = raw
	} else if len(payload) > 0 {
		t.PayloadBase64 = base64.StdEncoding.EncodeToString(payload)
	}
	if raw, ok := rawJSON(info.Result); ok {
		t.Result = raw
	} else if len(info.Result) > 0 {
		t.ResultBase64 = base64.StdEncoding.EncodeToString(info.Result)
	}
	return t
}

// getTask: GET /v1/queues/{queue}/tasks/{id}.
func (h *handler) getTask(w http.ResponseWriter, r *http.Request) {
	info, err := h.inspector.GetTaskInfo(r.PathValue("queue"), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newTaskJSON(info))
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
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := taskList{Tasks: make([]*taskJSON, len(infos)), Page: page, PageSize: size}
	for i, info := range infos {
		out.Tasks[i] = newTaskJSON(info)
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
