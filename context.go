package htq

import (
	"context"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/lazydeadline"
)

type ctxKey struct{}

// taskMetadata is what a handler's context knows about its task: its
// message (ID, queue, retry counts, workflow), read and never written
// (pointers, so that the metadata in every activeTask costs 16 bytes),
// and for a workflow task deps, which reads its dependencies' results
// (nil for other tasks).
type taskMetadata struct {
	msg  *base.TaskMessage
	deps *depsLoader
}

// taskCtx is a context holding its task's metadata. As the context of
// one attempt's handler it is a child of the Server's BaseContext,
// canceled with a cause (the lease lost, shutdown, a cancel request, the
// attempt over) and bounded by the attempt's deadline; it lives inside
// its activeTask, so that it costs no allocation of its own, and makes no
// timer and no standard context unless the handler waits on Done
// (internal/lazydeadline): a quick handler never does.
type taskCtx struct {
	lazydeadline.CauseContext
	md taskMetadata
}

// Value answers ctxKey{} with the task's metadata and asks the lazy
// context otherwise.
func (c *taskCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return &c.md
	}
	return c.CauseContext.Value(key)
}

// String names the context for debugging, as the standard ones do.
func (c *taskCtx) String() string {
	return "htq.taskContext(" + c.md.msg.Queue + "/" + c.md.msg.ID + ")"
}

// withTaskMetadata returns a child of ctx holding md (for the hooks of
// a task whose handler does not run, such as the recoverer's), and the
// function that ends it.
func withTaskMetadata(ctx context.Context, md taskMetadata) (context.Context, func()) {
	c := &taskCtx{md: md}
	c.Init(ctx)
	return c, func() { c.Cancel(nil) }
}

func metadata(ctx context.Context) (taskMetadata, bool) {
	md, ok := ctx.Value(ctxKey{}).(*taskMetadata)
	if !ok {
		return taskMetadata{}, false
	}
	return *md, true
}

// GetTaskID returns the ID of the task a handler's ctx belongs to. ok is
// false for a context that did not come from a Server.
func GetTaskID(ctx context.Context) (id string, ok bool) {
	md, ok := metadata(ctx)
	if !ok {
		return "", false
	}
	return md.msg.ID, true
}

// GetRetryCount returns how many times the task has been retried before
// this attempt (0 on the first attempt).
func GetRetryCount(ctx context.Context) (n int, ok bool) {
	md, ok := metadata(ctx)
	if !ok {
		return 0, false
	}
	return md.msg.Retried, true
}

// GetMaxRetry returns how many retries the task is allowed.
func GetMaxRetry(ctx context.Context) (n int, ok bool) {
	md, ok := metadata(ctx)
	if !ok {
		return 0, false
	}
	return md.msg.MaxRetry, true
}

// GetQueueName returns the queue the task was fetched from.
func GetQueueName(ctx context.Context) (queue string, ok bool) {
	md, ok := metadata(ctx)
	if !ok {
		return "", false
	}
	return md.msg.Queue, true
}
