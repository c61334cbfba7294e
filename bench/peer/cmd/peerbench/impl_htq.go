package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/htqueue/htq"
	"github.com/redis/go-redis/v9"
)

// htqImpl drives github.com/htqueue/htq through its public API only. The
// client and each worker server open their own Storage (their own Redis
// connections), as separate processes would. Every Config field not set here
// stays at htq's default, unless a noted variant sets one through -impl-opt:
//
//	task_check_interval=DURATION          Config.TaskCheckInterval
//	delayed_task_check_interval=DURATION  Config.DelayedTaskCheckInterval
//	cluster=true                          addr is a node of a Redis Cluster (redis-cluster://)
//	retention=DURATION                    htq.Retention on every task (as htq serve keeps its tasks)
//	event_log=N                           the storage URL's event_log parameter (0: the event log off)
//
// -queue may name several queues, comma-separated: enqueues go to them in
// turn and the workers serve them all with equal weight (the scale-out
// scenario's "6 queues").
type htqImpl struct {
	url    string
	queue  string
	queues []string
	next   atomic.Uint64 // the queue of the next enqueue, round robin
	st     *htq.Storage
	client *htq.Client
	// rdb reads the pending count (LLEN of the queue's pending list, see
	// docs/redis-layout.md); nil for the embedded store.
	rdb *redis.Client
	// dir is the data directory of the embedded store ("htq-file"), which
	// one process owns: the client and the workers share st.
	dir string

	taskCheck, delayedCheck time.Duration
	// retention, when not 0, is given to every task (htq.Retention).
	retention time.Duration
}

const htqTaskType = "bench:noop"

func init() {
	registerImpl("htq", func(addr, queue string, opts map[string]string) (Impl, error) {
		url := "redis://" + addr + "/0"
		if opts["cluster"] == "true" {
			url = "redis-cluster://" + addr
		}
		// A copy without "cluster": the scale-out scenario passes the
		// caller's options on to its worker processes, which need it too.
		rest := make(map[string]string, len(opts))
		for k, v := range opts {
			if k != "cluster" {
				rest[k] = v
			}
		}
		return newHTQ(&htqImpl{url: url, queue: queue}, addr, rest)
	})
	// htq on its embedded store (file:, a fresh temporary directory per
	// run): the same scenarios, Redis unused.
	registerImpl("htq-file", func(addr, queue string, opts map[string]string) (Impl, error) {
		dir, err := os.MkdirTemp("", "htq-bench-")
		if err != nil {
			return nil, err
		}
		return newHTQ(&htqImpl{url: "file:" + dir, queue: queue, dir: dir}, "", opts)
	})
}

func newHTQ(h *htqImpl, addr string, opts map[string]string) (Impl, error) {
	h.queues = strings.Split(h.queue, ",")
	{
		for k, v := range opts {
			if k == "event_log" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("htq option event_log %q: want a number of entries (0 turns the log off)", v)
				}
				sep := "?"
				if strings.Contains(h.url, "?") {
					sep = "&"
				}
				h.url += sep + "event_log=" + v
				continue
			}
			d, err := time.ParseDuration(v)
			if err != nil {
				return nil, fmt.Errorf("htq option %s: %v", k, err)
			}
			switch k {
			case "task_check_interval":
				h.taskCheck = d
			case "delayed_task_check_interval":
				h.delayedCheck = d
			case "retention":
				h.retention = d
			default:
				return nil, fmt.Errorf("unknown htq option %q", k)
			}
		}
		st, err := htq.Open(h.url)
		if err != nil {
			return nil, err
		}
		h.st = st
		h.client = htq.NewClient(st)
		if h.dir == "" && len(h.queues) == 1 && strings.HasPrefix(h.url, "redis://") {
			h.rdb = redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
		}
		return h, nil
	}
}

func (h *htqImpl) Name() string {
	if h.dir != "" {
		return "htq-file"
	}
	return "htq"
}
func (h *htqImpl) Version() string { return moduleVersion("github.com/htqueue/htq") }

