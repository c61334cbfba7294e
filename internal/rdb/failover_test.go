package rdb

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

// TestSentinelFailoverLosesNoAcknowledgedTask forces a Sentinel failover
// (real processes: a primary, a replica and three sentinels) while
// producers enqueue about 2,000 tasks/s, with the replica frozen for a
// moment first so that it lags, and then checks that every task whose
// enqueue succeeded is on the new primary. With wait_replicas=1 none may
// be missing; without it the count missing is logged (Redis replicates
// asynchronously, so a failover may drop acknowledged writes).
func TestSentinelFailoverLosesNoAcknowledgedTask(t *testing.T) {
	t.Run("wait_replicas=1", func(t *testing.T) {
		r := runFailover(t, "&wait_replicas=1&wait_timeout=200ms")
		if r.lost != 0 {
			t.Fatalf("%d of %d acknowledged tasks missing on the new primary with wait_replicas=1: %v", r.lost, r.acked, r.missing)
		}
	})
	t.Run("no wait", func(t *testing.T) {
		r := runFailover(t, "")
		if r.timeouts != 0 {
			t.Errorf("%d replication timeouts without wait_replicas", r.timeouts)
		}
	})
}

// failoverResult is what one runFailover measured.
type failoverResult struct {
	acked, lost, timeouts, failed int
	missing                       []string // up to 10 IDs
}

// runFailover runs one failover with the storage URL's extra query and
// logs what it saw.
func runFailover(t *testing.T, query string) failoverResult {
	primary, replica := redistest.StartReplicated(t)
	sentinels := redistest.StartSentinels(t, primary.Addr, 3, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second) // a failover under load can take a while
	defer cancel()
	url := "redis-sentinel://" + strings.Join(sentinels, ",") + "/0?master=mymaster" + query
	b, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatalf("Open %s: %v", url, err)
	}
	defer b.Close()

	// Producers: four goroutines, each about 500 enqueues/s, one of them
	// in batches of 5. Every acknowledged ID is recorded.
	var (
		mu       sync.Mutex
		acked    []string
		timeouts atomic.Int64
		failed   atomic.Int64
		lastErr  atomic.Value
		afterSw  atomic.Int64 // acknowledged after the switch
		switched atomic.Bool
	)
	record := func(ids ...string) {
		mu.Lock()
		acked = append(acked, ids...)
		mu.Unlock()
		if switched.Load() {
			afterSw.Add(int64(len(ids)))
		}
	}
	fail := func(err error) {
		if errors.Is(err, base.ErrReplicationTimeout) {
			timeouts.Add(1)
		} else {
			failed.Add(1)
			lastErr.Store(err.Error())
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The load's pace: about 500 enqueues/s per producer.
			every := 2 * time.Millisecond
			if p == 0 {
				every = 10 * time.Millisecond // batches of 5
			}
			tick := time.NewTicker(every)
			defer tick.Stop()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				if p == 0 {
					ps := make([]broker.EnqueueParams, 5)
					for i := range ps {
						ps[i].Msg = msg("fo", fmt.Sprintf("p%d-%d-%d", p, n, i))
					}
					for i, err := range b.EnqueueBatch(cctx, ps) {
						if err != nil {
							fail(err)
						} else {
							record(ps[i].Msg.ID)
						}
					}
				} else {
					m := msg("fo", fmt.Sprintf("p%d-%d", p, n))
					if err := b.Enqueue(cctx, broker.EnqueueParams{Msg: m}); err != nil {
						fail(err)
					} else {
						record(m.ID)
					}
				}
				ccancel()
			}
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	// Load before the fault: until 200 enqueues were acknowledged.
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 200 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("only %d enqueues acknowledged before the fault (%d replication timeouts, last error: %v)", n, timeouts.Load(), lastErr.Load())
		}
		time.Sleep(10 * time.Millisecond) // the producers run
	}
	// The replica lags: frozen for 300ms under load, then thawed, and the
	// failover forced at once.
	if err := replica.Freeze(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = replica.Thaw() }() // for a test that fails while it is frozen
	time.Sleep(300 * time.Millisecond)    // the replica falls behind
	if err := replica.Thaw(); err != nil {
		t.Fatal(err)
	}
	ft, err := redistest.Failover(ctx, sentinels[0], primary, replica)
	if err != nil {
		t.Fatal(err)
	}
	switched.Store(true)
	for afterSw.Load() < 100 {
		if ctx.Err() != nil {
			t.Fatalf("only %d tasks acknowledged after the switch: the client did not follow it (last error: %v)", afterSw.Load(), lastErr.Load())
		}
		time.Sleep(20 * time.Millisecond) // the producers run
	}
	close(stop)
	wg.Wait()

	// Every acknowledged task must be on the new primary.
	nc := nodeClient(t, replica.Addr)
	k, err := queueKeysFor("fo")
	if err != nil {
		t.Fatal(err)
	}
	r := failoverResult{acked: len(acked), timeouts: int(timeouts.Load()), failed: int(failed.Load())}
	for i := 0; i < len(acked); i += 500 {
		ids := acked[i:min(i+500, len(acked))]
		cmds := make([]rueidis.Completed, len(ids))
		for j, id := range ids {
			cmds[j] = nc.B().Exists().Key(k.taskKey(id)).Build()
		}
		for j, res := range nc.DoMulti(ctx, cmds...) {
			n, err := res.AsInt64()
			if err != nil {
				t.Fatalf("EXISTS on the new primary: %v", err)
			}
			if n == 0 {
				r.lost++
				if len(r.missing) < 10 {
					r.missing = append(r.missing, ids[j])
				}
			}
		}
	}
	t.Logf("failover%s: promoted after %v, old primary replicating after %v; %d enqueues acknowledged (%d after the switch), %d missing on the new primary (role %s, %s, full syncs %s); %d replication timeouts, %d other errors (last: %v)",
		query, ft.Promoted.Round(time.Millisecond), ft.Resynced.Round(time.Millisecond), r.acked, afterSw.Load(), r.lost,
		info(t, nc, "replication", "role"), info(t, nc, "keyspace", "db0"), info(t, nc, "stats", "sync_full"),
		r.timeouts, r.failed, lastErr.Load())
	return r
}
