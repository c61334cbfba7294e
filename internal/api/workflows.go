package api

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// workflowRequest is the body of POST /v1/workflows.
type workflowRequest struct {
	// ID names the workflow (default a UUID; with an Idempotency-Key, one
	// derived from the key).
	ID string `json:"id,omitempty"`
	// Retention keeps the workflow's record this long after its last task
	// finished (default 24 h).
	Retention *model.Duration    `json:"retention,omitempty"`
	Tasks     []workflowTaskSpec `json:"tasks"`
}

// workflowTaskSpec is one task of a workflow: every field of an enqueue
// (model.TaskSpec) plus its ID within the workflow, its queue and its
// dependencies.
type workflowTaskSpec struct {
	ID                  string   `json:"id"`
	Queue               string   `json:"queue"`
	DependsOn           []string `json:"depends_on,omitempty"`
	OnDependencyFailure string   `json:"on_dependency_failure,omitempty"`
	model.TaskSpec
}

// workflowTaskJSON is one task of a workflow as the API shows it.
type workflowTaskJSON struct {
	ID           string           `json:"id"`
	Queue        string           `json:"queue"`
	TaskID       string           `json:"task_id"`
	DependsOn    []dependencyJSON `json:"depends_on,omitempty"`
	State        string           `json:"state,omitempty"`
	Outcome      string           `json:"outcome,omitempty"`
	LastError    string           `json:"last_error,omitempty"`
	Result       json.RawMessage  `json:"result,omitempty"`
	ResultBase64 string           `json:"result_base64,omitempty"`
	FinishedAt   *time.Time       `json:"finished_at,omitempty"`
}

type dependencyJSON struct {
	ID        string `json:"id"`
	OnFailure string `json:"on_failure"`
}

// workflowJSON is a workflow as the API shows it.
type workflowJSON struct {
	ID          string              `json:"id"`
	State       string              `json:"state"`
	CreatedAt   time.Time           `json:"created_at"`
	FinishedAt  *time.Time          `json:"finished_at,omitempty"`
	RetentionMS int64               `json:"retention_ms"`
	Tasks       []*workflowTaskJSON `json:"tasks"`
}

func newWorkflowJSON(wi *htq.WorkflowInfo) *workflowJSON {
	out := &workflowJSON{ID: wi.ID, State: string(wi.State), CreatedAt: wi.CreatedAt.UTC(), FinishedAt: timePtr(wi.FinishedAt),
		RetentionMS: wi.Retention.Milliseconds(), Tasks: make([]*workflowTaskJSON, len(wi.Tasks))}
	for i, t := range wi.Tasks {
		tj := &workflowTaskJSON{ID: t.ID, Queue: t.Queue, TaskID: t.TaskID, Outcome: t.Outcome.String(),
			LastError: t.LastErr, FinishedAt: timePtr(t.FinishedAt)}
		if t.State != 0 {
			tj.State = t.State.String()
		}
		for _, d := range t.DependsOn {
			tj.DependsOn = append(tj.DependsOn, dependencyJSON{ID: d.ID, OnFailure: d.OnFailure.String()})
		}
		if raw, ok := rawJSON(t.Result); ok {
			tj.Result = raw
		} else if len(t.Result) > 0 {
			tj.ResultBase64 = base64.StdEncoding.EncodeToString(t.Result)
		}
		out.Tasks[i] = tj
	}
	return out
}

