package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/eventlog"
)

// The event stream, GET /v1/events.
const (
	// MaxEventStreams bounds the event streams one handler serves at once;
	// beyond it a new one is refused with 503.
	MaxEventStreams = 1000
	// maxStreamQueues bounds the queue parameters of one stream.
	maxStreamQueues = 100
	// streamHeartbeat is how often an idle stream sends a comment, so
	// that proxies keep it open and a vanished client is noticed.
	streamHeartbeat = 15 * time.Second
	// streamBuffer is how many events a stream may fall behind the others
	// before it is ended (its client resumes with Last-Event-ID).
	streamBuffer = 4096
	// streamWriteTimeout bounds each write to a stream's client.
	streamWriteTimeout = 10 * time.Second
	// streamRetryMS is the reconnection delay the stream suggests to
	// EventSource clients.
	streamRetryMS = 2000
)

// errTooManyStreams refuses a stream beyond MaxEventStreams.
var errTooManyStreams = fmt.Errorf("%w: too many event streams (%d) on this htq serve; try again later or another process", errUnavailable, MaxEventStreams)

// An eventHub is the handler's one follow of the storage's event logs,
// shared by every stream: it follows every queue while at least one stream
// is open and hands each event to the streams that want its queue. A
// stream that falls behind by streamBuffer events is ended with a gap
// notice (its client resumes from the storage's logs with Last-Event-ID),
// so that a slow client never holds the others back.
type eventHub struct {
	ctx    context.Context // the handler's: ends the follow
	src    eventlog.Source
	logger *slog.Logger

	mu      sync.Mutex
	streams map[*eventStream]struct{}
	cancel  context.CancelFunc // of the running follow; nil when none runs
	gen     int                // which follow is the running one
	buffer  int                // of each new stream (streamBuffer; tests)
}

// eventStream is one client's subscription.
type eventStream struct {
	queues map[string]bool // nil: every queue
	ch     chan broker.LogEvent
	// behind is closed when the stream fell behind; its client must
	// resume.
	behind     chan struct{}
	fellBehind bool
}

func newEventHub(ctx context.Context, src eventlog.Source, logger *slog.Logger) *eventHub {
	return &eventHub{ctx: ctx, src: src, logger: logger, streams: make(map[*eventStream]struct{}), buffer: streamBuffer}
}

