package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"
)

// KeyedBatchEnqueuer is implemented by adapters whose library shares a
// queue fairly among keys (the fair scenario): every payload becomes one
// task ready for immediate processing that carries key ("" for none).
type KeyedBatchEnqueuer interface {
	EnqueueBatchKeyed(ctx context.Context, key string, payloads [][]byte) error
}

// scenarioFair measures fair sharing by key: n tasks of key "big" are
// enqueued, then -small tasks of key "small", and a worker of concurrency
// conc drains the queue. It reports after how many tasks, and how long
// after the start, the last small task ran: with fair sharing the keys
// alternate, so the small tasks are done after about 2 × small tasks
// (small_done_after_tasks), of which about small are big ones
// (big_before_small_done). With -fair-keys=false the same tasks carry no
// key: the baseline, where the small ones wait behind every big one. The
// window covers the whole drain (tasks_per_s, CPU and Redis work per task
// over n + small tasks).
func scenarioFair(ctx context.Context, c config, ad *admin) error {
	n, small, conc := def(c.n, 100000), def(c.small, 100), def(c.conc, 10)
	if err := ad.flushAll(ctx); err != nil {
		return err
	}
	impl, err := newImpl(c.impl, c.addr, c.queue, c.implOpts)
	if err != nil {
		return err
	}
	defer impl.Close()
	ke, ok := impl.(KeyedBatchEnqueuer)
	if !ok {
		fmt.Fprintf(os.Stderr, "peerbench: %s has no fair sharing by key; fair skipped\n", impl.Name())
		return nil
	}
	bigKey, smallKey := "big", "small"
	if !c.fairKeys {
		bigKey, smallKey = "", ""
	}
	pre := time.Now()
	const batch = 1000
	for i := 0; i < n; i += batch {
		ps := make([][]byte, min(batch, n-i))
		for j := range ps {
			ps[j] = payload(c.payload, i+j)
		}
		if err := ke.EnqueueBatchKeyed(ctx, bigKey, ps); err != nil {
			return err
		}
	}
	ps := make([][]byte, small)
	for j := range ps {
		ps[j] = payload(c.payload, n+j) // index ≥ n: a small task
	}
	if err := ke.EnqueueBatchKeyed(ctx, smallKey, ps); err != nil {
		return err
	}
	preload := time.Since(pre)

	var count, smalls, doneAfter, firstNS, doneNS atomic.Int64
	done := make(chan struct{})
	start := time.Now()
	h := func(p []byte) {
		k := count.Add(1)
		if k == 1 {
			firstNS.Store(int64(time.Since(start)))
		}
		if payloadIndex(p) >= n && smalls.Add(1) == int64(small) {
			doneAfter.Store(k)
			doneNS.Store(int64(time.Since(start)))
		}
		if k == int64(n+small) {
			close(done)
		}
	}
	w, err := startWindow(ctx, ad, c.cpuprofile)
	if err != nil {
		return err
	}
	start = time.Now()
	stop, err := impl.StartWorkers(conc, h)
	if err != nil {
		return err
	}
	timedOut := false
	select {
	case <-done:
	case <-time.After(c.timeout):
		timedOut = true
	}
	f, wall, err := w.end(ctx, n+small)
	if err != nil {
		return err
	}
	stop()
	got := count.Load()
	f["n"], f["small"], f["conc"], f["payload_bytes"], f["keys"] = n, small, conc, c.payload, c.fairKeys
	f["processed"] = got
	f["tasks_per_s"] = round(float64(got)/wall.Seconds(), 1)
	f["preload_s"] = round(preload.Seconds(), 3)
	f["timed_out"] = timedOut
	f["small_done_after_tasks"] = doneAfter.Load()
	f["big_before_small_done"] = doneAfter.Load() - int64(small)
	// From the first task's start to the last small task's: also as a
	// number of tasks at the drain's average rate (the time of roughly
	// how many big tasks the small key waited).
	doneIn := time.Duration(doneNS.Load() - firstNS.Load())
	f["small_done_s"] = round(doneIn.Seconds(), 4)
	f["small_done_in_task_times"] = round(doneIn.Seconds()*float64(got)/wall.Seconds(), 1)
	emit(c, "fair", impl, f)
	if timedOut {
		return fmt.Errorf("only %d of %d processed within %v", got, n+small, c.timeout)
	}
	return nil
}
