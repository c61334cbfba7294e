package chaos

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
)

// TestRedisRestart is suite 4: Redis with an append-only file is killed
// with SIGKILL while four worker processes run tasks and the test
// enqueues 200 a second, stays down 5 s, and restarts on the same port and
// data; the producer stops at the crash (its enqueues in flight are
// indeterminate) and resumes after the restart at the first task not
// acknowledged. The lease (15 s) outlasts the outage, so the workers'
// ackers keep trying the completions the dead Redis did not take.
//
// With appendfsync always, every write Redis acknowledged was on disk:
// no acknowledged task is lost and no completed task runs again. With
// everysec, Redis may lose what it wrote in the last second or two before
// the kill (only if the kernel lost it too, which a process kill does not
// cause, or if Redis had postponed the write behind a slow fsync): the
// tasks lost, if any, are reported and must have been acknowledged within
// the last 2 s before the kill, and re-runs are allowed (the storage
// fault explains them).
func TestRedisRestart(t *testing.T) {
	for _, mode := range []string{"always", "everysec"} {
		t.Run(mode, func(t *testing.T) { testRedisRestart(t, mode) })
	}
}

func testRedisRestart(t *testing.T, fsync string) {
	r := newRun(t)
	rs, url, st := startRedis(t, "--appendonly", "yes", "--appendfsync", fsync)
	const queue = "restart"
	lease, down := 15*time.Second, 5*time.Second
	n := pick(1000, 6000)

	var procs []*chaostest.Proc
	for i := range 4 {
		procs = append(procs, r.worker(fmt.Sprintf("w%d", i), "-storage", url, "-queue", queue,
			"-concurrency", "16", "-lease", lease.String()))
	}
	// The producer enqueues until the crash, and resumes after the
	// restart at the first task not acknowledged (the enqueues in flight
	// at the crash are indeterminate).
	params := chaostest.ProduceParams{Queue: queue, Prefix: "t", To: n, Rate: 200, MinWork: 10 * time.Millisecond, MaxWork: 200 * time.Millisecond}
	prod := r.startProducer(st, params)
	waitEvents(t, r, time.Minute, "a quarter of the tasks acknowledged", func(evs []chaostest.Event) bool {
		return count(evs, chaostest.Ack, "") >= n/4
	})
	crashAt := time.Now()
	r.record(chaostest.Event{At: crashAt, Kind: chaostest.Fault, ID: "crash", Worker: chaostest.StorageWorker})
	if err := rs.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := prod.stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(down - time.Since(crashAt)) // the outage
	if err := rs.Restart(); err != nil {
		t.Fatal(err)
	}
	upAt := time.Now()
	r.record(chaostest.Event{At: upAt, Kind: chaostest.Heal, ID: "crash", Worker: chaostest.StorageWorker})
	checkInvariants(t, st, "after the restart")
	// The rest, to the end (stop returns once it is all enqueued).
	params.From = chaostest.FirstUnacked(r.events(), "t", n)
	if err := r.startProducer(st, params).wait(); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, r, 2*time.Minute, "every acknowledged task done", func(evs []chaostest.Event) bool {
		ok, _ := doneAll(evs)
		return ok
	})
	waitSettled(t, st, queue, time.Minute)
	termAll(t, procs...)
	evs := r.events()
	rep := chaostest.Check(evs)
	running := runningAt(evs, crashAt)
	// Which acknowledged tasks did the restarted Redis not have?
	insp := htq.NewInspector(st)
	ackAt := map[string]time.Time{}
	for _, e := range evs {
		if e.Kind == chaostest.Ack {
			ackAt[e.ID] = e.At
		}
	}
	var missing []string
	for id := range ackAt {
		if _, err := insp.GetTaskInfo(queue, id); err != nil {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	switch fsync {
	case "always":
		if err := rep.Err(); err != nil {
			t.Error(err)
		}
		if len(missing) > 0 || rep.Redeliveries > 0 {
			t.Errorf("appendfsync always: %d acknowledged tasks missing after the restart, %d re-runs; want none", len(missing), rep.Redeliveries)
		}
		checkStorage(t, st, queue, evs)
	case "everysec":
		// Loss is allowed, within the window; nothing else is.
		for _, id := range missing {
			if age := crashAt.Sub(ackAt[id]); age > 2*time.Second {
				t.Errorf("task %s, acknowledged %v before the crash, is lost: beyond everysec's window", id, age)
			}
		}
		if len(rep.Unexpected) > 0 || len(rep.Unexplained) > 0 {
			t.Error(rep.Err())
		}
		if len(rep.Lost) > len(missing) {
			t.Errorf("%d acknowledged tasks never completed, only %d of them missing from Redis", len(rep.Lost), len(missing))
		}
	}
	checkInvariants(t, st, "at the end")
	if running == 0 {
		t.Error("no task was running when Redis was killed: the suite proved little")
	}
	figure(t, "appendfsync %s, SIGKILL of Redis with %d tasks running, down %v, lease %v: acknowledged tasks missing after the restart %d; %s",
		fsync, running, down, lease, len(missing), rep)
}

// runningAt counts the tasks whose handler had started and not yet
// returned at time at.
func runningAt(evs []chaostest.Event, at time.Time) int {
	started, ended := map[string]bool{}, map[string]bool{}
	for _, e := range evs {
		if e.At.After(at) {
			if e.Kind == chaostest.Done || e.Kind == chaostest.Cancel {
				ended[e.ID] = true
			}
			continue
		}
		switch e.Kind {
		case chaostest.Start:
			started[e.ID] = true
		case chaostest.Done, chaostest.Cancel:
			delete(started, e.ID)
		}
	}
	n := 0
	for id := range started {
		if ended[id] {
			n++
		}
	}
	return n
}
