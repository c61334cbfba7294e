package chaostest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/htqueue/htq"
)

// EnqueueTimeout bounds each Enqueue of a suite's producer.
const EnqueueTimeout = 10 * time.Second

// Enqueue enqueues the suite task id into queue, with a handler that runs
// for work, and records the invocation and its outcome in hist: ack when
// Enqueue returned nil or the ID is taken (an earlier, killed producer
// stored it, maybe without recording the acknowledgement), fail
// otherwise. The task keeps 1,000 retries, so that no number of faults
// archives it, and is retained a day once completed, so that the suite
// can read its final state. The returned error is the history's, not the
// Enqueue's.
func Enqueue(ctx context.Context, c *htq.Client, hist *Log, queue, id string, work time.Duration) error {
	if err := hist.Record(Event{Kind: Invoke, ID: id}); err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, EnqueueTimeout)
	defer cancel()
	_, err := c.EnqueueContext(ectx, htq.NewTask(TaskType, Payload(work)),
		htq.Queue(queue), htq.TaskID(id), htq.MaxRetry(1000), htq.Retention(24*time.Hour))
	switch {
	case err == nil:
		return hist.Record(Event{Kind: Ack, ID: id})
	case errors.Is(err, htq.ErrTaskIDConflict):
		return hist.Record(Event{Kind: Ack, ID: id, Note: "stored before"})
	default:
		return hist.Record(Event{Kind: Fail, ID: id, Note: err.Error()})
	}
}

// ProduceParams says what Produce enqueues.
type ProduceParams struct {
	Queue  string
	Prefix string // task IDs are TaskID(Prefix, i)
	// From and To bound the task numbers i enqueued: From ≤ i < To.
	From, To  int
	Producers int     // goroutines that enqueue (default 4)
	Rate      float64 // enqueues per second in all (default 200)
	// MinWork and MaxWork bound how long the tasks run (WorkFor).
	MinWork, MaxWork time.Duration
}

// Produce enqueues tasks p.From … p.To-1 with Enqueue, at p.Rate per
// second, until done or ctx ends. The error is the history's.
func Produce(ctx context.Context, c *htq.Client, hist *Log, p ProduceParams) error {
	if p.Producers <= 0 {
		p.Producers = 4
	}
	if p.Rate <= 0 {
		p.Rate = 200
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / p.Rate))
	defer tick.Stop()
	var (
		mu    sync.Mutex
		next  = p.From
		first error
		wg    sync.WaitGroup
	)
	// take hands out the next task number, paced by the ticker; false
	// when there is none left or ctx ended.
	take := func() (int, bool) {
		select {
		case <-ctx.Done():
			return 0, false
		case <-tick.C:
		}
		mu.Lock()
		defer mu.Unlock()
		if next >= p.To || first != nil {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range p.Producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				if err := Enqueue(ctx, c, hist, p.Queue, TaskID(p.Prefix, i), WorkFor(i, p.MinWork, p.MaxWork)); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// FirstUnacked is the smallest task number from 0 to n-1 whose ID (with
// prefix) evs does not acknowledge, or n when all are: where a restarted
// producer resumes.
func FirstUnacked(evs []Event, prefix string, n int) int {
	acked := make(map[string]bool, n)
	for _, e := range evs {
		if e.Kind == Ack {
			acked[e.ID] = true
		}
	}
	for i := range n {
		if !acked[TaskID(prefix, i)] {
			return i
		}
	}
	return n
}

// EnqueueBatch enqueues the suite tasks TaskID(prefix, i) for i in
// [from, to), each running for work, with Client.EnqueueBatch in batches
// of 100, and records each invocation and outcome in hist as Enqueue does.
// The returned error is the history's, or a batch refused as a whole.
func EnqueueBatch(ctx context.Context, c *htq.Client, hist *Log, queue, prefix string, from, to int, work time.Duration) error {
	for lo := from; lo < to; lo += 100 {
		hi := min(lo+100, to)
		tasks := make([]*htq.Task, 0, hi-lo)
		for i := lo; i < hi; i++ {
			id := TaskID(prefix, i)
			if err := hist.Record(Event{Kind: Invoke, ID: id}); err != nil {
				return err
			}
			tasks = append(tasks, htq.NewTask(TaskType, Payload(work), htq.TaskID(id)))
		}
		ectx, cancel := context.WithTimeout(ctx, EnqueueTimeout)
		_, err := c.EnqueueBatch(ectx, tasks, htq.Queue(queue), htq.MaxRetry(1000), htq.Retention(24*time.Hour))
		cancel()
		var be *htq.BatchError
		if err != nil && !errors.As(err, &be) {
			return fmt.Errorf("chaostest: enqueue batch: %w", err)
		}
		for j := range tasks {
			e := Event{Kind: Ack, ID: TaskID(prefix, lo+j)}
			if be != nil && be.Errs[j] != nil && !errors.Is(be.Errs[j], htq.ErrTaskIDConflict) {
				e.Kind, e.Note = Fail, be.Errs[j].Error()
			}
			if err := hist.Record(e); err != nil {
				return err
			}
		}
	}
	return nil
}
