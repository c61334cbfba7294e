package chaos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
	"github.com/htqueue/htq/internal/redistest"
)

// TestSentinelFailoverUnderLoad is suite 6: the Sentinel set-up of
// internal/rdb's failover test (a primary, a replica, three sentinels on
// loopback) with two worker processes running tasks and the test enqueuing
// 200 a second through redis-sentinel:// URLs. Once a third of the tasks
// are acknowledged, the replica is frozen for 300 ms (it falls behind),
// thawed, and a failover forced at once.
//
// With wait_replicas=1 every write a caller relies on — the enqueue, the
// task's outcome — waited until the replica had it, so no acknowledged
// task may be missing on the new primary, and every one completes.
// Without it, Redis replicates asynchronously and the tasks missing are
// counted and reported; nothing that was never enqueued may run either
// way, and re-runs are explained by the failover.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	modes := []string{"wait_replicas=1"}
	if full() {
		modes = append(modes, "no wait")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			query := ""
			if mode != "no wait" {
				query = "&" + mode + "&wait_timeout=500ms"
			}
			testFailover(t, query)
		})
	}
}

func testFailover(t *testing.T, query string) {
	r := newRun(t)
	primary, replica := redistest.StartReplicated(t)
	sentinels := redistest.StartSentinels(t, primary.Addr, 3, 2)
	url := "redis-sentinel://" + strings.Join(sentinels, ",") + "/0?master=mymaster" + query
	st := openStorage(t, url)
	defer st.Close()
	const queue = "failover"
	n := pick(1000, 6000)

	var procs []*chaostest.Proc
	for i := range 2 {
		procs = append(procs, r.worker(fmt.Sprintf("w%d", i), "-storage", url, "-queue", queue,
			"-concurrency", "16", "-lease", "5s"))
	}
	prod := r.startProducer(st, chaostest.ProduceParams{
		Queue: queue, Prefix: "t", To: n, Rate: 200, MinWork: 10 * time.Millisecond, MaxWork: 200 * time.Millisecond,
	})
	defer prod.stop()
	waitEvents(t, r, time.Minute, "a third of the tasks acknowledged", func(evs []chaostest.Event) bool {
		return count(evs, chaostest.Ack, "") >= n/3
	})
	faultAt := time.Now()
	r.record(chaostest.Event{At: faultAt, Kind: chaostest.Fault, ID: "failover", Worker: chaostest.StorageWorker})
	if err := replica.Freeze(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the replica falls behind
	if err := replica.Thaw(); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(context.Background(), time.Minute) // a failover Sentinel aborts is retried after 2 × failover-timeout (20 s)
	ft, err := redistest.Failover(fctx, sentinels[0], primary, replica)
	fcancel()
	if err != nil {
		t.Fatal(err)
	}
	r.record(chaostest.Event{Kind: chaostest.Heal, ID: "failover", Worker: chaostest.StorageWorker})
	checkInvariants(t, st, "after the failover")
	if err := prod.wait(); err != nil {
		t.Fatal(err)
	}

	// Every acknowledged task completes, or (without the replica wait) is
	// missing on the new primary.
	insp := htq.NewInspector(st)
	missing := map[string]bool{}
	waitEvents(t, r, 2*time.Minute, "every acknowledged task done or missing", func(evs []chaostest.Event) bool {
		done := map[string]bool{}
		for _, e := range evs {
			if e.Kind == chaostest.Done {
				done[e.ID] = true
			}
		}
		for _, e := range evs {
			if e.Kind != chaostest.Ack || done[e.ID] || missing[e.ID] {
				continue
			}
			_, err := insp.GetTaskInfo(queue, e.ID)
			if !errors.Is(err, htq.ErrTaskNotFound) {
				return false
			}
			missing[e.ID] = true
		}
		return true
	})
	waitSettled(t, st, queue, time.Minute)
	termAll(t, procs...)
	evs := r.events()
	// Acknowledged tasks that completed before the failover and whose
	// records the new primary lacks are missing too.
	for _, e := range evs {
		if e.Kind == chaostest.Ack && !missing[e.ID] {
			if _, err := insp.GetTaskInfo(queue, e.ID); errors.Is(err, htq.ErrTaskNotFound) {
				missing[e.ID] = true
			}
		}
	}
	rep := chaostest.Check(evs)
	// A missing task that had run lost its record (and its result), not
	// its run: the new primary lacks its completion.
	ran := map[string]bool{}
	for _, e := range evs {
		if e.Kind == chaostest.Done {
			ran[e.ID] = true
		}
	}
	missingRan := 0
	for id := range missing {
		if ran[id] {
			missingRan++
		}
	}
	if query != "" {
		if err := rep.Err(); err != nil {
			t.Error(err)
		}
		if len(missing) > 0 {
			t.Errorf("%d acknowledged tasks missing on the new primary with %s", len(missing), query)
		}
		checkStorage(t, st, queue, evs)
	} else if len(rep.Unexpected) > 0 || len(rep.Unexplained) > 0 {
		t.Error(rep.Err())
	}
	checkInvariants(t, st, "at the end")
	figure(t, "Sentinel failover%s with 2 workers × 16 and 200 enqueues/s: promoted after %v, old primary replicating after %v; acknowledged tasks missing on the new primary %d (never run %d, run before the failover %d); %s",
		query, ft.Promoted.Round(time.Millisecond), ft.Resynced.Round(time.Millisecond), len(missing), len(missing)-missingRan, missingRan, rep)
}
