package htq

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Handler processes a task. Returning nil completes the task; returning an
// error retries it (or archives it when out of retries, or at once when the
// error wraps SkipRetry). A handler must return when ctx is done: at the
// task's Timeout or Deadline, when the task is canceled (its cause
// ErrTaskCanceled), when its lease is lost (ErrLeaseLost) or at shutdown.
// ctx ends with the attempt, once the ErrorHandler has seen a failure.
type Handler interface {
	ProcessTask(ctx context.Context, task *Task) error
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, task *Task) error

// ProcessTask calls f(ctx, task).
func (f HandlerFunc) ProcessTask(ctx context.Context, task *Task) error { return f(ctx, task) }

// MiddlewareFunc wraps a Handler, to log, trace or measure every task.
type MiddlewareFunc func(Handler) Handler

// ServeMux routes each task to the handler registered for the longest
// pattern that is a prefix of the task's type. It is safe for concurrent
// use.
type ServeMux struct {
	mu      sync.RWMutex
	entries map[string]Handler
	sorted  []string // patterns, longest first
	mws     []MiddlewareFunc
}

// NewServeMux returns an empty ServeMux.
func NewServeMux() *ServeMux { return &ServeMux{entries: make(map[string]Handler)} }

// ProcessTask runs the handler for the task's type, wrapped in the
// middlewares registered with Use. A task with no handler fails with an
// error (and is retried, since another server may know its type).
func (mux *ServeMux) ProcessTask(ctx context.Context, task *Task) error {
	h, _ := mux.Handler(task)
	return h.ProcessTask(ctx, task)
}

// Handler returns the handler for the task's type, wrapped in the
// middlewares, and the pattern it was registered with. With no match it
// returns a handler that fails and an empty pattern.
func (mux *ServeMux) Handler(task *Task) (h Handler, pattern string) {
	mux.mu.RLock()
	defer mux.mu.RUnlock()
	h, pattern = mux.match(task.Type())
	if h == nil {
		h = NotFoundHandler()
	}
	for i := len(mux.mws) - 1; i >= 0; i-- {
		h = mux.mws[i](h)
	}
	return h, pattern
}

func (mux *ServeMux) match(typename string) (Handler, string) {
	if h, ok := mux.entries[typename]; ok {
		return h, typename
	}
	for _, p := range mux.sorted {
		if strings.HasPrefix(typename, p) {
			return mux.entries[p], p
		}
	}
	return nil, ""
}

// Handle registers handler for pattern. Like net/http's ServeMux it panics
// on a programming error: an empty pattern, a nil handler, or a pattern
// registered twice.
func (mux *ServeMux) Handle(pattern string, handler Handler) {
	mux.mu.Lock()
	defer mux.mu.Unlock()
	if strings.TrimSpace(pattern) == "" {
		panic("htq: ServeMux.Handle: empty pattern")
	}
	if handler == nil {
		panic("htq: ServeMux.Handle: nil handler for " + pattern)
	}
	if _, dup := mux.entries[pattern]; dup {
		panic("htq: ServeMux.Handle: multiple registrations for " + pattern)
	}
	mux.entries[pattern] = handler
	mux.sorted = append(mux.sorted, pattern)
	sort.SliceStable(mux.sorted, func(i, j int) bool { return len(mux.sorted[i]) > len(mux.sorted[j]) })
}

// HandleFunc registers fn for pattern.
func (mux *ServeMux) HandleFunc(pattern string, fn func(context.Context, *Task) error) {
	if fn == nil {
		panic("htq: ServeMux.HandleFunc: nil function for " + pattern)
	}
	mux.Handle(pattern, HandlerFunc(fn))
}

// Use appends middlewares; the first one given runs outermost.
func (mux *ServeMux) Use(mws ...MiddlewareFunc) {
	mux.mu.Lock()
	defer mux.mu.Unlock()
	mux.mws = append(mux.mws, mws...)
}

// NotFound fails a task with an error saying no handler knows its type.
func NotFound(ctx context.Context, task *Task) error {
	return fmt.Errorf("htq: no handler for task type %q", task.Type())
}

// NotFoundHandler returns a Handler that calls NotFound.
func NotFoundHandler() Handler { return HandlerFunc(NotFound) }
