package brokertest

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// set stores settings of q and fails the test on error.
func (e *adminEnv) set(q string, s broker.QueueSettings) {
	e.Helper()
	wantNoErr(e, fmt.Sprintf("SetQueueSettings %s %+v", q, s), e.a.SetQueueSettings(e.ctx, q, s))
}

// fetchRaw fetches up to max tasks of q with a lease of leaseFor.
func (e *adminEnv) fetchRaw(q string, max int) ([]*broker.Lease, error) {
	return e.b.Fetch(e.ctx, broker.FetchParams{Queue: q, Max: max, LeaseDuration: leaseFor, ServerID: "server-1"})
}

// wantThrottled fails unless a fetch of q is throttled for retryIn (any
// positive duration when retryIn is 0).
func (e *adminEnv) wantThrottled(q string, retryIn time.Duration) {
	e.Helper()
	ls, err := e.fetchRaw(q, 10)
	th, ok := isThrottled(err)
	if !ok {
		e.Fatalf("Fetch %s: got %d tasks, error %v; want a *broker.ThrottledError", q, len(ls), err)
	}
	if th.Queue != q || th.RetryIn <= 0 || (retryIn > 0 && th.RetryIn != retryIn) {
		want := "positive"
		if retryIn > 0 {
			want = retryIn.String()
		}
		e.Fatalf("ThrottledError{Queue %q, RetryIn %v}, want queue %q, RetryIn %s", th.Queue, th.RetryIn, q, want)
	}
	if len(ls) != 0 {
		e.Fatalf("a throttled Fetch returned %d tasks", len(ls))
	}
}

