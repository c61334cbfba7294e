package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
)

// openStorage opens url for the test process, its logs discarded (the
// Redis durability warnings are expected: the suites choose the
// persistence they test).
func openStorage(t *testing.T, url string) *htq.Storage {
	t.Helper()
	st, err := htq.OpenWithOptions(context.Background(), url, htq.OpenOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	return st
}

// crashParams size suite 1.
type crashParams struct {
	tasks            int
	rate             float64 // enqueues per second
	minWork, maxWork time.Duration
	workers          int
	concurrency      int
	lease            time.Duration
	killLo, killHi   time.Duration // time between two kills
	limit            time.Duration // the whole run's bound
}

func crashSizes() crashParams {
	return crashParams{
		tasks: pick(1000, 20_000), rate: pick(150.0, 200.0),
		minWork: 10 * time.Millisecond, maxWork: 200 * time.Millisecond,
		workers: 4, concurrency: 16, lease: 2 * time.Second,
		killLo: pick(time.Second, 2*time.Second), killHi: pick(2*time.Second, 6*time.Second),
		limit: pick(2*time.Minute, 10*time.Minute),
	}
}

// TestWorkerCrashes is suite 1 on Redis: four worker processes at
// concurrency 16 run tasks of 10–200 ms while the test enqueues them; every
// 2–6 s (1–2 s in the short version) one worker, chosen at random, is
// killed with SIGKILL and started again. After every kill the storage's
// invariants hold and the tasks the dead worker had not finished are
// recorded as in flight; at the end no acknowledged task is lost, none is
// unexpected, every re-run is one of those, and each ran again within
// lease + 5 s of the kill.
func TestWorkerCrashes(t *testing.T) {
	p := crashSizes()
	r := newRun(t)
	_, url, st := startRedis(t)
	const queue = "crash"

	args := []string{"-storage", url, "-queue", queue, "-concurrency", fmt.Sprint(p.concurrency), "-lease", p.lease.String()}
	slots := make([]*chaostest.Proc, p.workers)
	lives := make([]int, p.workers)
	for i := range slots {
		slots[i] = r.worker(fmt.Sprintf("w%d.0", i), args...)
	}

	prod := r.startProducer(st, chaostest.ProduceParams{
		Queue: queue, Prefix: "t", To: p.tasks, Rate: p.rate, MinWork: p.minWork, MaxWork: p.maxWork,
	})
	defer prod.stop()

	start := time.Now()
	var kills, inflight int
	nextKill := time.Now().Add(r.between(p.killLo, p.killHi))
	lastLook := time.Now()
	for {
		prodDone, err := prod.finished()
		if err != nil {
			t.Fatal(err)
		}
		if prodDone && time.Since(lastLook) > time.Second {
			lastLook = time.Now()
			if ok, _ := doneAll(r.events()); ok {
				break
			}
		}
		if time.Since(start) > p.limit {
			_, acked := doneAll(r.events())
			t.Fatalf("not every acknowledged task done after %v (%d acknowledged, %d kills)", p.limit, acked, kills)
		}
		if time.Now().After(nextKill) {
			i := r.rng.IntN(len(slots))
			victim := slots[i]
			at := r.killAndRecord(victim)
			inflight += r.recordInFlight(st, queue, victim.Name, at)
			checkInvariants(t, st, "after killing "+victim.Name)
			lives[i]++
			slots[i] = r.worker(fmt.Sprintf("w%d.%d", i, lives[i]), args...)
			r.record(chaostest.Event{Kind: chaostest.Heal, ID: "kill", Worker: victim.Name})
			kills++
			nextKill = time.Now().Add(r.between(p.killLo, p.killHi))
		}
		time.Sleep(50 * time.Millisecond) // the kill schedule's resolution
	}
	took := time.Since(start)
	waitSettled(t, st, queue, time.Minute)
	termAll(t, slots...)
	rep := checkCrashes(t, r, st, queue, kills, p.lease)
	figure(t, "redis, %d tasks, %d workers × %d, lease %v, %d kills in %v: %s",
		p.tasks, p.workers, p.concurrency, p.lease, kills, took.Round(time.Second), rep)
}

// TestOwnerCrashes is suite 1 on the embedded store, which one process
// owns: that process both enqueues and runs the tasks, and it is the one
// killed with SIGKILL (every 2–6 s; 1–2 s in the short version). After
// each kill the test opens the store itself, records the tasks the dead
// owner had started and the store does not hold as completed, checks the
// invariants, and starts the owner again, which resumes enqueueing at the
// first task number not acknowledged.
func TestOwnerCrashes(t *testing.T) {
	p := crashSizes()
	r := newRun(t)
	url := "file:" + t.TempDir()
	const queue = "crash"
	// The owner runs as many tasks at once as the four workers of the
	// Redis suite: with fewer, the backlog would delay the orphans' re-runs.
	args := func(from int) []string {
		return []string{"-storage", url, "-queue", queue, "-concurrency", fmt.Sprint(p.workers * p.concurrency), "-lease", p.lease.String(),
			"-produce", fmt.Sprint(p.tasks), "-from", fmt.Sprint(from), "-rate", fmt.Sprint(p.rate),
			"-min-work", p.minWork.String(), "-max-work", p.maxWork.String()}
	}
	life := 0
	owner := r.worker("o.0", args(0)...)
	start := time.Now()
	var kills int
	nextKill := time.Now().Add(r.between(p.killLo, p.killHi))
	lastLook := time.Now()
	for {
		if time.Since(lastLook) > time.Second {
			lastLook = time.Now()
			evs := r.events()
			if ok, _ := doneAll(evs); ok && chaostest.FirstUnacked(evs, "t", p.tasks) == p.tasks {
				break
			}
		}
		if time.Since(start) > p.limit {
			t.Fatalf("not every task acknowledged and done after %v (%d kills)", p.limit, kills)
		}
		if time.Now().After(nextKill) {
			at := r.killAndRecord(owner)
			st := openStorage(t, url)
			r.recordInFlight(st, queue, owner.Name, at)
			checkInvariants(t, st, "after killing "+owner.Name)
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			from := chaostest.FirstUnacked(r.events(), "t", p.tasks)
			life++
			owner = r.worker(fmt.Sprintf("o.%d", life), args(from)...)
			r.record(chaostest.Event{Kind: chaostest.Heal, ID: "kill", Worker: owner.Name})
			kills++
			nextKill = time.Now().Add(r.between(p.killLo, p.killHi))
		}
		time.Sleep(50 * time.Millisecond) // the kill schedule's resolution
	}
	took := time.Since(start)
	termAll(t, owner)
	st := openStorage(t, url)
	defer st.Close()
	rep := checkCrashes(t, r, st, queue, kills, p.lease)
	figure(t, "embedded, %d tasks, one owner × %d, lease %v, %d kills in %v: %s",
		p.tasks, p.workers*p.concurrency, p.lease, kills, took.Round(time.Second), rep)
}

// checkCrashes checks a run of suite 1 once its workers stopped: the
// history (nothing lost or unexpected, every re-run explained), the
// storage (every acknowledged task completed, the invariants), that the
// kills caught runs in flight, and that each ran again within lease + 5 s.
func checkCrashes(t *testing.T, r *run, st *htq.Storage, queue string, kills int, lease time.Duration) *chaostest.Report {
	t.Helper()
	evs := r.events()
	rep := chaostest.Check(evs)
	if err := rep.Err(); err != nil {
		t.Errorf("%v\nthe history of the first unexplained re-runs:%s", err, explain(evs, rep.Unexplained))
	}
	checkStorage(t, st, queue, evs)
	checkInvariants(t, st, "at the end")
	if kills < 2 || rep.InFlight == 0 {
		t.Errorf("%d kills caught %d runs in flight: the suite proved little", kills, rep.InFlight)
	}
	if limit := lease + 5*time.Second; rep.MaxRecovery() > limit {
		t.Errorf("a task caught in flight ran again %v after the kill; want within lease + 5 s = %v", rep.MaxRecovery(), limit)
	}
	return rep
}
