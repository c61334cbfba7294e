package htq

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
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
			rs := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
			st, err := Open(fmt.Sprintf("redis://%s/0", rs.Addr))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })

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
			waitFor(t, 20*time.Second, "every task completed", func() bool {
				qi, err := insp.GetQueueInfo("default")
				return err == nil && qi.Completed == n
			})
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
