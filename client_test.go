package htq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
)

func TestEnqueueReturnsTaskInfo(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	deadline := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	info, err := c.Enqueue(NewTask("email:welcome", []byte(`{"to":"a@b"}`), MaxRetry(3)),
		Queue("mail"), Timeout(time.Minute), Deadline(deadline), Retention(time.Hour), TaskID("t-1"))
	if err != nil {
		t.Fatal(err)
	}
	if info.ID != "t-1" || info.Queue != "mail" || info.Type != "email:welcome" || info.State != TaskStatePending ||
		info.MaxRetry != 3 || info.Timeout != time.Minute || !info.Deadline.Equal(deadline) || info.Retention != time.Hour {
		t.Fatalf("unexpected TaskInfo: %+v", info)
	}
	stored := taskInfo(t, st, "mail", "t-1")
	if stored.State != TaskStatePending || string(stored.Payload) != `{"to":"a@b"}` || stored.MaxRetry != 3 ||
		stored.Timeout != time.Minute || !stored.Deadline.Equal(deadline) || stored.Retention != time.Hour {
		t.Fatalf("stored task differs: %+v", stored)
	}
}

func TestEnqueueDefaults(t *testing.T) {
	st := openTestStorage(t)
	info, err := NewClient(st).Enqueue(NewTask("x", nil))
	if err != nil {
		t.Fatal(err)
	}
	if info.Queue != "default" || info.MaxRetry != DefaultMaxRetry || info.Timeout != DefaultTimeout || info.ID == "" {
		t.Fatalf("defaults not applied: %+v", info)
	}
}

func TestEnqueueScheduledAndGroup(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	at := time.Now().Add(time.Hour)
	info, err := c.Enqueue(NewTask("later", nil), ProcessAt(at))
	if err != nil {
		t.Fatal(err)
	}
	if info.State != TaskStateScheduled || taskInfo(t, st, "default", info.ID).State != TaskStateScheduled {
		t.Fatalf("want scheduled, got %v", info.State)
	}
	info, err = c.Enqueue(NewTask("in", nil), ProcessIn(time.Hour))
	if err != nil || taskInfo(t, st, "default", info.ID).State != TaskStateScheduled {
		t.Fatalf("ProcessIn: %v %+v", err, info)
	}
	info, err = c.Enqueue(NewTask("grouped", nil), Group("g1"))
	if err != nil || info.State != TaskStateAggregating || taskInfo(t, st, "default", info.ID).State != TaskStateAggregating {
		t.Fatalf("Group: %v %+v", err, info)
	}
	// ProcessAt in the past means now.
	info, err = c.Enqueue(NewTask("past", nil), ProcessAt(time.Now().Add(-time.Hour)))
	if err != nil || taskInfo(t, st, "default", info.ID).State != TaskStatePending {
		t.Fatalf("past ProcessAt: %v %+v", err, info)
	}
}

func TestEnqueueBadInputWritesNothing(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	big := make([]byte, MaxPayloadSize+1)
	cases := []struct {
		name string
		task *Task
		opts []Option
		want error
	}{
		{"empty type", NewTask("", nil), nil, ErrInvalidArgument},
		{"nil task", nil, nil, ErrInvalidArgument},
		{"negative MaxRetry", NewTask("x", nil), []Option{MaxRetry(-1)}, ErrInvalidArgument},
		{"negative Timeout", NewTask("x", nil), []Option{Timeout(-time.Second)}, ErrInvalidArgument},
		{"negative Retention", NewTask("x", nil), []Option{Retention(-time.Second)}, ErrInvalidArgument},
		{"negative ProcessIn", NewTask("x", nil), []Option{ProcessIn(-time.Second)}, ErrInvalidArgument},
		{"short Unique", NewTask("x", nil), []Option{Unique(time.Millisecond)}, ErrInvalidArgument},
		{"deadline in the past", NewTask("x", nil), []Option{Deadline(time.Now().Add(-time.Minute))}, ErrInvalidArgument},
		{"payload too large", NewTask("x", big), nil, ErrPayloadTooLarge},
		{"queue with brace", NewTask("x", nil), []Option{Queue("a{b}")}, ErrInvalidArgument},
		{"queue with colon", NewTask("x", nil), []Option{Queue("a:b")}, ErrInvalidArgument},
		{"queue with newline", NewTask("x", nil), []Option{Queue("a\nb")}, ErrInvalidArgument},
		{"empty queue", NewTask("x", nil), []Option{Queue("")}, ErrInvalidArgument},
		{"long queue", NewTask("x", nil), []Option{Queue(strings.Repeat("q", 101))}, ErrInvalidArgument},
		{"empty task ID", NewTask("x", nil), []Option{TaskID("")}, ErrInvalidArgument},
		{"bad group", NewTask("x", nil), []Option{Group("a:b")}, ErrInvalidArgument},
		{"nil option", NewTask("x", nil), []Option{nil}, ErrInvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Enqueue(tc.task, tc.opts...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want an error wrapping %v", err, tc.want)
			}
		})
	}
	queues, err := brokerOf(st).Queues(context.Background())
	if err != nil || len(queues) != 0 {
		t.Fatalf("bad input wrote queues %v (err %v)", queues, err)
	}
}

