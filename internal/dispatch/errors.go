package dispatch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors returned by Dispatch, wrapped with context; test them with
// errors.Is. Policy.Classify turns any of them into an Outcome.
var (
	// ErrInvalidConfig means a Config or an allowlist entry is wrong.
	ErrInvalidConfig = errors.New("dispatch: invalid config")
	// ErrInvalidRequest means the task's request cannot be sent as given
	// (bad URL, scheme, method, header or timeout). Nothing was sent.
	// Permanent.
	ErrInvalidRequest = errors.New("dispatch: invalid request")
	// ErrTargetNotAllowed means the target guard refused the address; the
	// error is a *TargetError naming it. Nothing was sent. Permanent.
	ErrTargetNotAllowed = errors.New("dispatch: target not allowed")
	// ErrTimeout means the task's timeout (or the context's deadline)
	// passed before the exchange, body included, was over. Retryable.
	ErrTimeout = errors.New("dispatch: timeout")
	// ErrNetwork means the request failed below HTTP: name resolution,
	// connection refused or reset, TLS, a malformed response. Retryable.
	ErrNetwork = errors.New("dispatch: network error")

	// The following match a *StatusError by its status code.

	// ErrRedirect means the target answered 3xx and the redirect was not
	// followed (to another host, a scheme downgrade, too many hops, or no
	// usable Location). Permanent.
	ErrRedirect = errors.New("dispatch: redirect not followed")
	// ErrClientError means a 4xx status other than 429. Permanent, unless
	// the queue's Policy says to retry them.
	ErrClientError = errors.New("dispatch: client error status")
	// ErrTooManyRequests means status 429. Retryable, after RetryAfter.
	ErrTooManyRequests = errors.New("dispatch: too many requests")
	// ErrServerError means a 5xx status. Retryable, after RetryAfter if the
	// target sent one.
	ErrServerError = errors.New("dispatch: server error status")
	// ErrUnexpectedStatus means a status outside 200–599 that is not a
	// success (1xx as a final answer, or 600 and above). Permanent.
	ErrUnexpectedStatus = errors.New("dispatch: unexpected status")
)

// A TargetError is a connection the target guard refused. It matches
// ErrTargetNotAllowed.
type TargetError struct {
	// Host is the host name of the URL, or "" when the URL held an IP
	// address.
	Host string
	// Addr is the refused address, "ip:port" when refused at dial time.
	Addr string
	// Reason names the refused range ("loopback", "private (RFC 1918)", …).
	Reason string
}

// Error returns a message naming the host, the address and the reason.
func (e *TargetError) Error() string {
	var b strings.Builder
	b.WriteString(ErrTargetNotAllowed.Error())
	b.WriteString(": ")
	if e.Host != "" {
		b.WriteString(e.Host)
		b.WriteString(" -> ")
	}
	b.WriteString(e.Addr)
	b.WriteString(" is ")
	b.WriteString(e.Reason)
	b.WriteString(" (allow it in the target allowlist if this is intended)")
	return b.String()
}

// Unwrap returns ErrTargetNotAllowed.
func (e *TargetError) Unwrap() error { return ErrTargetNotAllowed }

// A StatusError is an answer whose status is not 2xx. It matches
// ErrRedirect, ErrClientError, ErrTooManyRequests, ErrServerError or
// ErrUnexpectedStatus according to Status. Dispatch returns it together
// with the Result, which holds the answer's headers and body.
type StatusError struct {
	// Status is the HTTP status code.
	Status int
	// RetryAfter is the delay the target asked for in its Retry-After
	// header (429 and 5xx only), capped at Config.MaxRetryAfter; 0 when
	// absent or unparsable.
	RetryAfter time.Duration
	// HasRetryAfter tells a Retry-After of zero from none at all.
	HasRetryAfter bool
	// Location is the Location header of a 3xx answer.
	Location string
	// Reason says why a redirect was not followed; "" otherwise.
	Reason string
}

