package htq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/redistest"
)

// enqueueRun is what the enqueuers of TestEnqueueAcrossOutage did.
type enqueueRun struct {
	mu       sync.Mutex
	ok       map[string]string // payload -> the ID Enqueue returned
	failed   map[string]error  // payload -> the error
	dups     int               // ErrDuplicateTask answers
	longest  time.Duration     // the longest successful call
	spanning int               // successful calls that took over a second
}

// TestEnqueueAcrossOutage enqueues from several goroutines while Redis is
// cut off for 3 s, frozen (SIGSTOP: every attempt waits on an open
// connection until the 500 ms storage timeout, and Redis runs them all
// when it resumes) or crashed (SIGKILL, restarted on the same data with
// appendfsync always). Calls whose context outlasts the outage all
// succeed: the Client tried again until Redis answered. Every payload is
// stored exactly once, under the ID its call returned, although some
// attempts were stored and their answers lost: the next attempt found
// its task stored and took it as done (issue 10 point 3). Unique tasks
// retried do not meet their own lock; calls with a deadline inside the
// outage fail with ErrUnavailable, and their task is stored at most once.
func TestEnqueueAcrossOutage(t *testing.T) {
	for _, how := range []string{"frozen", "crashed"} {
		t.Run(how, func(t *testing.T) {
			rs := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
			st, err := Open(fmt.Sprintf("redis://%s/0?timeout=500ms", rs.Addr))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			client := NewClient(st)
			run := &enqueueRun{ok: map[string]string{}, failed: map[string]error{}}

			stop := make(chan struct{})
			var wg sync.WaitGroup
			enqueuer := func(name string, deadline time.Duration, opts ...Option) {
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						payload := fmt.Sprintf("%s-%d", name, i)
						ctx, cancel := context.WithTimeout(context.Background(), deadline)
						start := time.Now()
						info, err := client.EnqueueContext(ctx, NewTask("work", []byte(payload)), opts...)
						took := time.Since(start)
						cancel()
						run.mu.Lock()
						switch {
						case err == nil:
							run.ok[payload] = info.ID
							run.longest = max(run.longest, took)
							if took > time.Second {
								run.spanning++
							}
						case errors.Is(err, ErrDuplicateTask):
							run.dups++
						default:
							run.failed[payload] = err
						}
						run.mu.Unlock()
						time.Sleep(5 * time.Millisecond) // a steady trickle, not a flood
					}
				})
			}
			for g := range 4 {
				enqueuer(fmt.Sprint("long", g), 20*time.Second)
			}
			enqueuer("unique", 20*time.Second, Unique(time.Hour))
			enqueuer("short", time.Second)

			time.Sleep(500 * time.Millisecond) // enqueues before the outage
			switch how {
			case "frozen":
				if err := rs.Freeze(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(3 * time.Second) // the outage
				if err := rs.Thaw(); err != nil {
					t.Fatal(err)
				}
			case "crashed":
				if err := rs.Crash(); err != nil {
					t.Fatal(err)
				}
				time.Sleep(3 * time.Second) // the outage
				if err := rs.Restart(); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(time.Second) // enqueues after it
			close(stop)
			wg.Wait()

			stored := storedPayloads(t, st)
			run.mu.Lock()
			defer run.mu.Unlock()
			t.Logf("%s: %d calls succeeded (%d across the outage, the longest %v), %d failed; %d tasks stored",
				how, len(run.ok), run.spanning, run.longest, len(run.failed), len(stored))
			if run.dups > 0 {
				t.Errorf("%d Unique enqueues met their own lock (ErrDuplicateTask)", run.dups)
			}
			if run.spanning == 0 {
				t.Error("no call spanned the outage")
			}
			for payload, err := range run.failed {
				if !strings.HasPrefix(payload, "short-") {
					t.Errorf("enqueue of %s, whose deadline outlasts the outage, failed: %v", payload, err)
				} else if !errors.Is(err, ErrUnavailable) {
					t.Errorf("enqueue of %s failed with %v, want ErrUnavailable", payload, err)
				}
			}
			for payload, id := range run.ok {
				ids := stored[payload]
				if len(ids) != 1 || ids[0] != id {
					t.Errorf("task %s (ID %s) is stored %d times: %v", payload, id, len(ids), ids)
				}
			}
			for payload, ids := range stored {
				if len(ids) != 1 {
					t.Errorf("task %s is stored %d times: %v", payload, len(ids), ids)
				}
				if _, ok := run.ok[payload]; !ok {
					if _, failed := run.failed[payload]; !failed {
						t.Errorf("task %s is stored but no call made it", payload)
					}
				}
			}
			if how == "frozen" {
				// Redis ran the attempts it held while frozen: more
				// script calls than tasks (one each when nothing fails),
				// each task stored once.
				evals := evalCalls(t, rs.Addr)
				t.Logf("frozen: %d enqueue scripts ran for %d tasks", evals, len(stored))
				if evals <= int64(len(stored)) {
					t.Errorf("%d scripts ran for %d tasks: no attempt was repeated", evals, len(stored))
				}
			}
		})
	}
}

