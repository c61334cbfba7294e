package htq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
)

// forBothBackends runs fn against Redis and against the file: store.
func forBothBackends(t *testing.T, fn func(t *testing.T, st *Storage)) {
	t.Run("redis", func(t *testing.T) { fn(t, openTestStorage(t)) })
	t.Run("file", func(t *testing.T) {
		st, err := Open("file:" + t.TempDir())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		fn(t, st)
	})
}

// TestPriorityOrder enqueues tasks of mixed priorities and checks that a
// server with one worker runs them highest priority first, in enqueue
// order within one priority.
func TestPriorityOrder(t *testing.T) {
	forBothBackends(t, func(t *testing.T, st *Storage) {
		c := NewClient(st)
		var want [MaxPriority + 1][]string
		prios := []int{0, 5, 9, 0, 5, 2, 9, 0, 1, 5}
		for round := range 5 {
			for i, p := range prios {
				id := fmt.Sprintf("r%d-%d-p%d", round, i, p)
				if _, err := c.Enqueue(NewTask("p", nil), Priority(p), TaskID(id)); err != nil {
					t.Fatalf("Enqueue: %v", err)
				}
				want[p] = append(want[p], id)
			}
		}
		var order []string
		for p := MaxPriority; p >= 0; p-- {
			order = append(order, want[p]...)
		}
		var mu sync.Mutex
		var got []string
		done := make(chan struct{})
		h := HandlerFunc(func(ctx context.Context, task *Task) error {
			id, _ := GetTaskID(ctx)
			mu.Lock()
			defer mu.Unlock()
			got = append(got, id)
			if len(got) == len(order) {
				close(done)
			}
			return nil
		})
		startServer(t, st, quietConfig(Config{Concurrency: 1}), h)
		recv(t, done, 30*time.Second, "every task")
		mu.Lock()
		defer mu.Unlock()
		for i := range order {
			if got[i] != order[i] {
				t.Fatalf("run order differs at %d: got %v\nwant %v", i, got, order)
			}
		}
	})
}

func TestPriorityOption(t *testing.T) {
	st, err := Open("mem:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := NewClient(st)
	for _, p := range []int{-1, MaxPriority + 1} {
		if _, err := c.Enqueue(NewTask("t", nil), Priority(p)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Priority(%d): got %v, want ErrInvalidArgument", p, err)
		}
	}
	if _, err := c.Enqueue(NewTask("t", nil), Priority(1), Key("tenant")); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Priority and Key together: got %v, want ErrInvalidArgument", err)
	}
	info, err := c.Enqueue(NewTask("t", nil), Priority(7))
	if err != nil || info.Priority != 7 {
		t.Fatalf("Enqueue with Priority(7): %+v, %v", info, err)
	}
	got, err := NewInspector(st).GetTaskInfo("default", info.ID)
	if err != nil || got.Priority != 7 {
		t.Fatalf("GetTaskInfo: Priority %d, %v; want 7", got.Priority, err)
	}
}

// TestFairSharingServer runs a big key's and a small key's tasks through a
// Server with one worker (so that tasks run in fetch order): the small
// key's tasks all run within the first twenty or so, not after the big
// key's hundreds.
func TestFairSharingServer(t *testing.T) {
	forBothBackends(t, func(t *testing.T, st *Storage) {
		c := NewClient(st)
		ctx := context.Background()
		big := make([]*Task, 400)
		for i := range big {
			big[i] = NewTask("work", nil)
		}
		if _, err := c.EnqueueBatch(ctx, big, Key("big")); err != nil {
			t.Fatalf("EnqueueBatch: %v", err)
		}
		for range 10 {
			if _, err := c.Enqueue(NewTask("work", nil), Key("small")); err != nil {
				t.Fatalf("Enqueue: %v", err)
			}
		}
		var mu sync.Mutex
		var order []string
		smallDone := make(chan int, 1)
		small := 0
		h := HandlerFunc(func(ctx context.Context, task *Task) error {
			key := taskKeyOf(ctx, t, st)
			mu.Lock()
			defer mu.Unlock()
			order = append(order, key)
			if key == "small" {
				if small++; small == 10 {
					smallDone <- len(order)
				}
			}
			return nil
		})
		startServer(t, st, quietConfig(Config{Concurrency: 1}), h)
		n := recv(t, smallDone, 30*time.Second, "the small key's tasks")
		mu.Lock()
		defer mu.Unlock()
		// The keys alternate: the 10th small task is the 20th.
		if n > 20 {
			t.Fatalf("the small key's 10 tasks took %d tasks to finish, want 20: %v", n, order)
		}
	})
}

// taskKeyOf reads the key of the task a handler runs.
func taskKeyOf(ctx context.Context, t *testing.T, st *Storage) string {
	id, _ := GetTaskID(ctx)
	q, _ := GetQueueName(ctx)
	ti, err := brokerOf(st).GetTaskInfo(ctx, q, id)
	if err != nil {
		t.Errorf("GetTaskInfo: %v", err)
		return ""
	}
	return ti.Message.Key
}

// TestKeyMaxConcurrencyAcrossServers runs two Servers, each on its own
// Redis connection, with a per-key bound of 2: no key ever has more than
// 2 tasks running at once, summed over both servers.
func TestKeyMaxConcurrencyAcrossServers(t *testing.T) {
	url := redistest.URL(t)
	st, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	other, err := Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if err := NewInspector(st).SetQueueSettings("default", QueueSettings{KeyMaxConcurrency: 2}); err != nil {
		t.Fatal(err)
	}
	c := NewClient(st)
	const perKey = 30
	for _, k := range []string{"a", "b", "c"} {
		tasks := make([]*Task, perKey)
		for i := range tasks {
			tasks[i] = NewTask("work", nil)
		}
		if _, err := c.EnqueueBatch(context.Background(), tasks, Key(k)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	running, most := map[string]int{}, map[string]int{}
	done, total := make(chan struct{}), 0
	h := func(st *Storage) Handler {
		return HandlerFunc(func(ctx context.Context, task *Task) error {
			key := taskKeyOf(ctx, t, st)
			mu.Lock()
			running[key]++
			most[key] = max(most[key], running[key])
			mu.Unlock()
			time.Sleep(5 * time.Millisecond) // overlap: the bound must hold while tasks run
			mu.Lock()
			defer mu.Unlock()
			running[key]--
			if total++; total == 3*perKey {
				close(done)
			}
			return nil
		})
	}
	startServer(t, st, quietConfig(Config{Concurrency: 8}), h(st))
	startServer(t, other, quietConfig(Config{Concurrency: 8}), h(other))
	recv(t, done, 60*time.Second, "every task")
	mu.Lock()
	defer mu.Unlock()
	for k, n := range most {
		if n > 2 {
			t.Errorf("key %s had %d tasks running at once over two servers, the bound is 2", k, n)
		}
	}
	if len(most) != 3 {
		t.Errorf("keys seen: %v", most)
	}
}