// enqueueWorkflow: POST /v1/workflows stores a workflow whole or not at
// all. Every task is checked (against its queue's record too) and the
// graph validated before anything is written; an error names the task.
// With an Idempotency-Key (or an id) a repeat answers as the first did
// and stores nothing more.
func (h *handler) enqueueWorkflow(w http.ResponseWriter, r *http.Request) {
	key, err := idempotencyKey(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var req workflowRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	wf, queues, err := h.buildWorkflow(r, &req, key)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	ctx := r.Context()
	for _, q := range queues {
		if _, err := h.reg.Define(ctx, q, nil, model.DefineFirstTask); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	info, err := h.client.EnqueueWorkflow(ctx, wf)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, newWorkflowJSON(info))
}

// buildWorkflow turns a request into a checked workflow and the records
// of the queues it would create.
func (h *handler) buildWorkflow(r *http.Request, req *workflowRequest, key string) (*htq.Workflow, []*model.Queue, error) {
	switch {
	case len(req.Tasks) == 0:
		return nil, nil, invalid("tasks is empty")
	case len(req.Tasks) > base.MaxWorkflowTasks:
		return nil, nil, invalid(fmt.Sprintf("%d tasks in one workflow; the limit is %d", len(req.Tasks), base.MaxWorkflowTasks))
	case key != "" && req.ID != "":
		return nil, nil, invalid(fmt.Sprintf("id %q and an %s header: give one or the other", req.ID, IdempotencyKeyHeader))
	}
	var wopts []htq.WorkflowOption
	id := req.ID
	if key != "" {
		id = idempotentID(key, "", -2) // the workflow's own ID, not a queue's task
	}
	if id != "" {
		wopts = append(wopts, htq.WorkflowID(id))
	}
	if req.Retention != nil {
		wopts = append(wopts, htq.WorkflowRetention(time.Duration(*req.Retention)))
	}
	wf := htq.NewWorkflow(wopts...)
	ctx := r.Context()
	records := make(map[string]*model.Queue)
	var created []*model.Queue
	for i := range req.Tasks {
		t := &req.Tasks[i]
		fail := func(err error) error {
			return &base.WorkflowError{Err: err, Tasks: []string{t.ID}, Detail: fmt.Sprintf("task %q (tasks[%d])", t.ID, i)}
		}
		switch {
		case t.ID == "":
			return nil, nil, invalid(fmt.Sprintf("tasks[%d]: id is empty", i))
		case t.Queue == "":
			return nil, nil, fail(invalid("queue is empty"))
		}
		if err := t.CheckKind(); err != nil {
			return nil, nil, fail(err)
		}
		// A workflow given an ID may be sent again: each repeat must
		// build the same tasks.
		t.Idempotent = id != ""
		q := records[t.Queue]
		if q == nil {
			rec, isNew, err := h.reg.Resolve(ctx, t.Queue, t.Mode())
			if err != nil {
				return nil, nil, fail(err)
			}
			if isNew {
				created = append(created, rec)
			}
			records[t.Queue], q = rec, rec
		}
		task, opts, err := h.reg.Build(ctx, &t.TaskSpec, q)
		if err != nil {
			return nil, nil, fail(err)
		}
		opts = append(opts, htq.Queue(t.Queue))
		if len(t.DependsOn) > 0 {
			opts = append(opts, htq.DependsOn(t.DependsOn...))
		}
		switch t.OnDependencyFailure {
		case "", "cancel":
		case "run":
			if len(t.DependsOn) == 0 {
				return nil, nil, fail(invalid("on_dependency_failure is set but depends_on is empty"))
			}
			opts = append(opts, htq.OnDependencyFailure(htq.RunAnyway))
		default:
			return nil, nil, fail(invalid(fmt.Sprintf("on_dependency_failure %q is not \"cancel\" or \"run\"", t.OnDependencyFailure)))
		}
		wf.Add(t.ID, task, opts...)
	}
	if err := wf.Validate(); err != nil {
		return nil, nil, err
	}
	return wf, created, nil
}

// getWorkflow: GET /v1/workflows/{id}.
func (h *handler) getWorkflow(w http.ResponseWriter, r *http.Request) {
	wi, err := h.inspector.GetWorkflow(r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, newWorkflowJSON(wi))
}

// cancelWorkflow: POST /v1/workflows/{id}/cancel.
func (h *handler) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	n, err := h.inspector.CancelWorkflow(r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int{"canceled": n})
}

// errorTasks returns the workflow tasks an error names, if any.
func errorTasks(err error) []string {
	var we *base.WorkflowError
	if errors.As(err, &we) {
		return we.Tasks
	}
	return nil
}
