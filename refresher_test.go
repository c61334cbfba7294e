package htq

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestQueueSource: a server whose queues come from a QueueSource starts
// serving a queue as soon as the source names it and a task arrives.
func TestQueueSource(t *testing.T) {
	st := openTestStorage(t)
	var mu sync.Mutex
	queues := map[string]int{}
	source := func(context.Context) (map[string]int, error) {
		mu.Lock()
		defer mu.Unlock()
		out := make(map[string]int, len(queues))
		for q, w := range queues {
			out[q] = w
		}
		return out, nil
	}
	ran := make(chan string, 4)
	startServer(t, st, quietConfig(Config{QueueSource: source, QueueRefreshInterval: time.Hour}), HandlerFunc(func(ctx context.Context, task *Task) error {
		q, _ := GetQueueName(ctx)
		ran <- q
		return nil
	}))
	mu.Lock()
	queues["dyn"] = 1
	mu.Unlock()
	// The refresh interval is an hour: only the event for the unknown
	// queue can make the server look at its source again.
	if _, err := NewClient(st).Enqueue(NewTask("x", nil), Queue("dyn")); err != nil {
		t.Fatal(err)
	}
	if q := recv(t, ran, 10*time.Second, "task of a queue added at run time"); q != "dyn" {
		t.Fatalf("ran a task of %q", q)
	}
	err := NewServer(st, Config{Queues: map[string]int{"a": 1}, QueueSource: source}).Start(HandlerFunc(func(context.Context, *Task) error { return nil }))
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Queues and QueueSource together: %v", err)
	}
}