// Error returns a message with the status and, when present, the reason.
func (e *StatusError) Error() string {
	var b strings.Builder
	b.WriteString("dispatch: status ")
	b.WriteString(strconv.Itoa(e.Status))
	if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" ")
		b.WriteString(t)
	}
	if e.Location != "" {
		b.WriteString(" to ")
		b.WriteString(e.Location)
	}
	if e.Reason != "" {
		b.WriteString(": redirect not followed: ")
		b.WriteString(e.Reason)
	}
	if e.HasRetryAfter {
		b.WriteString(" (retry after ")
		b.WriteString(e.RetryAfter.String())
		b.WriteString(")")
	}
	return b.String()
}

// Is reports whether target is the sentinel of e's status class.
func (e *StatusError) Is(target error) bool {
	return target == statusClass(e.Status)
}

func statusClass(code int) error {
	switch {
	case code >= 300 && code < 400:
		return ErrRedirect
	case code == http.StatusTooManyRequests:
		return ErrTooManyRequests
	case code >= 400 && code < 500:
		return ErrClientError
	case code >= 500 && code < 600:
		return ErrServerError
	default:
		return ErrUnexpectedStatus
	}
}

// RetryAfter returns the delay a target asked for with Retry-After, if
// err carries one (a 429 or 5xx answer with the header).
func RetryAfter(err error) (time.Duration, bool) {
	var se *StatusError
	if errors.As(err, &se) && se.HasRetryAfter {
		return se.RetryAfter, true
	}
	return 0, false
}

// An Outcome is what the caller does with a task after one dispatch.
type Outcome int

// The outcomes of a dispatch.
const (
	// Succeeded: the target answered 2xx; the task is complete.
	Succeeded Outcome = iota
	// Retry: a transient failure; retry the task with the queue's backoff
	// (and no sooner than RetryAfter, when present) while it has retries
	// left.
	Retry
	// Archive: a permanent failure; archive the task at once.
	Archive
)

// String returns "succeeded", "retry" or "archive".
func (o Outcome) String() string {
	switch o {
	case Succeeded:
		return "succeeded"
	case Retry:
		return "retry"
	case Archive:
		return "archive"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// A Policy holds a queue's choices about which failures are retried. The
// zero Policy is the default.
type Policy struct {
	// RetryClientErrors retries 4xx answers (other than 429, always
	// retried) instead of archiving the task at once.
	RetryClientErrors bool
}

// Classify returns the Outcome of the error Dispatch returned:
//
//	nil                                          Succeeded
//	429, 5xx, ErrTimeout, ErrNetwork, canceled   Retry
//	other 4xx                                    Archive (Retry with RetryClientErrors)
//	3xx, ErrTargetNotAllowed, ErrInvalidRequest  Archive
//	any other status                             Archive
//	any other error                              Retry
//
// A canceled context (the server shutting down) classifies as Retry: the
// attempt did not conclude and the task should run again.
func (p Policy) Classify(err error) Outcome {
	switch {
	case err == nil:
		return Succeeded
	case errors.Is(err, ErrClientError):
		if p.RetryClientErrors {
			return Retry
		}
		return Archive
	case errors.Is(err, ErrTargetNotAllowed),
		errors.Is(err, ErrInvalidRequest),
		errors.Is(err, ErrRedirect),
		errors.Is(err, ErrUnexpectedStatus):
		return Archive
	case errors.Is(err, ErrTooManyRequests),
		errors.Is(err, ErrServerError),
		errors.Is(err, ErrTimeout),
		errors.Is(err, ErrNetwork),
		errors.Is(err, context.Canceled):
		return Retry
	}
	return Retry
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP-date.
// The result is within [0, limit].
func parseRetryAfter(v string, now time.Time, limit time.Duration) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		sec, err := strconv.ParseInt(v, 10, 64)
		if err != nil || sec > int64(limit/time.Second) {
			return limit, true // too large to represent: as large as allowed
		}
		return min(time.Duration(sec)*time.Second, limit), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	return min(max(d, 0), limit), true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
