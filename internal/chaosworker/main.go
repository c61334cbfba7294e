// Command chaosworker is a worker process for htq's reliability suites
// (the chaos folder): the suites start several, kill them with SIGKILL,
// stop them with SIGSTOP, and check afterwards what they recorded.
//
// It runs an htq.Server on one queue whose handler sleeps for the
// duration the task's payload names (chaostest.Payload), and appends to
// its own history file (chaostest.Log) a start event when a handler
// starts, a done event when it returns nil, a cancel event when its
// context is cancelled, a refused event when the server logs that it
// dropped an outcome because the task's lease had been lost, and a warned
// event for every warning and error the server logs. With
// -produce it also enqueues tasks, recording invoke, ack and fail events:
// the embedded store has one owner process, which must produce too.
//
// It prints "ready" on stdout once the server runs, and shuts down
// gracefully on SIGTERM or SIGINT.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
)

// options are the command's flags.
type options struct {
	storage, queue, history, name string
	concurrency                   int
	lease, shutdown               time.Duration
	writeResult                   bool

	produce, from, producers int
	prefix                   string
	rate                     float64
	minWork, maxWork         time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.storage, "storage", "", "storage URL")
	flag.StringVar(&o.queue, "queue", "chaos", "queue to serve (and to produce into)")
	flag.StringVar(&o.history, "history", "", "history file to append to")
	flag.StringVar(&o.name, "name", "", "this incarnation's name in the history")
	flag.IntVar(&o.concurrency, "concurrency", 16, "Config.Concurrency (0: do not serve)")
	flag.DurationVar(&o.lease, "lease", 2*time.Second, "Config.LeaseDuration")
	flag.DurationVar(&o.shutdown, "shutdown-timeout", 5*time.Second, "Config.ShutdownTimeout")
	flag.BoolVar(&o.writeResult, "write-result", false, "write this incarnation's name as each task's result")
	flag.IntVar(&o.produce, "produce", 0, "enqueue the tasks numbered -from up to this number (exclusive)")
	flag.IntVar(&o.from, "from", 0, "first task number to enqueue")
	flag.IntVar(&o.producers, "producers", 4, "goroutines that enqueue")
	flag.StringVar(&o.prefix, "prefix", "t", "task ID prefix")
	flag.Float64Var(&o.rate, "rate", 200, "enqueues per second")
	flag.DurationVar(&o.minWork, "min-work", 10*time.Millisecond, "shortest task")
	flag.DurationVar(&o.maxWork, "max-work", 200*time.Millisecond, "longest task")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "chaosworker:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.storage == "" || o.history == "" || o.name == "" {
		return errors.New("-storage, -history and -name are required")
	}
	hist, err := chaostest.OpenLog(o.history, o.name)
	if err != nil {
		return err
	}
	defer hist.Close()
	logger := slog.New(&teeHandler{
		inner: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}),
		hist:  hist,
	})
	st, err := htq.OpenWithOptions(context.Background(), o.storage, htq.OpenOptions{Logger: logger})
	if err != nil {
		return err
	}
	defer st.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	var srv *htq.Server
	if o.concurrency > 0 {
		srv = htq.NewServer(st, htq.Config{
			Concurrency:     o.concurrency,
			Queues:          map[string]int{o.queue: 1},
			LeaseDuration:   o.lease,
			ShutdownTimeout: o.shutdown,
			// A task whose worker died runs again at once.
			RetryDelayFunc: func(int, error, *htq.Task) time.Duration { return 0 },
			Logger:         logger,
		})
		if err := srv.Start(handler(o, hist)); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	if o.produce > o.from {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := chaostest.Produce(ctx, htq.NewClient(st), hist, chaostest.ProduceParams{
				Queue: o.queue, Prefix: o.prefix, From: o.from, To: o.produce, Producers: o.producers,
				Rate: o.rate, MinWork: o.minWork, MaxWork: o.maxWork,
			})
			if err != nil {
				fmt.Fprintln(os.Stderr, "chaosworker:", err)
				os.Exit(2)
			}
		}()
	}
	fmt.Println("ready")
	<-ctx.Done()
	wg.Wait()
	if srv != nil {
		srv.Shutdown()
	}
	return nil
}

// handler records the start, sleeps for the task's duration and records
// its end.
func handler(o options, hist *chaostest.Log) htq.Handler {
	return htq.HandlerFunc(func(ctx context.Context, t *htq.Task) error {
		id, _ := htq.GetTaskID(ctx)
		retried, _ := htq.GetRetryCount(ctx)
		record(hist, chaostest.Event{Kind: chaostest.Start, ID: id, Attempt: retried + 1})
		d, err := chaostest.ParsePayload(t.Payload())
		if err != nil {
			return fmt.Errorf("%w: %v", htq.SkipRetry, err)
		}
		timer := time.NewTimer(d)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-ctx.Done():
			cause := context.Cause(ctx)
			record(hist, chaostest.Event{Kind: chaostest.Cancel, ID: id, Note: cause.Error()})
			return cause
		}
		if o.writeResult {
			if _, err := t.ResultWriter().Write([]byte(o.name)); err != nil {
				record(hist, chaostest.Event{Kind: chaostest.Refused, ID: id, Note: "result: " + err.Error()})
				return err
			}
		}
		record(hist, chaostest.Event{Kind: chaostest.Done, ID: id})
		return nil
	})
}

// record appends e to the history; a history that cannot be written ends
// the process (the suite would otherwise check an incomplete record).
func record(hist *chaostest.Log, e chaostest.Event) {
	if err := hist.Record(e); err != nil {
		fmt.Fprintln(os.Stderr, "chaosworker:", err)
		os.Exit(2)
	}
}

// teeHandler passes every record to inner, records each warning and
// error in the history as a warned event, and records a refused event for
// each warning by which the server says it dropped a task's outcome
// because the task's lease had been lost or the storage did not take it
// (the processor's "outcome dropped", the acker's "had lost its lease" and
// "not recorded").
type teeHandler struct {
	inner slog.Handler
	hist  *chaostest.Log
}

func (h *teeHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *teeHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var id, errText string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "id":
				id = a.Value.String()
			case "err":
				errText = a.Value.String()
			}
			return true
		})
		note := r.Message
		if errText != "" {
			note += ": " + errText
		}
		record(h.hist, chaostest.Event{Kind: chaostest.Warned, ID: id, Note: note})
		if id != "" && (strings.Contains(r.Message, "outcome dropped") || strings.Contains(r.Message, "had lost its lease") ||
			strings.Contains(r.Message, "not recorded")) {
			record(h.hist, chaostest.Event{Kind: chaostest.Refused, ID: id, Note: r.Message})
		}
	}
	return h.inner.Handle(ctx, r)
}

func (h *teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &teeHandler{inner: h.inner.WithAttrs(as), hist: h.hist}
}

func (h *teeHandler) WithGroup(name string) slog.Handler {
	return &teeHandler{inner: h.inner.WithGroup(name), hist: h.hist}
}
