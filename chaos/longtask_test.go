package chaos

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
)

// TestLongTasksUnderLoad is suite 3: tasks that run three times the lease,
// on two (four in the full version) worker processes at concurrency 16,
// while the test keeps four times as many threads spinning as the machine
// has CPUs (as many as it has in the short version, which runs beside the
// other packages' tests). The heartbeaters must renew every lease in
// time: no task is ever reclaimed, cancelled or run twice, and none
// records a failure.
func TestLongTasksUnderLoad(t *testing.T) {
	r := newRun(t)
	_, url, st := startRedis(t)
	const queue = "long"
	lease := 3 * time.Second // renewed every second: a worker must starve 2 s to lose one
	work := 3 * lease
	workers, conc := pick(2, 4), 16
	n := pick(32, 320)

	var procs []*chaostest.Proc
	for i := range workers {
		procs = append(procs, r.worker(fmt.Sprintf("w%d", i), "-storage", url, "-queue", queue,
			"-concurrency", fmt.Sprint(conc), "-lease", lease.String()))
	}
	spinners := pick(1, 4) * runtime.NumCPU()
	stop := spin(spinners)
	start := time.Now()
	c := htq.NewClient(st)
	for i := range n {
		if err := chaostest.Enqueue(t.Context(), c, r.log, queue, chaostest.TaskID("l", i), work); err != nil {
			stop()
			t.Fatal(err)
		}
	}
	waitEvents(t, r, pick(time.Minute, 5*time.Minute), fmt.Sprintf("all %d tasks done", n), func(evs []chaostest.Event) bool {
		return count(evs, chaostest.Done, "") >= n
	})
	spins := stop()
	took := time.Since(start)
	termAll(t, procs...)
	evs := r.events()
	rep := chaostest.Check(evs)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	if rep.Redeliveries != 0 || rep.Cancelled != 0 || rep.Refused != 0 {
		t.Errorf("under load: %d re-runs, %d handlers cancelled, %d outcomes refused; want none", rep.Redeliveries, rep.Cancelled, rep.Refused)
	}
	insp := htq.NewInspector(st)
	for i := range n {
		ti, err := insp.GetTaskInfo(queue, chaostest.TaskID("l", i))
		if err != nil {
			t.Fatal(err)
		}
		if ti.State != htq.TaskStateCompleted || ti.Retried != 0 || ti.LastErr != "" {
			t.Errorf("task %s: %v, retried %d, last error %q; want completed at the first attempt", ti.ID, ti.State, ti.Retried, ti.LastErr)
		}
	}
	checkStorage(t, st, queue, evs)
	checkInvariants(t, st, "at the end")
	figure(t, "%d tasks of %v (lease %v) on %d workers × %d, %d spinning threads on %d CPUs (%.1f G spins) for %v: %s",
		n, work, lease, workers, conc, spinners, runtime.NumCPU(), float64(spins)/1e9, took.Round(time.Second), rep)
}

// spin keeps n OS threads busy until the returned function is called; it
// returns how many loop turns they made.
func spin(n int) func() uint64 {
	prev := runtime.GOMAXPROCS(0)
	runtime.GOMAXPROCS(max(prev, n+2)) // the spinners get threads of their own
	var (
		quit  atomic.Bool
		turns atomic.Uint64
		wg    sync.WaitGroup
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var k uint64
			for !quit.Load() {
				for range 10_000 {
					k++
				}
			}
			turns.Add(k)
		}()
	}
	return func() uint64 {
		quit.Store(true)
		wg.Wait()
		runtime.GOMAXPROCS(prev)
		return turns.Load()
	}
}