// pick returns the queue of the next enqueue (round robin).
func (h *htqImpl) pick() string {
	return h.queues[(h.next.Add(1)-1)%uint64(len(h.queues))]
}

// opts returns the options of the next enqueue: its queue, and the
// retention when one is set.
func (h *htqImpl) opts(more ...htq.Option) []htq.Option {
	o := append([]htq.Option{htq.Queue(h.pick())}, more...)
	if h.retention > 0 {
		o = append(o, htq.Retention(h.retention))
	}
	return o
}

func (h *htqImpl) Enqueue(ctx context.Context, payload []byte) error {
	_, err := h.client.EnqueueContext(ctx, htq.NewTask(htqTaskType, payload), h.opts()...)
	return err
}

func (h *htqImpl) EnqueueIn(ctx context.Context, payload []byte, d time.Duration) error {
	_, err := h.client.EnqueueContext(ctx, htq.NewTask(htqTaskType, payload), h.opts(htq.ProcessIn(d))...)
	return err
}

// EnqueueBatch makes the harness's enqueue-batch scenario use htq's
// Client.EnqueueBatch (one round trip per call).
func (h *htqImpl) EnqueueBatch(ctx context.Context, payloads [][]byte) error {
	tasks := make([]*htq.Task, len(payloads))
	for i, p := range payloads {
		tasks[i] = htq.NewTask(htqTaskType, p)
	}
	_, err := h.client.EnqueueBatch(ctx, tasks, h.opts()...)
	return err
}

// EnqueueBatchKeyed makes the fair scenario's tasks, with htq.Key (no
// option for "").
func (h *htqImpl) EnqueueBatchKeyed(ctx context.Context, key string, payloads [][]byte) error {
	tasks := make([]*htq.Task, len(payloads))
	for i, p := range payloads {
		tasks[i] = htq.NewTask(htqTaskType, p)
	}
	opts := []htq.Option{htq.Queue(h.pick())}
	if key != "" {
		opts = append(opts, htq.Key(key))
	}
	_, err := h.client.EnqueueBatch(ctx, tasks, opts...)
	return err
}

func (h *htqImpl) StartWorkers(concurrency int, handler Handler) (func(), error) {
	st, closeStorage := h.st, func() {}
	if h.dir == "" {
		var err error
		if st, err = htq.Open(h.url); err != nil {
			return nil, err
		}
		closeStorage = func() { st.Close() }
	}
	srv := htq.NewServer(st, htq.Config{
		Concurrency:              concurrency,
		Queues:                   h.weights(),
		Logger:                   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		TaskCheckInterval:        h.taskCheck,    // 0 = default
		DelayedTaskCheckInterval: h.delayedCheck, // 0 = default
	})
	mux := htq.NewServeMux()
	mux.HandleFunc(htqTaskType, func(ctx context.Context, t *htq.Task) error {
		handler(t.Payload())
		return nil
	})
	if err := srv.Start(mux); err != nil {
		closeStorage()
		return nil, err
	}
	return func() { srv.Shutdown(); closeStorage() }, nil
}

// Pending reports how many tasks of the benchmark queue wait to be processed.
func (h *htqImpl) Pending(ctx context.Context) (int64, error) {
	if h.rdb == nil {
		var n int64
		for _, q := range h.queues {
			qi, err := htq.NewInspector(h.st).GetQueueInfo(q)
			if err != nil {
				return 0, err
			}
			n += int64(qi.Pending)
		}
		return n, nil
	}
	return h.rdb.LLen(ctx, "htq:{"+h.queue+"}:pending").Result()
}

// weights gives every benchmark queue weight 1.
func (h *htqImpl) weights() map[string]int {
	w := make(map[string]int, len(h.queues))
	for _, q := range h.queues {
		w[q] = 1
	}
	return w
}

func (h *htqImpl) Close() error {
	if h.rdb != nil {
		h.rdb.Close()
	}
	h.client.Close()
	err := h.st.Close()
	if h.dir != "" {
		os.RemoveAll(h.dir)
	}
	return err
}