func settingsTests() []testCase {
	return []testCase{
		adminCase("RoundTrip", func(e *adminEnv) {
			e.add("default")
			s := broker.QueueSettings{MaxConcurrency: 7, RateLimit: 2.5, RateBurst: 4, LeaseDuration: 3 * time.Minute}
			e.set("default", s)
			if got := e.stats("default").Settings; got != s {
				e.Fatalf("Settings = %+v, want %+v", got, s)
			}
			s = broker.QueueSettings{RateLimit: 0.5}
			e.set("default", s)
			if got := e.stats("default").Settings; got != s {
				e.Fatalf("Settings = %+v, want %+v", got, s)
			}
			e.set("default", broker.QueueSettings{})
			if got := e.stats("default").Settings; got != (broker.QueueSettings{}) {
				e.Fatalf("Settings after clearing = %+v", got)
			}
		}),
		adminCase("Invalid", func(e *adminEnv) {
			for _, s := range []broker.QueueSettings{
				{MaxConcurrency: -1}, {RateLimit: -1}, {RateBurst: -1}, {LeaseDuration: -time.Second},
				{RateLimit: math.NaN()}, {RateLimit: math.Inf(1)},
			} {
				wantErrIs(e, fmt.Sprintf("SetQueueSettings %+v", s), e.a.SetQueueSettings(e.ctx, "default", s), base.ErrInvalidArgument)
			}
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues after refused settings: %v", qs)
			}
		}),
		adminCase("MaxConcurrency", func(e *adminEnv) {
			for range 10 {
				e.add("default")
			}
			e.set("default", broker.QueueSettings{MaxConcurrency: 3})
			ls := e.fetchN("default", 10)
			if len(ls) != 3 {
				e.Fatalf("Fetch with max concurrency 3: %d tasks", len(ls))
			}
			e.wantThrottled("default", 0)
			e.complete(ls[0].Ref())
			wantNoErr(e, "Retry", e.b.Retry(e.ctx, broker.RetryParams{Lease: ls[1].Ref(), Delay: time.Hour}))
			if got := e.fetchN("default", 10); len(got) != 2 {
				e.Fatalf("Fetch after two tasks finished: %d tasks, want 2", len(got))
			}
			e.wantThrottled("default", 0)
			// A change takes effect at the next fetch.
			e.set("default", broker.QueueSettings{MaxConcurrency: 4})
			if got := e.fetchN("default", 10); len(got) != 1 {
				e.Fatalf("Fetch after raising the limit to 4: %d tasks, want 1", len(got))
			}
			e.set("default", broker.QueueSettings{})
			if got := e.fetchN("default", 10); len(got) != 4 {
				e.Fatalf("Fetch without a limit: %d tasks, want the 4 left", len(got))
			}
		}),
		adminCase("MaxConcurrencyConcurrentFetchers", func(e *adminEnv) {
			for range 60 {
				e.add("default")
			}
			e.set("default", broker.QueueSettings{MaxConcurrency: 5})
			var mu sync.Mutex
			var got []*broker.Lease
			var wg sync.WaitGroup
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 5 {
						ls, err := e.fetchRaw("default", 2)
						if _, ok := isThrottled(err); err != nil && !ok {
							e.Errorf("Fetch: %v", err)
							return
						}
						mu.Lock()
						got = append(got, ls...)
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if len(got) != 5 {
				e.Fatalf("8 fetchers under max concurrency 5 got %d tasks, want exactly 5", len(got))
			}
			if st := e.stats("default"); st.Active != 5 || st.Pending != 55 {
				e.Fatalf("Active %d, Pending %d; want 5, 55", st.Active, st.Pending)
			}
		}),
		adminCase("RateLimit", func(e *adminEnv) {
			for range 20 {
				e.add("default")
			}
			e.set("default", broker.QueueSettings{RateLimit: 2, RateBurst: 3})
			if got := e.fetchN("default", 10); len(got) != 3 {
				e.Fatalf("Fetch with a full bucket of 3: %d tasks", len(got))
			}
			e.wantThrottled("default", 500*time.Millisecond)
			e.advance(250 * time.Millisecond)
			e.wantThrottled("default", 250*time.Millisecond)
			e.advance(250 * time.Millisecond)
			if got := e.fetchN("default", 10); len(got) != 1 {
				e.Fatalf("Fetch 500ms later: %d tasks, want 1", len(got))
			}
			e.wantThrottled("default", 500*time.Millisecond)
			e.advance(time.Second)
			if got := e.fetchN("default", 10); len(got) != 2 {
				e.Fatalf("Fetch 1s later: %d tasks, want 2", len(got))
			}
			// The bucket holds at most the burst.
			e.advance(time.Hour)
			if got := e.fetchN("default", 10); len(got) != 3 {
				e.Fatalf("Fetch an hour later: %d tasks, want the burst of 3", len(got))
			}
			// Fetching one at a time spends one token each.
			e.advance(time.Hour)
			for i := range 3 {
				if got := e.fetchN("default", 1); len(got) != 1 {
					e.Fatalf("Fetch %d of 1: %d tasks", i, len(got))
				}
			}
			e.wantThrottled("default", 500*time.Millisecond)
		}),
		adminCase("RateLimitDefaultBurst", func(e *adminEnv) {
			for range 5 {
				e.add("default")
			}
			e.set("default", broker.QueueSettings{RateLimit: 10})
			if got := e.fetchN("default", 10); len(got) != 1 {
				e.Fatalf("Fetch at 10/s without a burst: %d tasks, want 1", len(got))
			}
			e.wantThrottled("default", 100*time.Millisecond)
			e.advance(100 * time.Millisecond)
			if got := e.fetchN("default", 10); len(got) != 1 {
				e.Fatalf("Fetch 100ms later: %d tasks, want 1", len(got))
			}
		}),
		adminCase("ThrottledOnlyWithPendingTasks", func(e *adminEnv) {
			m := e.add("default")
			e.set("default", broker.QueueSettings{RateLimit: 1})
			e.fetchID("default", m.ID)
			ls, err := e.fetchRaw("default", 10)
			if err != nil || len(ls) != 0 {
				e.Fatalf("Fetch of an empty queue with an empty bucket: %d tasks, %v; want nothing and no error", len(ls), err)
			}
			e.set("default", broker.QueueSettings{MaxConcurrency: 1})
			ls, err = e.fetchRaw("default", 10)
			if err != nil || len(ls) != 0 {
				e.Fatalf("Fetch of an empty queue at max concurrency: %d tasks, %v; want nothing and no error", len(ls), err)
			}
			// A paused queue is not throttled either: it yields nothing.
			e.add("default")
			wantNoErr(e, "PauseQueue", e.a.PauseQueue(e.ctx, "default"))
			ls, err = e.fetchRaw("default", 10)
			if err != nil || len(ls) != 0 {
				e.Fatalf("Fetch of a paused queue: %d tasks, %v", len(ls), err)
			}
		}),
		adminCase("LeaseDuration", func(e *adminEnv) {
			for range 3 {
				e.add("default")
			}
			l := e.fetchOne("default")
			if l.Duration != leaseFor {
				e.Fatalf("Lease.Duration = %v, want the fetch's %v", l.Duration, leaseFor)
			}
			e.set("default", broker.QueueSettings{LeaseDuration: 10 * time.Minute})
			e.advance(time.Second)
			l = e.fetchOne("default")
			if l.Duration != 10*time.Minute {
				e.Fatalf("Lease.Duration = %v, want the queue's 10m", l.Duration)
			}
			wantTime(e, "Deadline", l.Deadline, e.now().Add(10*time.Minute))
			wantTime(e, "LeaseDeadline", e.info("default", l.Msg.ID).LeaseDeadline, e.now().Add(10*time.Minute))
			// Renewals are the caller's: the server extends by Lease.Duration.
			e.advance(9 * time.Minute)
			if ls := e.expired("default"); len(ls) != 1 {
				e.Fatalf("ExpiredLeases 9m later: %d, want only the first lease", len(ls))
			}
			e.set("default", broker.QueueSettings{})
			if l := e.fetchOne("default"); l.Duration != leaseFor {
				e.Fatalf("Lease.Duration after clearing = %v, want %v", l.Duration, leaseFor)
			}
		}),
	}
}
