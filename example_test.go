package htq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/htqueue/htq"
)

// A Client enqueues; a Server runs the task with the handler for its type.
func Example() {
	st, err := htq.Open("mem:") // or "redis://127.0.0.1:6379/0", "file:./htq-data"
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	done := make(chan string)
	mux := htq.NewServeMux()
	mux.HandleFunc("greet", func(ctx context.Context, t *htq.Task) error {
		done <- "hello, " + string(t.Payload())
		return nil
	})
	srv := htq.NewServer(st, htq.Config{Concurrency: 2})
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()

	if _, err := htq.NewClient(st).Enqueue(htq.NewTask("greet", []byte("Ada"))); err != nil {
		log.Fatal(err)
	}
	fmt.Println(<-done)
	// Output: hello, Ada
}

// Unique refuses a second task with the same type and payload while the
// first holds its lock; TaskID refuses a second task with the same ID.
func ExampleUnique() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	c := htq.NewClient(st)

	_, err := c.Enqueue(htq.NewTask("report", []byte("2026-11")), htq.Unique(time.Hour))
	fmt.Println(err)
	_, err = c.Enqueue(htq.NewTask("report", []byte("2026-11")), htq.Unique(time.Hour))
	fmt.Println(errors.Is(err, htq.ErrDuplicateTask))
	// Output:
	// <nil>
	// true
}

// Scheduled tasks wait in the scheduled state until their time.
func ExampleProcessIn() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	info, err := htq.NewClient(st).Enqueue(htq.NewTask("reminder", nil), htq.ProcessIn(24*time.Hour))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.State)
	// Output: scheduled
}

// A handler's error retries the task; wrapping SkipRetry archives it at once.
func ExampleSkipRetry() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	failed := make(chan struct{})
	srv := htq.NewServer(st, htq.Config{
		ErrorHandler: htq.ErrorHandlerFunc(func(ctx context.Context, t *htq.Task, err error) { close(failed) }),
	})
	_ = srv.Start(htq.HandlerFunc(func(ctx context.Context, t *htq.Task) error {
		return fmt.Errorf("malformed payload %q: %w", t.Payload(), htq.SkipRetry)
	}))
	info, _ := htq.NewClient(st).Enqueue(htq.NewTask("parse", []byte("{")))
	<-failed
	srv.Shutdown() // writes the outcome before it returns
	got, _ := htq.NewInspector(st).GetTaskInfo("default", info.ID)
	fmt.Println(got.State, got.LastErr)
	// Output: archived malformed payload "{": skip retry for the task
}

// The Inspector reads queues and manages their tasks.
func ExampleInspector_GetQueueInfo() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	c := htq.NewClient(st)
	for i := 0; i < 3; i++ {
		_, _ = c.Enqueue(htq.NewTask("email", nil), htq.Queue("mail"))
	}
	_, _ = c.Enqueue(htq.NewTask("email", nil), htq.Queue("mail"), htq.ProcessIn(time.Hour))
	qi, err := htq.NewInspector(st).GetQueueInfo("mail")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(qi.Size, qi.Pending, qi.Scheduled)
	// Output: 4 3 1
}

// A Scheduler enqueues periodic tasks; several Schedulers with the same
// entries enqueue each tick once between them.
func ExampleScheduler_Register() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	s := htq.NewScheduler(st, &htq.SchedulerOpts{Location: time.UTC})
	_, err := s.Register("0 3 * * *", htq.NewTask("cleanup", nil))
	fmt.Println(err)
	_, err = s.Register("0 25 * * *", htq.NewTask("cleanup", nil))
	fmt.Println(err)
	// Output:
	// <nil>
	// htq: invalid argument: cron spec "0 25 * * *": field 2 (hour) "25": end of range (25) above maximum (23): 25
}

// Priority orders a queue's pending tasks: the highest priority first, in
// enqueue order within one priority.
func ExamplePriority() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	c := htq.NewClient(st)
	for _, t := range []struct {
		id   string
		prio int
	}{{"newsletter", 0}, {"password-reset", 9}, {"invoice", 5}, {"digest", 0}} {
		if _, err := c.Enqueue(htq.NewTask("email", nil), htq.TaskID(t.id), htq.Priority(t.prio)); err != nil {
			log.Fatal(err)
		}
	}
	tasks, _ := htq.NewInspector(st).ListPendingTasks("default")
	for _, t := range tasks {
		fmt.Println(t.Priority, t.ID)
	}
	// Output:
	// 9 password-reset
	// 5 invoice
	// 0 newsletter
	// 0 digest
}
