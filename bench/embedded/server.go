package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/htqueue/htq"
)

// The Server-level scenarios run htq's public API on a file: storage that
// the client and the server share (one process owns an embedded store).

const taskType = "bench:noop"

func openStorage(dir string) (*htq.Storage, error) { return htq.Open("file:" + dir) }

func newServer(st *htq.Storage, conc int) *htq.Server {
	return htq.NewServer(st, htq.Config{
		Concurrency: conc,
		Queues:      map[string]int{"default": 1},
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// scenarioServerProcess preloads n tasks, then starts a Server with a no-op
// handler and measures how fast it drains them.
func scenarioServerProcess(ctx context.Context, c config) error {
	n := def(c.n, 100_000)
	conc := def(c.conc, 10)
	dir, cleanup, err := scratch(c)
	if err != nil {
		return err
	}
	defer cleanup()
	st, err := openStorage(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	client := htq.NewClient(st)
	t0 := time.Now()
	for i := 0; i < n; i += 1000 {
		tasks := make([]*htq.Task, 0, 1000)
		for j := i; j < min(n, i+1000); j++ {
			tasks = append(tasks, htq.NewTask(taskType, make([]byte, c.payload)))
		}
		if _, err := client.EnqueueBatch(ctx, tasks); err != nil {
			return err
		}
	}
	preload := time.Since(t0)
	var done atomic.Int64
	all := make(chan struct{})
	srv := newServer(st, conc)
	mux := htq.NewServeMux()
	mux.HandleFunc(taskType, func(context.Context, *htq.Task) error {
		if done.Add(1) == int64(n) {
			close(all)
		}
		return nil
	})
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		return err
	}
	timedOut := false
	select {
	case <-all:
	case <-time.After(10 * time.Minute):
		timedOut = true
	}
	wall := time.Since(start)
	srv.Shutdown()
	emit(c, "process", map[string]any{
		"n": n, "conc": conc, "payload_bytes": c.payload,
		"level":       "htq.Server, no-op handler",
		"processed":   done.Load(),
		"wall_s":      round(wall.Seconds(), 4),
		"tasks_per_s": round(float64(done.Load())/wall.Seconds(), 1),
		"preload_s":   round(preload.Seconds(), 3),
		"timed_out":   timedOut,
	})
	return nil
}

// scenarioLatency enqueues n tasks at rate per second into an idle Server
// and measures handler start minus enqueue start for each.
func scenarioLatency(ctx context.Context, c config) error {
	n := def(c.n, 2000)
	rate := def(c.rate, 500)
	conc := def(c.conc, 10)
	dir, cleanup, err := scratch(c)
	if err != nil {
		return err
	}
	defer cleanup()
	st, err := openStorage(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	client := htq.NewClient(st)
	sent := make([]atomic.Int64, n)
	lat := make([]float64, n)
	var got atomic.Int64
	all := make(chan struct{})
	srv := newServer(st, conc)
	mux := htq.NewServeMux()
	var mu sync.Mutex
	mux.HandleFunc(taskType, func(_ context.Context, t *htq.Task) error {
		now := time.Now().UnixNano()
		i := binary.BigEndian.Uint64(t.Payload())
		mu.Lock()
		lat[i] = float64(now-sent[i].Load()) / 1e6
		mu.Unlock()
		if got.Add(1) == int64(n) {
			close(all)
		}
		return nil
	})
	if err := srv.Start(mux); err != nil {
		return err
	}
	defer srv.Shutdown()
	time.Sleep(500 * time.Millisecond) // let the server go idle
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	for i := range n {
		time.Sleep(time.Until(next))
		next = next.Add(interval)
		p := make([]byte, max(8, c.payload))
		binary.BigEndian.PutUint64(p, uint64(i))
		sent[i].Store(time.Now().UnixNano())
		if _, err := client.EnqueueContext(ctx, htq.NewTask(taskType, p)); err != nil {
			return err
		}
	}
	select {
	case <-all:
	case <-time.After(time.Minute):
		return fmt.Errorf("only %d of %d tasks ran", got.Load(), n)
	}
	f := map[string]any{"n": n, "conc": conc, "payload_bytes": c.payload, "target_rate": rate,
		"level": "htq.Server; latency = handler start - Enqueue call start (includes the durable write)"}
	for k, v := range distribution(lat) {
		f["latency_"+k] = v
	}
	emit(c, "latency", f)
	return nil
}
