package rdb

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

// BenchmarkEventLog measures what the event log costs Redis per task: the
// whole life of a task (enqueued, started, succeeded: three log entries)
// with the log off and on, in the two shapes a Server sees, and reports
// Redis CPU µs, commands and XADDs per task. Run with:
//
//	go test ./internal/rdb -run XXX -bench EventLog -benchtime 100000x -count 5
func BenchmarkEventLog(b *testing.B) {
	for _, shape := range []struct {
		name           string
		enqueue        func(b *testing.B, br *Broker, n int)
		batch, workers int
	}{
		// Enqueue one by one from 16 goroutines (enqueue_plain.lua), then
		// fetch and complete one at a time from 16 workers.
		{"single", enqueueSingles, 1, 16},
		// EnqueueBatch of 1,000, then fetch and complete 16 at a time from
		// 4 workers.
		{"batch", func(b *testing.B, br *Broker, n int) { preload(b, br, "bench", n) }, 16, 4},
	} {
		for _, size := range []int{-1, 0} {
			name := "log=on"
			if size < 0 {
				name = "log=off"
			}
			b.Run(shape.name+"/"+name, func(b *testing.B) {
				br := eventBenchBroker(b, size)
				before := redisStats(b, br)
				cpu := startCPU(b, br)
				start := time.Now()
				shape.enqueue(b, br, b.N)
				processAll(b, br, b.N, shape.batch, shape.workers)
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
				cpu.report(b)
				after := redisStats(b, br)
				for _, m := range []struct{ stat, unit string }{
					{"total_commands_processed", "cmds/task"},
					{"cmdstat_xadd", "xadds/task"},
					{"usec_xadd", "xadd-µs/task"},
					{"usec_evalsha", "evalsha-µs/task"},
				} {
					b.ReportMetric(float64(after[m.stat]-before[m.stat])/float64(b.N), m.unit)
				}
			})
		}
	}
}

func eventBenchBroker(b *testing.B, logSize int) *Broker {
	b.Helper()
	co, _, err := ParseURL(redistest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	co.PipelineMultiplex = pipelineMultiplex(1)
	c, err := rueidis.NewClient(co)
	if err != nil {
		b.Fatal(err)
	}
	br := New(c, Options{EventLogSize: logSize})
	b.Cleanup(func() { _ = br.Close() })
	if err := br.loadScripts(context.Background()); err != nil {
		b.Fatal(err)
	}
	return br
}

// enqueueSingles enqueues n plain tasks from 16 goroutines.
func enqueueSingles(b *testing.B, br *Broker, n int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				m := msg("bench", fmt.Sprint("t", i))
				m.Payload = payload100
				if err := br.Enqueue(context.Background(), broker.EnqueueParams{Msg: m}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// processAll fetches and completes n tasks of queue bench, batch at a time
// from workers goroutines, as a Server's Processor does with a no-op
// handler.
func processAll(b *testing.B, br *Broker, n, batch, workers int) {
	var done atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for {
				ls, err := br.Fetch(ctx, broker.FetchParams{Queue: "bench", Max: batch, LeaseDuration: time.Minute, ServerID: "bench"})
				if err != nil || len(ls) == 0 {
					if err != nil {
						b.Error(err)
					}
					return
				}
				for _, err := range br.Complete(ctx, refsOf(ls)) {
					if err != nil {
						b.Error(err)
						return
					}
				}
				done.Add(int64(len(ls)))
			}
		}()
	}
	wg.Wait()
	if int(done.Load()) != n {
		b.Fatalf("processed %d of %d", done.Load(), n)
	}
}

// redisStats reads the commands Redis has processed: the total and, as
// cmdstat_<name>, the calls of each command.
func redisStats(b *testing.B, br *Broker) map[string]int64 {
	s, err := br.c.Do(context.Background(), br.c.B().Info().Section("all").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if name == "total_commands_processed" {
			out[name], _ = strconv.ParseInt(val, 10, 64)
		}
		if strings.HasPrefix(name, "cmdstat_") {
			// calls=N,usec=M,...
			calls, rest, _ := strings.Cut(strings.TrimPrefix(val, "calls="), ",")
			usec, _, _ := strings.Cut(strings.TrimPrefix(rest, "usec="), ",")
			out[name], _ = strconv.ParseInt(calls, 10, 64)
			out["usec_"+strings.TrimPrefix(name, "cmdstat_")], _ = strconv.ParseInt(usec, 10, 64)
		}
	}
	return out
}
