package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

const channel = "bench:events"

// A subscriber holds one subscription to channel and calls fn for every
// message, from one goroutine.
type subscriber struct {
	name, desc string
	open       func(ctx context.Context, addr string, fn func(msg string)) (stop func(), err error)
}

var subscribers = []subscriber{
	{"rueidis-dedicated", "rueidis Client.Dedicate(), then Receive(SUBSCRIBE) on that connection", subRueidisDedicated},
	{"rueidis-shared", "rueidis Client.Receive(SUBSCRIBE) on the shared, auto-pipelined connection (RESP3)", subRueidisShared},
	{"go-redis", "go-redis Client.Subscribe (its own connection), ReceiveMessage loop", subGoRedis},
}

func subscriberNames() []string {
	var s []string
	for _, x := range subscribers {
		s = append(s, x.name)
	}
	return s
}

func subRueidisDedicated(ctx context.Context, addr string, fn func(string)) (func(), error) {
	c, err := newRueidis(addr)
	if err != nil {
		return nil, err
	}
	dc, release := c.Dedicate()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- dc.Receive(rctx, dc.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) { fn(m.Message) })
	}()
	return func() { cancel(); <-done; release(); c.Close() }, nil
}

func subRueidisShared(ctx context.Context, addr string, fn func(string)) (func(), error) {
	c, err := newRueidis(addr)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- c.Receive(rctx, c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) { fn(m.Message) })
	}()
	return func() { cancel(); <-done; c.Close() }, nil
}

func subGoRedis(ctx context.Context, addr string, fn func(string)) (func(), error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	ps := c.Subscribe(ctx, channel)
	if _, err := ps.Receive(ctx); err != nil { // the subscribe confirmation
		c.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				return
			}
			fn(m.Payload)
		}
	}()
	return func() { ps.Close(); <-done; c.Close() }, nil
}

// waitSubscribed polls PUBSUB NUMSUB until the channel has one subscriber.
func waitSubscribed(ctx context.Context, ad *redis.Client) error {
	for i := 0; i < 200; i++ {
		m, err := ad.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			return err
		}
		if m[channel] == 1 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("subscription to %s did not appear", channel)
}

// measurePubSub measures one subscriber twice, with the same publishers for
// every subscriber: latency (one message at a time from a plain go-redis
// client in this process: publish call to handler, p50/p99) and intake
// (redis-benchmark, a separate process, publishes o.pubsubTpN messages with
// -P 50; this process's CPU is then the subscriber's alone).
func measurePubSub(ctx context.Context, ad *redis.Client, addr, name string, o options) ([]record, error) {
	var sub subscriber
	for _, s := range subscribers {
		if s.name == name {
			sub = s
		}
	}
	if err := ad.FlushAll(ctx).Err(); err != nil {
		return nil, err
	}
	// Let the benchmark publisher run ahead of a slow subscriber without the
	// server disconnecting it.
	if err := ad.ConfigSet(ctx, "client-output-buffer-limit", "pubsub 0 0 0").Err(); err != nil {
		return nil, err
	}

	// Latency.
	recv := make(chan time.Time, 1)
	var phase atomic.Int32 // 0 = latency, 1 = intake
	var count atomic.Int64
	target := int64(o.pubsubTpN)
	intakeDone := make(chan time.Time, 1)
	stop, err := sub.open(ctx, addr, func(string) {
		if phase.Load() == 0 {
			recv <- time.Now()
			return
		}
		if count.Add(1) == target {
			intakeDone <- time.Now()
		}
	})
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := waitSubscribed(ctx, ad); err != nil {
		return nil, err
	}
	pub := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	defer pub.Close()
	lat := make([]float64, 0, o.pubsubN)
	for i := 0; i < o.pubsubN; i++ {
		t0 := time.Now()
		if err := pub.Publish(ctx, channel, argVal).Err(); err != nil {
			return nil, err
		}
		select {
		case t := <-recv:
			lat = append(lat, float64(t.Sub(t0))/1e6)
		case <-time.After(5 * time.Second):
			return nil, fmt.Errorf("message %d not received", i)
		}
	}
	sort.Float64s(lat)
	out := []record{{
		Scenario: "pubsub-latency", Mode: name, Ops: int64(len(lat)),
		P50ms: round(pct(lat, 50), 4), P99ms: round(pct(lat, 99), 4),
	}}

	// Intake.
	phase.Store(1)
	s0, err := snap(ctx, ad)
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	bench := exec.Command("redis-benchmark", "-h", host, "-p", port, "-n", strconv.Itoa(o.pubsubTpN),
		"-c", "2", "-P", "50", "-q", "publish", channel, argVal)
	bench.Stdout, bench.Stderr = nil, os.Stderr
	if err := bench.Run(); err != nil {
		return nil, fmt.Errorf("redis-benchmark: %w", err)
	}
	var end time.Time
	select {
	case end = <-intakeDone:
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("only %d of %d messages received", count.Load(), target)
	}
	s1, err := snap(ctx, ad)
	if err != nil {
		return nil, err
	}
	// redis-benchmark is a child: its CPU is in RUSAGE_CHILDREN, not in
	// RUSAGE_SELF, so s1.self - s0.self is the subscriber (plus the idle
	// publisher client).
	wall := end.Sub(s0.at).Seconds()
	out = append(out, record{
		Scenario: "pubsub-intake", Mode: name, Ops: target,
		WallS: round(wall, 4), OpsPerS: round(float64(target)/wall, 1),
		ClientCPUus: round((s1.self-s0.self)/float64(target)*1e6, 3),
		RedisCPUus:  round((s1.redis-s0.redis)/float64(target)*1e6, 3),
	})
	return out, nil
}

func pct(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func round(v float64, digits int) float64 {
	p := 1.0
	for i := 0; i < digits; i++ {
		p *= 10
	}
	if v < 0 {
		return -float64(int64(-v*p+0.5)) / p
	}
	return float64(int64(v*p+0.5)) / p
}
