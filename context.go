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

func withTaskMetadata(ctx context.Context, md taskMetadata) context.Context {
	return context.WithValue(ctx, ctxKey{}, md)
}

func metadata(ctx context.Context) (taskMetadata, bool) {
	md, ok := ctx.Value(ctxKey{}).(taskMetadata)
	return md, ok
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
