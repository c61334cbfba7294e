package htq_test

import (
	"context"
	"fmt"
	"log"

	"github.com/htqueue/htq"
)

// Events follows what happens to the tasks of a queue, whoever runs them:
// the events come from the storage, written with each change.
func ExampleInspector_Events() {
	st, err := htq.Open("mem:")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := htq.NewInspector(st).Events(ctx, "mail")
	if err != nil {
		log.Fatal(err)
	}

	srv := htq.NewServer(st, htq.Config{Queues: map[string]int{"mail": 1}})
	if err := srv.Start(htq.HandlerFunc(func(ctx context.Context, t *htq.Task) error { return nil })); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	if _, err := htq.NewClient(st).Enqueue(htq.NewTask("send", nil), htq.Queue("mail")); err != nil {
		log.Fatal(err)
	}
	for range 3 {
		ev := <-events
		if ev.State == 0 { // the task is gone: it kept no result
			fmt.Println(ev.Kind, ev.Queue)
			continue
		}
		fmt.Println(ev.Kind, ev.Queue, ev.State)
	}
	// Output:
	// enqueued mail pending
	// started mail active
	// succeeded mail
}
