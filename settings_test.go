package htq

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestQueueMaxConcurrencyAcrossServers: three servers share a queue limited
// to 3 running tasks: never more run at once, and the limit is reached.
func TestQueueMaxConcurrencyAcrossServers(t *testing.T) {
	st := openTestStorage(t)
	if err := NewInspector(st).SetQueueSettings("lim", QueueSettings{MaxConcurrency: 3}); err != nil {
		t.Fatal(err)
	}
	const n = 150
	var running, peak atomic.Int32
	var wg sync.WaitGroup
	wg.Add(n)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		defer wg.Done()
		now := running.Add(1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
		running.Add(-1)
		return nil
	})
	for i := 0; i < 3; i++ {
		startServer(t, st, quietConfig(Config{Concurrency: 5, Queues: map[string]int{"lim": 1}}), h)
	}
	c := NewClient(st)
	for i := 0; i < n; i++ {
		if _, err := c.Enqueue(NewTask("t", nil), Queue("lim")); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if p := peak.Load(); p != 3 {
		t.Fatalf("peak concurrency %d with a limit of 3 (must not exceed it, and should reach it)", p)
	}
}

// TestQueueRateLimitAcrossServers: three servers share a queue limited to
// 40 starts per second with bursts of 4: the starts never outrun the
// bucket, and the throughput comes near the limit.
func TestQueueRateLimitAcrossServers(t *testing.T) {
	st := openTestStorage(t)
	const rate, burst, n = 40.0, 4, 80
	if err := NewInspector(st).SetQueueSettings("rl", QueueSettings{RateLimit: rate, RateBurst: burst}); err != nil {
		t.Fatal(err)
	}
	c := NewClient(st)
	for i := 0; i < n; i++ {
		if _, err := c.Enqueue(NewTask("t", nil), Queue("rl")); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var starts []time.Time
	done := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		mu.Lock()
		defer mu.Unlock()
		starts = append(starts, time.Now())
		if len(starts) == n {
			close(done)
		}
		return nil
	})
	for i := 0; i < 3; i++ {
		startServer(t, st, quietConfig(Config{Concurrency: 10, Queues: map[string]int{"rl": 1}}), h)
	}
	recv(t, done, 30*time.Second, "all tasks")
	mu.Lock()
	defer mu.Unlock()
	first := starts[0]
	for i, s := range starts {
		// A token bucket allows at most burst + rate*elapsed starts by any
		// moment; 50 ms of slack covers the gap between the storage's clock
		// and the handler's.
		allowed := float64(burst) + rate*(s.Sub(first).Seconds()+0.05)
		if float64(i+1) > allowed {
			t.Fatalf("start %d at +%v exceeds the bucket (%.1f allowed)", i+1, s.Sub(first), allowed)
		}
	}
	elapsed := starts[n-1].Sub(first).Seconds()
	ideal := float64(n-burst) / rate
	if elapsed > 2*ideal {
		t.Fatalf("%d tasks took %.2fs; the limit allows %.2fs: throughput stops well short of the limit", n, elapsed, ideal)
	}
	t.Logf("%d starts in %.2fs (ideal %.2fs)", n, elapsed, ideal)
}