// subscribe adds a stream of queues (nil: every queue). The first stream
// starts the follow, from now: every event logged after subscribe returns
// reaches the stream.
func (h *eventHub) subscribe(queues []string) (*eventStream, error) {
	s := &eventStream{behind: make(chan struct{})}
	if len(queues) > 0 {
		s.queues = make(map[string]bool, len(queues))
		for _, q := range queues {
			s.queues[q] = true
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s.ch = make(chan broker.LogEvent, h.buffer)
	if len(h.streams) >= MaxEventStreams {
		return nil, errTooManyStreams
	}
	if h.cancel == nil {
		ctx, cancel := context.WithCancel(h.ctx)
		f, err := eventlog.NewFollower(ctx, h.src, "", nil, h.logger)
		if err != nil {
			cancel()
			return nil, err
		}
		h.cancel = cancel
		h.gen++
		go h.run(f.Follow(ctx), h.gen)
	}
	h.streams[s] = struct{}{}
	return s, nil
}

// unsubscribe removes a stream; the last one stops the follow.
func (h *eventHub) unsubscribe(s *eventStream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.streams, s)
	if len(h.streams) == 0 && h.cancel != nil {
		h.cancel()
		h.cancel = nil
	}
}

// run hands the events of follow gen to the streams.
func (h *eventHub) run(events <-chan broker.LogEvent, gen int) {
	for ev := range events {
		h.mu.Lock()
		if h.gen != gen {
			h.mu.Unlock()
			continue // an older follow, stopping
		}
		for s := range h.streams {
			if s.queues != nil && !s.queues[ev.Queue] || s.fellBehind {
				continue
			}
			select {
			case s.ch <- ev:
			default:
				s.fellBehind = true
				close(s.behind)
			}
		}
		h.mu.Unlock()
	}
}

// eventJSON is an event as the stream sends it.
type eventJSON struct {
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

func newEventJSON(ev broker.LogEvent) eventJSON {
	out := eventJSON{Kind: string(ev.Kind), Queue: ev.Queue, TaskID: ev.TaskID, Time: ev.Time.UTC(), Error: ev.Error}
	if ev.State != 0 {
		out.State = ev.State.String()
	}
	if ev.Kind == eventlog.KindGap {
		out.Message = "events of this queue were dropped before this stream read them (each queue's log keeps about its last 1,000 changes); read the queue's state to catch up"
	} else {
		out.ID = eventlog.ID(ev)
	}
	return out
}

// streamQueues reads the queue parameters of a stream.
func streamQueues(r *http.Request) ([]string, error) {
	queues := r.URL.Query()["queue"]
	if len(queues) > maxStreamQueues {
		return nil, invalid(fmt.Sprintf("%d queue parameters; at most %d (leave them out for every queue)", len(queues), maxStreamQueues))
	}
	for _, q := range queues {
		if err := base.ValidateQueueName(q); err != nil {
			return nil, err
		}
	}
	slices.Sort(queues)
	return slices.Compact(queues), nil
}

// events: GET /v1/events[?queue=a&queue=b] streams the lifecycle events
// of the queues (every queue when none is named) as Server-Sent Events,
// from now, or, with a Last-Event-ID header (or last_event_id parameter),
// from after that event as far back as the storage's logs go.
func (h *handler) events(w http.ResponseWriter, r *http.Request) {
	queues, err := streamQueues(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	if last != "" {
		if _, _, err := eventlog.ParseID(last); err != nil {
			h.writeError(w, r, fmt.Errorf("Last-Event-ID: %w", err))
			return
		}
	}
	ctx := r.Context()
	s, err := h.eventHub.subscribe(queues)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	defer h.eventHub.unsubscribe(s)
	var backlog []broker.LogEvent
	if last != "" {
		// The hub delivers what is logged from now on; the storage's logs
		// hold what came before.
		f, err := eventlog.NewFollower(ctx, h.b, last, queues, h.logger)
		if err == nil {
			backlog, err = f.CatchUp(ctx)
		}
		if err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	st := newSSEWriter(w)
	st.start()
	for _, ev := range backlog {
		if err := st.event(ev); err != nil {
			return
		}
	}
	heartbeat := h.opts.clock.NewTicker(streamHeartbeat)
	defer heartbeat.Stop()
	for {
		var err error
		select {
		case ev := <-s.ch:
			err = st.event(ev)
		case <-s.behind:
			_ = st.send("gap", "", eventJSON{Kind: string(eventlog.KindGap), Time: time.Now().UTC(),
				Message: "this stream fell behind and ends; reconnect with Last-Event-ID to resume"})
			return
		case <-heartbeat.Chan():
			err = st.comment("ping")
		case <-ctx.Done():
			return
		case <-h.opts.Context.Done():
			return // shutting down: the stream ends; clients reconnect
		}
		if err != nil {
			return
		}
	}
}

// sseWriter writes one Server-Sent Events stream.
type sseWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	buf  bytes.Buffer
	last map[string]string // queue -> the last event ID sent
}

func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), last: make(map[string]string)}
}

// start sends the stream's headers. The server's read and write timeouts
// would cut a stream short: each write has its own deadline instead.
func (s *sseWriter) start() {
	_ = s.rc.SetReadDeadline(time.Time{})
	_ = s.rc.SetWriteDeadline(time.Time{})
	hdr := s.w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	s.w.WriteHeader(http.StatusOK)
	fmt.Fprintf(&s.buf, "retry: %d\n\n", streamRetryMS)
	_ = s.flush()
}

// event sends an event once: one already sent (from the backlog, then
// from the hub) is skipped.
func (s *sseWriter) event(ev broker.LogEvent) error {
	if ev.Kind != eventlog.KindGap {
		if prev, ok := s.last[ev.Queue]; ok && broker.CompareEventIDs(ev.ID, prev) <= 0 {
			return nil
		}
		s.last[ev.Queue] = ev.ID
	}
	j := newEventJSON(ev)
	return s.send(j.Kind, j.ID, j)
}

// send writes one event.
func (s *sseWriter) send(kind, id string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if id != "" {
		fmt.Fprintf(&s.buf, "id: %s\n", id)
	}
	fmt.Fprintf(&s.buf, "event: %s\ndata: %s\n\n", kind, data)
	return s.flush()
}

// comment writes a comment line (a heartbeat).
func (s *sseWriter) comment(text string) error {
	fmt.Fprintf(&s.buf, ": %s\n\n", text)
	return s.flush()
}

func (s *sseWriter) flush() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err == nil {
		err = s.rc.Flush()
	}
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}
