package api

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// The JSON error codes of the native API (docs/api.md lists them with
// their statuses).
const (
	codeInvalidArgument   = "invalid_argument"
	codeUnauthorized      = "unauthorized"
	codeTaskNotFound      = "task_not_found"
	codeWorkflowNotFound  = "workflow_not_found"
	codeWorkflowConflict  = "workflow_id_conflict"
	codeQueueNotFound     = "queue_not_found"
	codeNotFound          = "not_found"
	codeMethodNotAllowed  = "method_not_allowed"
	codeDuplicateTask     = "duplicate_task"
	codeTaskIDConflict    = "task_id_conflict"
	codeWrongState        = "wrong_state"
	codeQueueNotEmpty     = "queue_not_empty"
	codeQueueModeMismatch = "queue_mode_mismatch"
	codeQueueExists       = "queue_exists"
	codeLeaseLost         = "lease_lost"
	codePayloadTooLarge   = "payload_too_large"
	codeTargetNotAllowed  = "target_not_allowed"
	codeUnavailable       = "unavailable"
	codeReplication       = "replication_timeout"
	codeInternal          = "internal"
)

// Errors of the API layer itself; each maps to a row of errorTable.
var (
	errUnauthorized = errors.New("unauthorized")
	errNoRoute      = errors.New("no such route")
	// errMethodNotAllowed: the path has routes, none for the method.
	errMethodNotAllowed = errors.New("method not allowed")
	// errUnavailable: this process cannot take the request now (not the storage).
	errUnavailable = errors.New("unavailable")
)

// errorTable maps sentinel errors to a status and a code, first match
// wins (so the more specific sentinels come first).
var errorTable = []struct {
	err    error
	status int
	code   string
}{
	{errUnauthorized, http.StatusUnauthorized, codeUnauthorized},
	{base.ErrPayloadTooLarge, http.StatusRequestEntityTooLarge, codePayloadTooLarge},
	{model.ErrModeMismatch, http.StatusConflict, codeQueueModeMismatch},
	{model.ErrQueueExists, http.StatusConflict, codeQueueExists},
	{model.ErrTargetNotAllowed, http.StatusUnprocessableEntity, codeTargetNotAllowed},
	{base.ErrInvalidArgument, http.StatusBadRequest, codeInvalidArgument},
	{base.ErrTaskNotFound, http.StatusNotFound, codeTaskNotFound},
	{base.ErrWorkflowNotFound, http.StatusNotFound, codeWorkflowNotFound},
	{base.ErrWorkflowIDConflict, http.StatusConflict, codeWorkflowConflict},
	{base.ErrQueueNotFound, http.StatusNotFound, codeQueueNotFound},
	{base.ErrNotFound, http.StatusNotFound, codeNotFound},
	{errNoRoute, http.StatusNotFound, codeNotFound},
	{errMethodNotAllowed, http.StatusMethodNotAllowed, codeMethodNotAllowed},
	{base.ErrDuplicateTask, http.StatusConflict, codeDuplicateTask},
	{base.ErrTaskIDConflict, http.StatusConflict, codeTaskIDConflict},
	{base.ErrWrongState, http.StatusConflict, codeWrongState},
	{base.ErrQueueNotEmpty, http.StatusConflict, codeQueueNotEmpty},
	{base.ErrLeaseLost, http.StatusConflict, codeLeaseLost},
	{base.ErrReplicationTimeout, http.StatusServiceUnavailable, codeReplication},
	{base.ErrUnavailable, http.StatusServiceUnavailable, codeUnavailable},
	{base.ErrStorageClosed, http.StatusServiceUnavailable, codeUnavailable},
	{errUnavailable, http.StatusServiceUnavailable, codeUnavailable},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, codeUnavailable},
}

// RetryAfter is the Retry-After header (in seconds) of every 503 answer:
// the storage could not be reached or did not answer in time, and is
// expected back; a client that retries sooner only adds to the load.
// Retrying an enqueue is safe with an Idempotency-Key (docs/api.md).
const RetryAfter = "1"

// statusOf maps err to its HTTP status and JSON code: the one place where
// errors become wire codes.
func statusOf(err error) (int, string) {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return http.StatusRequestEntityTooLarge, codePayloadTooLarge
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			return row.status, row.code
		}
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return http.StatusServiceUnavailable, codeUnavailable
	}
	return http.StatusInternalServerError, codeInternal
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Tasks names the workflow tasks at fault (POST /v1/workflows).
	Tasks []string `json:"tasks,omitempty"`
}

// writeError answers with err mapped by statusOf. Server-side failures
// (5xx) are logged.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	status, code := statusOf(err)
	if status >= 500 {
		h.logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="htq"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", RetryAfter)
	}
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: err.Error(), Tasks: errorTasks(err)}})
}

// itemError is the JSON of one failed item of a batch.
func itemError(err error) *errorDetail {
	_, code := statusOf(err)
	return &errorDetail{Code: code, Message: err.Error()}
}

// invalid wraps a message as an ErrInvalidArgument error.
func invalid(msg string) error { return &wrapped{msg: msg, err: htq.ErrInvalidArgument} }

type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }
