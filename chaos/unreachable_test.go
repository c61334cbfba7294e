package chaos

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
)

// resumeGoal is how soon after Redis answers again a server with pending
// tasks must start one (issue 10, suite 5).
const resumeGoal = 100 * time.Millisecond

// TestRedisUnreachable is suite 5: Redis becomes unreachable for 30 s (3 s
// in the short version) while a Server in the test process works through
// a backlog, first frozen with SIGSTOP (connections open, nothing
// answers), then killed with SIGKILL and restarted on the same port and
// data (connections refused). Meanwhile the test calls Enqueue with a 1 s
// deadline every second. Nothing may panic; every Enqueue must fail
// within its deadline (plus 250 ms) with an error that says what
// happened; the server must start a task within 100 ms of Redis answering
// again (a second in the short version, which shares a busy CI machine);
// afterwards every acknowledged task completes, and the process's
// goroutines come back to their number before the outage.
func TestRedisUnreachable(t *testing.T) {
	for _, how := range []string{"sigstop", "crash"} {
		t.Run(how, func(t *testing.T) { testRedisUnreachable(t, how) })
	}
}

func testRedisUnreachable(t *testing.T, how string) {
	r := newRun(t)
	// everysec: the crash is a process kill, which loses nothing the
	// kernel has; always would make every write wait for a disk flush.
	rs, _, st := startRedis(t, "--appendonly", "yes", "--appendfsync", "everysec")
	const queue = "outage"
	outage := pick(3*time.Second, 30*time.Second)
	lease := outage + 15*time.Second // this suite is about the outage, not leases running out

	h := htq.HandlerFunc(func(ctx context.Context, task *htq.Task) error {
		id, _ := htq.GetTaskID(ctx)
		r.record(chaostest.Event{Kind: chaostest.Start, ID: id, Worker: "srv"})
		d, err := chaostest.ParsePayload(task.Payload())
		if err != nil {
			return err
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			r.record(chaostest.Event{Kind: chaostest.Cancel, ID: id, Worker: "srv", Note: context.Cause(ctx).Error()})
			return context.Cause(ctx)
		}
		r.record(chaostest.Event{Kind: chaostest.Done, ID: id, Worker: "srv"})
		return nil
	})
	srv := htq.NewServer(st, htq.Config{
		Concurrency: 16, Queues: map[string]int{queue: 1}, LeaseDuration: lease,
		RetryDelayFunc: func(int, error, *htq.Task) time.Duration { return 0 },
		Logger:         quietLogger(),
	})
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	c := htq.NewClient(st)
	enqueue := func(prefix string, n int, work time.Duration) {
		if err := chaostest.EnqueueBatch(t.Context(), c, r.log, queue, prefix, 0, n, work); err != nil {
			t.Fatal(err)
		}
	}

	// The baseline: the server idle after a first batch.
	enqueue("warm", 100, 10*time.Millisecond)
	waitEvents(t, r, time.Minute, "the first batch done", func(evs []chaostest.Event) bool { return count(evs, chaostest.Done, "") >= 100 })
	baseline := settledGoroutines(0, 3*time.Second)

	// A backlog the outage interrupts: the outage begins once 150 of
	// them are done, so the rest (about 3 s of work) waits for Redis.
	backlog := 1000
	enqueue("t", backlog, 50*time.Millisecond)
	waitEvents(t, r, time.Minute, "some of the backlog done", func(evs []chaostest.Event) bool { return count(evs, chaostest.Done, "") >= 150 })

	downAt := time.Now()
	r.record(chaostest.Event{At: downAt, Kind: chaostest.Fault, ID: how, Worker: chaostest.StorageWorker})
	switch how {
	case "sigstop":
		if err := rs.Freeze(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = rs.Thaw() }() // a test failing while Redis is frozen
	case "crash":
		if err := rs.Crash(); err != nil {
			t.Fatal(err)
		}
	}
	// Enqueue with a 1 s deadline, once a second, while Redis is away.
	const deadline = time.Second
	var worst time.Duration
	var errs []string
	probes := 0
	for time.Since(downAt) < outage-deadline-500*time.Millisecond {
		// A probe that times out is indeterminate: a frozen Redis runs
		// the command it received once it is thawed.
		id := chaostest.TaskID("probe", probes)
		r.record(chaostest.Event{Kind: chaostest.Invoke, ID: id})
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		_, err := c.EnqueueContext(ctx, htq.NewTask(chaostest.TaskType, chaostest.Payload(0)), htq.Queue(queue), htq.TaskID(id))
		took := time.Since(start)
		cancel()
		if err != nil {
			r.record(chaostest.Event{Kind: chaostest.Fail, ID: id, Note: err.Error()})
		}
		probes++
		worst = max(worst, took)
		switch {
		case err == nil:
			t.Errorf("Enqueue succeeded while Redis was %s", how)
		case took > deadline+250*time.Millisecond:
			t.Errorf("Enqueue took %v to fail with a %v deadline: %v", took, deadline, err)
		}
		if err != nil && len(errs) < 3 && !contains(errs, err.Error()) {
			errs = append(errs, err.Error())
		}
		time.Sleep(time.Second - took%time.Second) // one probe a second
	}
	time.Sleep(time.Until(downAt.Add(outage))) // the rest of the outage
	switch how {
	case "sigstop":
		if err := rs.Thaw(); err != nil {
			t.Fatal(err)
		}
	case "crash":
		if err := rs.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	upAt := time.Now()
	r.record(chaostest.Event{At: upAt, Kind: chaostest.Heal, ID: how, Worker: chaostest.StorageWorker})
	if !pollEvents(r, 2*time.Minute, func(evs []chaostest.Event) bool {
		ok, _ := doneAll(evs)
		return ok
	}) {
		// Keep what the server's goroutines were doing.
		path := filepath.Join(r.dir, "goroutines.txt")
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 2)
			f.Close()
		}
		_, acked := doneAll(r.events())
		t.Fatalf("%d acknowledged tasks, not all done 2 min after Redis answered again (goroutines in %s)", acked, path)
	}
	evs := r.events()
	resumed := time.Duration(-1)
	for _, e := range evs {
		if e.Kind == chaostest.Start && e.At.After(upAt) {
			resumed = e.At.Sub(upAt)
			break
		}
	}
	after := settledGoroutines(baseline, 15*time.Second)
	rep := chaostest.Check(evs)
	if err := rep.Err(); err != nil {
		t.Error(err)
	}
	checkStorage(t, st, queue, evs)
	checkInvariants(t, st, "after the outage")
	// The goal holds in the full run; the short one, beside the other
	// packages' tests on a busy CI machine, allows a second.
	if limit := pick(time.Second, resumeGoal); resumed < 0 || resumed > limit {
		t.Errorf("the first task started %v after Redis answered again; want within %v (the goal is %v)", resumed, limit, resumeGoal)
	}
	if after > baseline {
		t.Errorf("%d goroutines 15 s after the outage, %d before it", after, baseline)
	}
	figure(t, "Redis unreachable (%s) %v with a backlog, lease %v: %d Enqueue probes with a %v deadline failed, the slowest after %v (%s); first task started %v after Redis answered; goroutines %d before, %d after; %s",
		how, outage, lease, probes, deadline, worst.Round(time.Millisecond), strings.Join(errs, " | "), resumed.Round(time.Millisecond), baseline, after, rep)
}

// settledGoroutines waits up to d for the number of goroutines to fall to
// target (0: until it stops changing for a second) and returns it.
func settledGoroutines(target int, d time.Duration) int {
	deadline := time.Now().Add(d)
	last, since := runtime.NumGoroutine(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond) // goroutines end on their own time; nothing signals it
		n := runtime.NumGoroutine()
		if target > 0 && n <= target {
			return n
		}
		if n != last {
			last, since = n, time.Now()
		} else if target == 0 && time.Since(since) >= time.Second {
			return n
		}
	}
	return runtime.NumGoroutine()
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