// evalCalls reads how many EVALSHA and EVAL calls Redis has run.
func evalCalls(t *testing.T, addr string) int64 {
	t.Helper()
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	s, err := rc.Do(context.Background(), rc.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		v, _, _ := strings.Cut(rest, ",")
		c, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		n += c
	}
	return n
}

// storedPayloads lists the pending tasks of the default queue: payload ->
// the IDs of the tasks that carry it.
func storedPayloads(t *testing.T, st *Storage) map[string][]string {
	t.Helper()
	insp := NewInspector(st)
	out := map[string][]string{}
	for page := 1; ; page++ {
		ts, err := insp.ListPendingTasks("default", PageSize(1000), Page(page))
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range ts {
			out[string(ti.Payload)] = append(out[string(ti.Payload)], ti.ID)
		}
		if len(ts) < 1000 {
			return out
		}
	}
}

// TestEnqueueRetryFor checks how long a call without a deadline of its own
// keeps trying while Redis does not answer: ClientOptions.RetryFor, or one
// attempt bounded by the storage timeout when RetryFor is negative. Either
// way it fails with ErrUnavailable, and a refusal is never retried.
func TestEnqueueRetryFor(t *testing.T) {
	rs := redistest.Start(t)
	st, err := Open(fmt.Sprintf("redis://%s/0?timeout=300ms", rs.Addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := NewClient(st).Enqueue(NewTask("t", nil), TaskID("taken")); err != nil {
		t.Fatal(err)
	}
	if err := rs.Freeze(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Thaw() }()
	for _, c := range []struct {
		retryFor, min, max time.Duration
	}{
		{time.Second, time.Second, 1500 * time.Millisecond},
		{-1, 0, 800 * time.Millisecond}, // one attempt: at most the timeout (a dead connection may fail it sooner)
	} {
		client := NewClientWithOptions(st, ClientOptions{RetryFor: c.retryFor})
		start := time.Now()
		_, err := client.Enqueue(NewTask("t", nil))
		took := time.Since(start)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("RetryFor %v: Enqueue while Redis is frozen: %v, want ErrUnavailable", c.retryFor, err)
		}
		if took < c.min || took > c.max {
			t.Errorf("RetryFor %v: Enqueue failed after %v, want between %v and %v", c.retryFor, took, c.min, c.max)
		}
	}
	if err := rs.Thaw(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = NewClient(st).Enqueue(NewTask("other", nil), TaskID("taken"))
	if !errors.Is(err, ErrTaskIDConflict) || time.Since(start) > 2*time.Second { // not retried: well under RetryFor's 10 s
		t.Errorf("Enqueue under a taken ID: %v after %v, want ErrTaskIDConflict at once", err, time.Since(start))
	}
}
