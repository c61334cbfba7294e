package chaostest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// StorageWorker is the Worker of a Fault that hit the storage itself (a
// Redis crash, a failover): such a fault may undo recent writes of every
// worker, or take writes on a node that is about to be demoted, so it
// explains the re-run of any task whose earlier run started before the
// fault ended (its Heal event) and whose later run started after the fault
// began.
const StorageWorker = "storage"

// A Report is what Check found in a history. Task counts are of distinct
// task IDs unless said otherwise.
type Report struct {
	Invoked       int // Enqueue called
	Acked         int // Enqueue returned nil
	EnqueueFailed int // Enqueue returned an error and never nil
	// Indeterminate counts tasks whose Enqueue never returned nil (an
	// error, or a producer killed meanwhile) but which ran: the write had
	// been made. Allowed, like Jepsen's indeterminate operations.
	Indeterminate int
	Ran           int // tasks started at least once
	Completed     int // tasks whose handler returned nil at least once

	// Lost lists acknowledged tasks whose handler never returned nil.
	Lost []string
	// Unexpected lists tasks that ran although no Enqueue was called.
	Unexpected []string

	Executions   int // Start events
	Redeliveries int // Start events beyond each task's first
	RunTwice     int // tasks started more than once
	DoneTwice    int // tasks whose handler returned nil more than once
	// Unexplained lists tasks run again although no fault caught their
	// previous run in flight (an InFlight event of that run's worker
	// between the two starts, or a storage fault under way between them).
	Unexplained []string

	Faults   int // Fault events
	InFlight int // InFlight events: runs a fault caught before the storage recorded them
	// Recovery holds, for each InFlight event followed by another start
	// of its task, the time from the InFlight event (stamped when the
	// faulted process was gone, or stopped) to that start, ascending.
	Recovery []time.Duration
	// NotRerun counts InFlight events whose task did not start again (its
	// outcome had been written after all, or it was never re-delivered).
	NotRerun int
	// RerunAfterStorageFault counts re-runs explained by a storage fault
	// (StorageWorker) only.
	RerunAfterStorageFault int
	// RerunAfterLeaseLoss counts re-runs explained only by the earlier
	// run's worker learning that it had lost the task's lease (a Refused
	// or Cancel event of that worker for the task): a worker that was
	// alive but did not renew in time — starved of CPU, cut off — had its
	// task recovered, and its late outcome was fenced off. No fault was
	// injected; the suites report these.
	RerunAfterLeaseLoss int
	Refused             int // Refused events: outcomes refused for a lost lease
	Cancelled           int // Cancel events
}

// Check reads a history (in time order, as ReadDir returns it) and reports
// what happened to every task.
func Check(events []Event) *Report {
	type task struct {
		invoked, acked, failed bool
		starts                 []Event
		dones                  int
		inflight               []Event
		fenced                 []Event // Refused and Cancel events
	}
	tasks := map[string]*task{}
	get := func(id string) *task {
		t := tasks[id]
		if t == nil {
			t = &task{}
			tasks[id] = t
		}
		return t
	}
	type window struct{ from, to time.Time }
	var storageFaults []window
	r := &Report{}
	for _, e := range events {
		switch e.Kind {
		case Invoke:
			get(e.ID).invoked = true
		case Ack:
			get(e.ID).acked = true
		case Fail:
			get(e.ID).failed = true
		case Start:
			t := get(e.ID)
			t.starts = append(t.starts, e)
			r.Executions++
		case Done:
			get(e.ID).dones++
		case InFlight:
			get(e.ID).inflight = append(get(e.ID).inflight, e)
			r.InFlight++
		case Fault:
			r.Faults++
			if e.Worker == StorageWorker {
				storageFaults = append(storageFaults, window{e.At, e.At})
			}
		case Heal:
			for i := len(storageFaults) - 1; e.Worker == StorageWorker && i >= 0; i-- {
				if storageFaults[i].to.Equal(storageFaults[i].from) {
					storageFaults[i].to = e.At
					break
				}
			}
		case Refused:
			r.Refused++
			get(e.ID).fenced = append(get(e.ID).fenced, e)
		case Cancel:
			r.Cancelled++
			get(e.ID).fenced = append(get(e.ID).fenced, e)
		}
	}
	ids := make([]string, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := tasks[id]
		if t.invoked {
			r.Invoked++
		}
		if t.acked {
			r.Acked++
		} else if t.failed {
			r.EnqueueFailed++
		}
		if len(t.starts) > 0 {
			r.Ran++
			if !t.invoked {
				r.Unexpected = append(r.Unexpected, id)
			} else if !t.acked {
				r.Indeterminate++
			}
		}
		if t.dones > 0 {
			r.Completed++
		} else if t.acked {
			r.Lost = append(r.Lost, id)
		}
		if t.dones > 1 {
			r.DoneTwice++
		}
		if len(t.starts) > 1 {
			r.RunTwice++
			r.Redeliveries += len(t.starts) - 1
		}
		// Every start after the first must be explained by a fault that
		// caught the previous run in flight.
		for i := 1; i < len(t.starts); i++ {
			prev, next := t.starts[i-1], t.starts[i]
			explained := false
			for _, f := range t.inflight {
				if f.Worker == prev.Worker && !f.At.Before(prev.At) && !f.At.After(next.At) {
					explained = true
					break
				}
			}
			if !explained {
				for _, w := range storageFaults {
					if !prev.At.After(w.to) && !next.At.Before(w.from) {
						explained = true
						r.RerunAfterStorageFault++
						break
					}
				}
			}
			if !explained {
				for _, f := range t.fenced {
					if f.Worker == prev.Worker && !f.At.Before(prev.At) {
						explained = true
						r.RerunAfterLeaseLoss++
						break
					}
				}
			}
			if !explained {
				r.Unexplained = append(r.Unexplained, id)
				break
			}
		}
		for _, f := range t.inflight {
			rerun := false
			for _, s := range t.starts {
				if s.At.After(f.At) {
					r.Recovery = append(r.Recovery, s.At.Sub(f.At))
					rerun = true
					break
				}
			}
			if !rerun {
				r.NotRerun++
			}
		}
	}
	sort.Slice(r.Recovery, func(i, j int) bool { return r.Recovery[i] < r.Recovery[j] })
	return r
}