func TestOpenUnknownScheme(t *testing.T) {
	for _, u := range []string{"postgres://x", "nothing", "", "file"} {
		_, err := Open(u)
		if !errors.Is(err, ErrUnknownScheme) || !strings.Contains(err.Error(), "redis://") && !strings.Contains(err.Error(), "redis,") {
			t.Errorf("Open(%q) = %v; want ErrUnknownScheme naming the known schemes", u, err)
		}
	}
}

func TestOpenHidesPassword(t *testing.T) {
	for _, u := range []string{"postgres://u:p@ss@db", "redis://u:p@ss@127.0.0.1:bad", "redis://u:p/ss@127.0.0.1:bad"} {
		_, err := Open(u)
		if err == nil {
			t.Fatalf("Open(%q) succeeded", u)
		}
		if strings.Contains(err.Error(), "p@ss") || strings.Contains(err.Error(), "p/ss") || strings.Contains(err.Error(), "ss@") {
			t.Errorf("Open(%q) = %v shows the password", u, err)
		}
	}
}

func TestUniqueAndTaskIDConflict(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	first, err := c.Enqueue(NewTask("report", []byte("p")), Unique(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(NewTask("report", []byte("p")), Unique(time.Hour)); !errors.Is(err, ErrDuplicateTask) {
		t.Fatalf("second unique enqueue: %v, want ErrDuplicateTask", err)
	}
	// Another payload or queue is another task.
	if _, err := c.Enqueue(NewTask("report", []byte("q")), Unique(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(NewTask("report", []byte("p")), Unique(time.Hour), Queue("other")); err != nil {
		t.Fatal(err)
	}
	// Deleting the task releases the lock.
	if err := brokerOf(st).DeleteTask(context.Background(), "default", first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(NewTask("report", []byte("p")), Unique(time.Hour)); err != nil {
		t.Fatalf("after delete: %v", err)
	}

	if _, err := c.Enqueue(NewTask("a", nil), TaskID("same")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(NewTask("b", []byte("other")), TaskID("same")); !errors.Is(err, ErrTaskIDConflict) {
		t.Fatalf("got %v, want ErrTaskIDConflict", err)
	}
	if got := taskInfo(t, st, "default", "same"); got.Type != "a" {
		t.Fatalf("conflicting enqueue overwrote the task: %+v", got)
	}
}

func TestEnqueueBatch(t *testing.T) {
	st := openTestStorage(t)
	c := NewClient(st)
	ctx := context.Background()
	tasks := make([]*Task, 100)
	for i := range tasks {
		tasks[i] = NewTask("batch", []byte{byte(i)})
	}
	infos, err := c.EnqueueBatch(ctx, tasks, Queue("b"))
	if err != nil {
		t.Fatal(err)
	}
	for i, info := range infos {
		if got := taskInfo(t, st, "b", info.ID); got.Payload[0] != byte(i) || got.State != TaskStatePending {
			t.Fatalf("task %d stored as %+v", i, got)
		}
	}
	// One conflicting task: the others are stored, the error names it.
	infos, err = c.EnqueueBatch(ctx, []*Task{NewTask("ok", nil), NewTask("dup", nil, TaskID(infos[0].ID))}, Queue("b"))
	var be *BatchError
	if !errors.As(err, &be) || !errors.Is(err, ErrTaskIDConflict) || be.Errs[0] != nil || be.Errs[1] == nil {
		t.Fatalf("got %v, want a BatchError with task 1 conflicting", err)
	}
	if infos[0] == nil || infos[1] != nil {
		t.Fatalf("infos = %v", infos)
	}
	// One invalid task: nothing is written.
	_, err = c.EnqueueBatch(ctx, []*Task{NewTask("fine", nil, Queue("c")), NewTask("", nil, Queue("c"))})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
	queues, _ := brokerOf(st).Queues(ctx)
	for _, q := range queues {
		if q == "c" {
			t.Fatal("an invalid batch wrote its valid tasks")
		}
	}
}

// On a Redis storage opened with wait_replicas and no replica, Enqueue and
// EnqueueBatch fail with ErrReplicationTimeout, and the task was stored.
func TestEnqueueReplicationTimeout(t *testing.T) {
	st, err := OpenContext(t.Context(), redistest.URL(t)+"?wait_replicas=1&wait_timeout=20ms")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := NewClient(st)
	if _, err := c.Enqueue(NewTask("t", nil), TaskID("w1")); !errors.Is(err, ErrReplicationTimeout) {
		t.Fatalf("Enqueue: %v, want ErrReplicationTimeout", err)
	}
	if info := taskInfo(t, st, "default", "w1"); info.State != TaskStatePending {
		t.Fatalf("task after the timeout: %+v, want pending", info)
	}
	_, err = c.EnqueueBatch(t.Context(), []*Task{NewTask("t", nil), NewTask("t", nil)})
	if !errors.Is(err, ErrReplicationTimeout) {
		t.Fatalf("EnqueueBatch: %v, want ErrReplicationTimeout", err)
	}
}
