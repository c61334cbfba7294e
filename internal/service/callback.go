package service

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/internal/model"
)

// A URL task's callbacks (options.callback and options.failure_callback)
// are URL tasks of their own, in the same queue, so that they are signed,
// guarded, timed out and retried as every request htq makes. The URL
// handler stores a callback's task before the outcome of the attempt it
// reports is written, under an ID derived from the reported task's: when
// htq stops between the two (a crash, a kill, a lost lease), the task is
// run again or recovered, and storing its callback again finds that ID
// taken, so the callback is made once and never lost. A failed attempt
// whose worker died is reported by the URL worker's BeforeArchiveLost
// (lostCallback), which the Recoverer calls before it archives the task
// and whose error keeps the task.

// CallbackBody is the JSON body of a callback's request.
type CallbackBody struct {
	// TaskID and Queue name the task reported on.
	TaskID string `json:"task_id"`
	Queue  string `json:"queue"`
	// State is "completed" (the callback) or "archived" (the failure
	// callback).
	State string `json:"state"`
	// Status is the status code of the target's last answer; 0 when the
	// last attempt got none (a timeout, a refused connection, a lost
	// worker).
	Status int `json:"status"`
	// Body is that answer's body (as much as htq keeps of it, see
	// Truncated) as text, or BodyBase64 when it is not UTF-8.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
	Truncated  bool   `json:"truncated"`
	// Attempts is how many attempts were made, the last included.
	Attempts int `json:"attempts"`
	// Error is the last attempt's error (failure callback only).
	Error string `json:"error,omitempty"`
}

// errCallbackNotStored marks an attempt whose callback could not be
// stored: the task is tried again without using up a retry (the URL
// worker's IsFailure), so that its outcome is never written without its
// callback.
var errCallbackNotStored = errors.New("callback not stored")

// isFailure is the URL worker's Config.IsFailure.
func isFailure(err error) bool { return !errors.Is(err, errCallbackNotStored) }

// minCallbackRetention is the least time a callback's task is kept after
// it completes: it holds the callback's ID against a repeated report, as
// variableRunRetention does for the runs of a variable task.
const minCallbackRetention = 10 * time.Minute

// callback stores the task that makes the callback of kind about task id
// of queue q (payload p), after attempts attempts ending with res (nil:
// no answer) and failure (nil for a success). The callback's task keeps
// the reported task's MaxRetry and is kept at least minCallbackRetention.
// A task already stored under the callback's ID (by an earlier run of the
// same report) counts as stored. The error wraps errCallbackNotStored.
func (x *urlHandler) callback(ctx context.Context, q *model.Queue, id string, p *model.URLTask, kind string,
	attempts, maxRetry int, res *dispatch.Result, failure error) error {
	target, state := p.Callback, htq.TaskStateCompleted
	if kind == model.CallbackFailure {
		target, state = p.FailureCallback, htq.TaskStateArchived
	}
	if target == "" || p.CallbackOf != nil {
		return nil
	}
	body := CallbackBody{TaskID: id, Queue: q.Name, State: state.String(), Attempts: attempts}
	if res != nil {
		body.Status, body.Truncated = res.Status, res.Truncated
		if utf8.Valid(res.Body) {
			body.Body = string(res.Body)
		} else {
			body.BodyBase64 = base64.StdEncoding.EncodeToString(res.Body)
		}
	}
	if failure != nil {
		body.Error = failure.Error()
	}
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("task %s: %s: %w: %w", id, kind, errCallbackNotStored, err)
	}
	cb := &model.URLTask{URL: target, Method: http.MethodPost, Headers: map[string]string{"Content-Type": "application/json"},
		Body: string(data), CallbackOf: &model.CallbackOf{TaskID: id, Kind: kind}}
	payload, err := cb.Encode()
	if err != nil {
		return fmt.Errorf("task %s: %s: %w: %w", id, kind, errCallbackNotStored, err)
	}
	retention := max(q.CompletedRetention(x.defaults), minCallbackRetention)
	_, err = x.client.EnqueueContext(context.WithoutCancel(ctx), htq.NewTask(model.TypeURL, payload),
		htq.Queue(q.Name), htq.TaskID(model.CallbackTaskID(id, kind)), htq.MaxRetry(maxRetry), htq.Retention(retention))
	if err != nil && !errors.Is(err, htq.ErrTaskIDConflict) {
		return fmt.Errorf("task %s: store its %s: %w: %w", id, kind, errCallbackNotStored, err)
	}
	return nil
}
