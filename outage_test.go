package htq

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
	"github.com/redis/rueidis"
)

// An outage of the storage shorter than the lease re-runs nothing: tasks
// that finished while Redis could not be reached are recorded once it
// answers again, none runs twice, none counts a failure (issue 10 point 2),
// and work resumes promptly (point 5). Redis is made unreachable two ways:
// SIGSTOP (connections hang) and SIGKILL with a restart on the same port
// and data (connections refused, appendfsync always).
func TestOutageShorterThanLeaseRerunsNothing(t *testing.T) {
	for _, how := range []string{"paused", "restarted"} {
		t.Run(how, func(t *testing.T) {
			rs, st := durableRedis(t)

			const n = 300
			var (
				mu     sync.Mutex
				runs   = map[string]int{}
				starts []time.Time
			)
			h := HandlerFunc(func(ctx context.Context, task *Task) error {
				id, _ := GetTaskID(ctx)
				mu.Lock()
				runs[id]++
				starts = append(starts, time.Now())
				mu.Unlock()
				time.Sleep(20 * time.Millisecond)
				return nil
			})
			client := NewClient(st)
			ids := make([]string, 0, n)
			for i := 0; i < n; i++ {
				info, err := client.Enqueue(NewTask("work", nil), MaxRetry(0), Retention(time.Hour))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, info.ID)
			}
			startServer(t, st, quietConfig(Config{Concurrency: 8, LeaseDuration: 15 * time.Second,
				Queues: map[string]int{"default": 1}}), h)
			waitFor(t, 10*time.Second, "some tasks to complete", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(runs) > 30
			})

			// Cut the storage off for 3 s while tasks run and complete.
			switch how {
			case "paused":
				if err := rs.Freeze(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(3 * time.Second) // the outage itself
				if err := rs.Thaw(); err != nil {
					t.Fatal(err)
				}
			case "restarted":
				if err := rs.Crash(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(3 * time.Second) // the outage itself
				if err := rs.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			back := time.Now()
			insp := NewInspector(st)
			waitQueue(t, insp, 60*time.Second, func(qi *QueueInfo) bool { return qi.Completed == n })
			mu.Lock()
			defer mu.Unlock()
			resumed := time.Duration(-1)
			for _, at := range starts {
				if at.After(back) {
					resumed = at.Sub(back)
					break
				}
			}
			t.Logf("first task started %v after the storage answered again; all %d completed after %v",
				resumed.Round(time.Millisecond), n, time.Since(back).Round(time.Millisecond))
			for _, id := range ids {
				if runs[id] != 1 {
					t.Errorf("task %s ran %d times", id, runs[id])
				}
				ti, err := insp.GetTaskInfo("default", id)
				if err != nil {
					t.Fatal(err)
				}
				if ti.State != TaskStateCompleted || ti.Retried != 0 || ti.LastErr != "" {
					t.Errorf("task %s: state %v, retried %d, last error %q", id, ti.State, ti.Retried, ti.LastErr)
				}
			}
		})
	}
}

// Tasks that run through an outage keep their leases: the heartbeater
// renews them as soon as the storage answers again, so an outage of two
// thirds of the lease, spanning two heartbeat intervals, cancels no
// handler and re-runs nothing. (A heartbeater that waited a whole interval
// after a failed beat renewed only at the lease's deadline, and lost it.)
func TestLongTasksKeepLeasesThroughOutage(t *testing.T) {
	rs, st := durableRedis(t)
	const n = 4
	var (
		mu      sync.Mutex
		runs    = map[string]int{}
		started = make(chan struct{}, n)
	)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		id, _ := GetTaskID(ctx)
		mu.Lock()
		runs[id]++
		mu.Unlock()
		started <- struct{}{}
		select {
		case <-time.After(14 * time.Second): // the work, more than twice the lease
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	client := NewClient(st)
	var ids []string
	for i := 0; i < n; i++ {
		info, err := client.Enqueue(NewTask("long", nil), MaxRetry(0), Retention(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	startServer(t, st, quietConfig(Config{Concurrency: n, LeaseDuration: 6 * time.Second, Queues: map[string]int{"default": 1}}), h)
	for i := 0; i < n; i++ {
		recv(t, started, 10*time.Second, "tasks to start")
	}
	// Heartbeats come every 2 s (a third of the lease). Wait for one to
	// renew the leases (a task's deadline in the active set moves), then
	// cut Redis off for 4.5 s: past two heartbeat intervals, 1.5 s before
	// the leases run out.
	rc := rawRedis(t, rs.Addr)
	deadline := func() float64 {
		ti, err := brokerOf(st).GetTaskInfo(context.Background(), "default", ids[0])
		if err != nil {
			t.Fatalf("lease deadline of %s: %v", ids[0], err)
		}
		return float64(ti.LeaseDeadline.UnixMilli())
	}
	first := deadline()
	waitFor(t, 5*time.Second, "a lease renewal", func() bool { return deadline() != first })
	rc.Close()
	if err := rs.Crash(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4500 * time.Millisecond) // the outage
	if err := rs.Restart(); err != nil {
		t.Fatal(err)
	}
	insp := NewInspector(st)
	waitQueue(t, insp, 60*time.Second, func(qi *QueueInfo) bool { return qi.Completed+qi.Archived+qi.Retry == n })
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		ti, err := insp.GetTaskInfo("default", id)
		if err != nil {
			t.Fatal(err)
		}
		if runs[id] != 1 || ti.State != TaskStateCompleted || ti.Retried != 0 {
			t.Errorf("task %s: ran %d times, %v, retried %d, %q", id, runs[id], ti.State, ti.Retried, ti.LastErr)
		}
	}
}

// durableRedis starts a private redis-server that fsyncs every write
// (appendfsync always), so that a crash and restart loses nothing, and
// opens it.
func durableRedis(t *testing.T) (*redistest.Server, *Storage) {
	t.Helper()
	rs := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	st, err := Open(fmt.Sprintf("redis://%s/0", rs.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return rs, st
}

// waitQueue polls the default queue until cond holds, and on a timeout
// fails with what the queue holds.
func waitQueue(t *testing.T, insp *Inspector, d time.Duration, cond func(*QueueInfo) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		qi, err := insp.GetQueueInfo("default")
		if err == nil && cond(qi) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v; queue: %+v (err %v)", d, qi, err)
		}
		time.Sleep(20 * time.Millisecond) // storage state has no event to wait on from outside
	}
}

// rawRedis opens a plain client to a test Redis, to read htq's keys.
func rawRedis(t *testing.T, addr string) rueidis.Client {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}
