// Command testworker is a Server process for htq's failure tests: the
// tests build it, run it, and kill it (SIGKILL) or stop it (SIGTERM) while
// it runs tasks. It prints one line per event on stdout:
//
//	ready                 the server is about to start
//	start <id>            a handler started
//	done <id>             a handler returned nil
//	baddeps <id> <why>    a workflow task found a dependency that did not
//	                      succeed, or could not read its dependencies
//	exit                  Run returned after a signal
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/htqueue/htq"
)

func main() {
	storage := flag.String("storage", "", "storage URL")
	queue := flag.String("queue", "default", "queue to serve")
	concurrency := flag.Int("concurrency", 4, "Config.Concurrency")
	lease := flag.Duration("lease", 2*time.Second, "Config.LeaseDuration")
	work := flag.Duration("work", time.Second, "how long each task runs")
	shutdown := flag.Duration("shutdown-timeout", 8*time.Second, "Config.ShutdownTimeout")
	retryDelay := flag.Duration("retry-delay", -1, "the delay of every retry (negative: Config's default)")
	flag.Parse()

	st, err := htq.Open(*storage)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	cfg := htq.Config{
		Concurrency:     *concurrency,
		Queues:          map[string]int{*queue: 1},
		LeaseDuration:   *lease,
		ShutdownTimeout: *shutdown,
		Logger:          slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if *retryDelay >= 0 {
		cfg.RetryDelayFunc = func(int, error, *htq.Task) time.Duration { return *retryDelay }
	}
	srv := htq.NewServer(st, cfg)
	h := htq.HandlerFunc(func(ctx context.Context, t *htq.Task) error {
		id, _ := htq.GetTaskID(ctx)
		say("start %s", id)
		if _, _, ok := htq.GetWorkflowID(ctx); ok {
			deps, err := htq.Dependencies(ctx)
			if err != nil {
				say("baddeps %s %v", id, err)
			}
			for _, d := range deps {
				if d.Outcome != htq.OutcomeSucceeded {
					say("baddeps %s %s is %v", id, d.ID, d.Outcome)
				}
			}
		}
		select {
		case <-time.After(*work):
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		say("done %s", id)
		return nil
	})
	say("ready")
	if err := srv.Run(h); err != nil {
		log.Fatal(err)
	}
	say("exit")
}
