package htq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/htqueue/htq"
)

// A workflow runs each task once the tasks it depends on have finished;
// a handler reads their results.
func ExampleWorkflow() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	done := make(chan string)
	mux := htq.NewServeMux()
	mux.HandleFunc("word", func(ctx context.Context, t *htq.Task) error {
		_, err := t.ResultWriter().Write(t.Payload())
		return err
	})
	mux.HandleFunc("join", func(ctx context.Context, t *htq.Task) error {
		deps, err := htq.Dependencies(ctx)
		if err != nil {
			return err
		}
		var words []string
		for _, d := range deps {
			words = append(words, string(d.Result))
		}
		done <- strings.Join(words, " ")
		return nil
	})
	srv := htq.NewServer(st, htq.Config{Concurrency: 2})
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()

	wf := htq.NewWorkflow()
	wf.Add("hello", htq.NewTask("word", []byte("hello")))
	wf.Add("world", htq.NewTask("word", []byte("world")))
	wf.Add("join", htq.NewTask("join", nil), htq.DependsOn("hello", "world"))
	info, err := htq.NewClient(st).EnqueueWorkflow(context.Background(), wf)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Tasks[2].State)
	fmt.Println(<-done)
	// Output:
	// waiting
	// hello world
}

// A cycle is refused with an error naming the tasks along it, and
// nothing is stored.
func ExampleClient_EnqueueWorkflow_cycle() {
	st, _ := htq.Open("mem:")
	defer st.Close()
	wf := htq.NewWorkflow()
	wf.Add("a", htq.NewTask("t", nil), htq.DependsOn("b"))
	wf.Add("b", htq.NewTask("t", nil), htq.DependsOn("a"))
	_, err := htq.NewClient(st).EnqueueWorkflow(context.Background(), wf)
	var we *htq.WorkflowError
	fmt.Println(errors.Is(err, htq.ErrWorkflowCycle), errors.As(err, &we), we.Tasks)
	// Output: true true [a b]
}
