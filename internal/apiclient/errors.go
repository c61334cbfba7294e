package apiclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// Errors of answers that have no sentinel in package htq.
var (
	// ErrUnauthorized means the token is missing or wrong (401).
	ErrUnauthorized = errors.New("htq: unauthorized")
	// ErrUnavailable means the service answered but its storage did not
	// (503).
	ErrUnavailable = errors.New("htq: storage unavailable")
	// ErrServer means the service failed (500) or answered what this
	// client does not understand.
	ErrServer = errors.New("htq: server error")
)

// codes maps the API's JSON error codes back to the sentinel errors the
// service's errorTable (internal/api/errors.go) maps to them; a test of
// package api checks that each of its rows comes back as its sentinel.
var codes = map[string]error{
	"invalid_argument":     htq.ErrInvalidArgument,
	"unauthorized":         ErrUnauthorized,
	"task_not_found":       htq.ErrTaskNotFound,
	"workflow_not_found":   htq.ErrWorkflowNotFound,
	"workflow_id_conflict": htq.ErrWorkflowIDConflict,
	"queue_not_found":      htq.ErrQueueNotFound,
	"not_found":            base.ErrNotFound,
	"duplicate_task":       htq.ErrDuplicateTask,
	"task_id_conflict":     htq.ErrTaskIDConflict,
	"wrong_state":          htq.ErrWrongState,
	"queue_not_empty":      base.ErrQueueNotEmpty,
	"queue_mode_mismatch":  model.ErrModeMismatch,
	"queue_exists":         model.ErrQueueExists,
	"lease_lost":           htq.ErrLeaseLost,
	"payload_too_large":    htq.ErrPayloadTooLarge,
	"target_not_allowed":   model.ErrTargetNotAllowed,
	"replication_timeout":  htq.ErrReplicationTimeout,
	"unavailable":          ErrUnavailable,
	"internal":             ErrServer,
	// A method the path does not take: a mistake of the caller.
	"method_not_allowed": htq.ErrInvalidArgument,
}

// statuses is the sentinel of an error answer without a known code (a
// proxy's answer, say), by status.
var statuses = map[int]error{
	http.StatusBadRequest:            htq.ErrInvalidArgument,
	http.StatusUnauthorized:          ErrUnauthorized,
	http.StatusForbidden:             ErrUnauthorized,
	http.StatusNotFound:              base.ErrNotFound,
	http.StatusMethodNotAllowed:      htq.ErrInvalidArgument,
	http.StatusRequestEntityTooLarge: htq.ErrPayloadTooLarge,
	http.StatusServiceUnavailable:    ErrUnavailable,
}

// Error is an error answer of the API, or a call this client refused to
// send (Status 0).
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code is the JSON error code ("queue_not_found"); empty when the
	// answer was not the API's JSON.
	Code string
	// Message is the service's message.
	Message string
	// sentinel is what Unwrap returns.
	sentinel error
}

// Error returns the service's message.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the sentinel error of the answer's code.
func (e *Error) Unwrap() error { return e.sentinel }

// ErrorFor returns the sentinel error of an API error code, nil for a code
// this client does not know.
func ErrorFor(code string) error { return codes[code] }

// errorFrom reads an error answer.
func errorFrom(status int, data []byte) *Error {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e := &Error{Status: status}
	if json.Unmarshal(data, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		e.sentinel = codes[e.Code]
	}
	if e.sentinel == nil {
		e.sentinel = statuses[status]
	}
	if e.sentinel == nil {
		e.sentinel = ErrServer
	}
	if e.Message == "" {
		text := strings.TrimSpace(string(data))
		if len(text) > 200 {
			text = text[:200] + "…"
		}
		e.Message = fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
		if text != "" {
			e.Message += ": " + text
		}
	}
	return e
}

// invalidf returns an error wrapping htq.ErrInvalidArgument whose message
// is the formatted text alone.
func invalidf(format string, args ...any) error {
	return &Error{Message: fmt.Sprintf(format, args...), sentinel: htq.ErrInvalidArgument}
}
