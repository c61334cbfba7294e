package htq

import "context"

type ctxKey struct{}

// taskMetadata is what a handler's context knows about its task.
type taskMetadata struct {
	id       string
	queue    string
	retried  int
	maxRetry int
	// workflow and workflowTask name a workflow task's workflow; deps
	// reads its dependencies' results (nil for other tasks).
	workflow, workflowTask string
	deps                   *depsLoader
}

// metadataCtx is a context holding its task's metadata: one allocation
// per attempt, where context.WithValue of the struct would box it in a
// second.
type metadataCtx struct {
	context.Context
	md taskMetadata
}

// Value answers ctxKey{} with the task's metadata (a pointer, so that no
// read allocates) and asks the parent otherwise.
func (c *metadataCtx) Value(key any) any {
	if key == (ctxKey{}) {
		return &c.md
	}
	return c.Context.Value(key)
}

// String names the context for debugging, as the standard ones do.
func (c *metadataCtx) String() string { return "htq.taskContext(" + c.md.queue + "/" + c.md.id + ")" }

func withTaskMetadata(ctx context.Context, md taskMetadata) context.Context {
	return &metadataCtx{Context: ctx, md: md}
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
	return md.id, ok
}

// GetRetryCount returns how many times the task has been retried before
// this attempt (0 on the first attempt).
func GetRetryCount(ctx context.Context) (n int, ok bool) {
	md, ok := metadata(ctx)
	return md.retried, ok
}

// GetMaxRetry returns how many retries the task is allowed.
func GetMaxRetry(ctx context.Context) (n int, ok bool) {
	md, ok := metadata(ctx)
	return md.maxRetry, ok
}

// GetQueueName returns the queue the task was fetched from.
func GetQueueName(ctx context.Context) (queue string, ok bool) {
	md, ok := metadata(ctx)
	return md.queue, ok
}
