package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Event is one lifecycle event of GET /v1/events: a task enqueued,
// started, succeeded, failed, retried, archived or deleted, or a queue
// paused or resumed. Kind "gap" says that events were dropped before the
// stream read them (it has no ID).
type Event struct {
	// ID is "<queue>:<log ID>": give it as EventsQuery.After to resume.
	ID     string    `json:"id,omitempty"`
	Kind   string    `json:"kind"`
	Queue  string    `json:"queue"`
	TaskID string    `json:"task_id,omitempty"`
	State  string    `json:"state,omitempty"`
	Time   time.Time `json:"time"`
	Error  string    `json:"error,omitempty"`
	// Message explains a gap.
	Message string `json:"message,omitempty"`
}

// EventsQuery selects an event stream: the events of Queues (every queue
// when empty), from now, or from after the event with ID After as far back
// as the storage's logs go.
type EventsQuery struct {
	Queues []string
	After  string
}

// StreamIdleTimeout ends a stream that sent nothing, not even the
// service's heartbeat (every 15 s), for this long: the connection is
// taken for dead.
const StreamIdleTimeout = 45 * time.Second

// maxEventLine bounds one line of an event stream.
const maxEventLine = 1 << 20

// Events reads one event stream, GET /v1/events, and calls fn with each
// event in order. It returns nil when the service ended the stream (it
// shuts down, or the stream fell behind: resume after the last event's
// ID), the error of fn, ctx's error when ctx ends, an error wrapping
// ErrUnreachable when the stream broke or went silent for
// StreamIdleTimeout, or the service's error answer (a bad queue name or
// event ID: htq.ErrInvalidArgument).
func (c *Client) Events(ctx context.Context, q EventsQuery, fn func(*Event) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	u := *c.base
	u.Path += path("events")
	u.RawQuery = url.Values{"queue": q.Queues}.Encode()
	req, err := http.NewRequestWithContext(ctx, "GET", u.String(), nil)
	if err != nil {
		return fmt.Errorf("apiclient: GET /v1/events: %w", err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if q.After != "" {
		req.Header.Set("Last-Event-ID", q.After)
	}
	// The client's timeout bounds whole calls; a stream has none, but
	// one that goes silent is cut.
	idle := time.AfterFunc(StreamIdleTimeout, func() { cancel(errStreamIdle) })
	defer idle.Stop()
	resp, err := (&http.Client{Transport: c.hc.Transport}).Do(req)
	if err != nil {
		return c.streamError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
		return errorFrom(resp.StatusCode, data)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEventLine)
	var data strings.Builder
	for sc.Scan() {
		idle.Reset(StreamIdleTimeout)
		line := sc.Text()
		if line == "" { // the end of an event
			if data.Len() == 0 {
				continue
			}
			var ev Event
			if err := json.Unmarshal([]byte(data.String()), &ev); err != nil {
				return fmt.Errorf("%w: an event of GET /v1/events is not the JSON expected: %v", ErrServer, err)
			}
			data.Reset()
			if err := fn(&ev); err != nil {
				return err
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		if field == "data" { // id and event repeat what the data holds
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		}
	}
	if err := sc.Err(); err != nil {
		return c.streamError(ctx, err)
	}
	if err := context.Cause(ctx); err != nil {
		return c.streamError(ctx, err)
	}
	return nil
}

// errStreamIdle is why a silent stream was cut.
var errStreamIdle = fmt.Errorf("the event stream sent nothing for %v", StreamIdleTimeout)

// streamError says why a stream could not be read: ctx ended (by the
// caller), or the service is unreachable.
func (c *Client) streamError(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		if cause == errStreamIdle {
			err = cause
		} else {
			return fmt.Errorf("GET /v1/events: %w", cause)
		}
	}
	return &unreachableError{server: c.Server(), err: err}
}
