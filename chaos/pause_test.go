package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
)

// TestPausedWorker is suite 2: worker A takes every task (each runs 3 s),
// then is stopped with SIGSTOP for twice the lease while worker B runs.
// B's recoverer takes the tasks over once A's leases run out and B runs
// them; then A gets SIGCONT, its handlers return at once (their time has
// passed), and A tries to record outcomes it no longer owns. Every one of
// them must be refused — by the storage (the acker's Complete presents a
// lease token that is no longer the task's) or by A itself (its
// heartbeater learnt the lease was lost first) — while B's outcomes are
// all accepted: each task ran exactly twice and completed once.
//
// The embedded store has no second worker process to take over (one
// process owns it), so this suite runs on Redis only.
func TestPausedWorker(t *testing.T) {
	r := newRun(t)
	_, url, st := startRedis(t)
	const queue = "pause"
	lease := 2 * time.Second
	work := 3 * time.Second
	rounds, perRound := pick(1, 3), pick(8, 16)

	args := []string{"-storage", url, "-queue", queue, "-concurrency", fmt.Sprint(perRound), "-lease", lease.String()}
	c := htq.NewClient(st)
	var refuseAfter []time.Duration
	for round := range rounds {
		ids := make([]string, perRound)
		for i := range ids {
			ids[i] = chaostest.TaskID(fmt.Sprintf("r%d-", round), i)
			if err := chaostest.Enqueue(t.Context(), c, r.log, queue, ids[i], work); err != nil {
				t.Fatal(err)
			}
		}
		a := r.worker(fmt.Sprintf("a%d", round), args...)
		waitEvents(t, r, time.Minute, fmt.Sprintf("%s to start all %d tasks", a.Name, perRound), func(evs []chaostest.Event) bool {
			return count(evs, chaostest.Start, a.Name) == perRound
		})
		stopAt := time.Now()
		r.record(chaostest.Event{At: stopAt, Kind: chaostest.Fault, ID: "stop", Worker: a.Name})
		if err := a.Stop(); err != nil {
			t.Fatal(err)
		}
		if n := r.recordInFlight(st, queue, a.Name, stopAt); n != perRound {
			t.Fatalf("%d of %s's %d tasks in flight when it was stopped", n, a.Name, perRound)
		}
		b := r.worker(fmt.Sprintf("b%d", round), append(args, "-write-result")...)
		time.Sleep(2*lease - time.Since(stopAt)) // the pause: twice the lease
		contAt := time.Now()
		if err := a.Cont(); err != nil {
			t.Fatal(err)
		}
		r.record(chaostest.Event{At: contAt, Kind: chaostest.Heal, ID: "stop", Worker: a.Name})
		waitEvents(t, r, time.Minute, "B to finish every task and A to see each outcome refused", func(evs []chaostest.Event) bool {
			return count(evs, chaostest.Done, b.Name) == perRound && count(evs, chaostest.Refused, a.Name) == perRound
		})
		for _, e := range r.eventsOf(a.Name) {
			if e.Kind == chaostest.Refused {
				refuseAfter = append(refuseAfter, e.At.Sub(contAt))
			}
		}
		termAll(t, a, b)
		insp := htq.NewInspector(st)
		for _, id := range ids {
			ti, err := insp.GetTaskInfo(queue, id)
			if err != nil {
				t.Fatal(err)
			}
			if ti.State != htq.TaskStateCompleted || string(ti.Result) != b.Name || ti.Retried != 1 {
				t.Errorf("task %s: %v, result %q, retried %d; want completed by %s after one retry", id, ti.State, ti.Result, ti.Retried, b.Name)
			}
		}
		checkInvariants(t, st, fmt.Sprintf("after round %d", round))
	}
	evs := r.events()
	rep := chaostest.Check(evs)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	n := rounds * perRound
	if rep.Executions != 2*n || rep.RunTwice != n {
		t.Errorf("%d executions, %d tasks run twice; want every one of the %d tasks run exactly twice", rep.Executions, rep.RunTwice, n)
	}
	byStorage, byWorker := 0, 0
	for _, e := range evs {
		if e.Kind != chaostest.Refused {
			continue
		}
		if e.Worker[0] != 'a' {
			t.Errorf("%s's outcome of %s was refused: %s", e.Worker, e.ID, e.Note)
		}
		if strings.HasPrefix(e.Note, "completed task had lost its lease") {
			byStorage++
		} else {
			byWorker++
		}
	}
	checkStorage(t, st, queue, evs)
	figure(t, "%d tasks paused %v (lease %v): each ran twice, completed once; stale outcomes refused %d by the storage, %d by the stale worker itself, %v–%v after SIGCONT; %s",
		n, 2*lease, lease, byStorage, byWorker, minDur(refuseAfter).Round(time.Millisecond), maxDur(refuseAfter).Round(time.Millisecond), rep)
}

// waitEvents polls the run's history until cond holds, for at most d.
func waitEvents(t *testing.T, r *run, d time.Duration, what string, cond func([]chaostest.Event) bool) {
	t.Helper()
	if !pollEvents(r, d, cond) {
		t.Fatalf("timed out after %v waiting for %s", d, what)
	}
}

// pollEvents polls the run's history (every 100 ms: the histories are
// files other processes append to) until cond holds, for at most d, and
// reports whether it held.
func pollEvents(r *run, d time.Duration, cond func([]chaostest.Event) bool) bool {
	deadline := time.Now().Add(d)
	for !cond(r.events()) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
	return true
}

// count counts the events of kind by worker ("" for any).
func count(evs []chaostest.Event, kind chaostest.Kind, worker string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind && (worker == "" || e.Worker == worker) {
			n++
		}
	}
	return n
}

func minDur(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}

func maxDur(ds []time.Duration) time.Duration {
	m := time.Duration(0)
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}