// Err reports the violations of the checks that hold for every suite:
// lost, unexpected and unexplained re-runs, and more re-runs than runs
// caught in flight (plus those a storage fault explains).
func (r *Report) Err() error {
	var errs []error
	if len(r.Lost) > 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged tasks never completed: %s", len(r.Lost), sample(r.Lost)))
	}
	if len(r.Unexpected) > 0 {
		errs = append(errs, fmt.Errorf("%d tasks ran that were never enqueued: %s", len(r.Unexpected), sample(r.Unexpected)))
	}
	if len(r.Unexplained) > 0 {
		errs = append(errs, fmt.Errorf("%d tasks ran again without a fault catching the earlier run: %s", len(r.Unexplained), sample(r.Unexplained)))
	}
	if bound := r.InFlight + r.RerunAfterStorageFault + r.RerunAfterLeaseLoss; r.Redeliveries > bound {
		errs = append(errs, fmt.Errorf("%d re-runs, more than the %d runs faults caught in flight (+%d after storage faults, +%d after leases lost)",
			r.Redeliveries, r.InFlight, r.RerunAfterStorageFault, r.RerunAfterLeaseLoss))
	}
	return errors.Join(errs...)
}

// MaxRecovery is the longest time from a fault to the re-run of a task it
// caught in flight (0 when none was re-run).
func (r *Report) MaxRecovery() time.Duration {
	if len(r.Recovery) == 0 {
		return 0
	}
	return r.Recovery[len(r.Recovery)-1]
}

// MedianRecovery is the median of Recovery (0 when empty).
func (r *Report) MedianRecovery() time.Duration {
	if len(r.Recovery) == 0 {
		return 0
	}
	return r.Recovery[len(r.Recovery)/2]
}

// String is a one-line summary, the figures docs/reliability.md quotes.
func (r *Report) String() string {
	return fmt.Sprintf("acked %d (invoked %d, enqueue failed %d, indeterminate that ran %d); completed %d; lost %d; unexpected %d; "+
		"executions %d, re-runs %d (tasks run twice %d, completed twice %d, after storage faults %d, after a live worker lost the lease %d, unexplained %d); "+
		"faults %d, runs caught in flight %d (not re-run %d); recovery p50 %v max %v; outcomes refused %d, handlers cancelled %d",
		r.Acked, r.Invoked, r.EnqueueFailed, r.Indeterminate, r.Completed, len(r.Lost), len(r.Unexpected),
		r.Executions, r.Redeliveries, r.RunTwice, r.DoneTwice, r.RerunAfterStorageFault, r.RerunAfterLeaseLoss, len(r.Unexplained),
		r.Faults, r.InFlight, r.NotRerun, r.MedianRecovery().Round(time.Millisecond), r.MaxRecovery().Round(time.Millisecond),
		r.Refused, r.Cancelled)
}

// sample lists up to 10 IDs.
func sample(ids []string) string {
	if len(ids) > 10 {
		return strings.Join(ids[:10], ", ") + ", …"
	}
	return strings.Join(ids, ", ")
}
