package rdb

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokerbench"
	"github.com/htqueue/htq/internal/redistest"
)

// Run with:
//
//	go test ./internal/rdb -run XXX -bench . -benchtime 200000x
//
// Each benchmark reports tasks/s besides ns/op (one op = one task).

// clientVariant is a set of rueidis options measured against the default.
type clientVariant struct {
	name  string
	apply func(*rueidis.ClientOption)
}

var clientVariants = []clientVariant{
	{"conns1", func(co *rueidis.ClientOption) { co.PipelineMultiplex = pipelineMultiplex(1) }}, // Open's default
	{"conns4", func(co *rueidis.ClientOption) { co.PipelineMultiplex = pipelineMultiplex(4) }}, // rueidis's default
	{"conns1-flushdelay20us", func(co *rueidis.ClientOption) {
		co.PipelineMultiplex = pipelineMultiplex(1)
		co.MaxFlushDelay = 20 * time.Microsecond
	}},
}

func benchBroker(b *testing.B, v clientVariant) *Broker {
	b.Helper()
	co, _, err := ParseURL(redistest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	v.apply(&co)
	c, err := rueidis.NewClient(co)
	if err != nil {
		b.Fatal(err)
	}
	br := New(c, Options{})
	b.Cleanup(func() { _ = br.Close() })
	return br
}

var payload100 = []byte(strings.Repeat("x", 100))

// preload enqueues n pending tasks into q in batches of 1,000.
func preload(b *testing.B, br *Broker, q string, n int) {
	b.Helper()
	preloadWith(b, br, q, n, 0)
}

// preloadWith is preload with each task's retention.
func preloadWith(b *testing.B, br *Broker, q string, n int, retention time.Duration) {
	b.Helper()
	ps := make([]broker.EnqueueParams, 0, 1000)
	for i := 0; i < n; i += len(ps) {
		ps = ps[:0]
		for j := i; j < n && len(ps) < 1000; j++ {
			m := msg(q, fmt.Sprint("t", j))
			m.Payload = payload100
			m.Retention = retention
			ps = append(ps, broker.EnqueueParams{Msg: m})
		}
		for _, err := range br.EnqueueBatch(context.Background(), ps) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// refsOf returns the references of leases, for Complete.
func refsOf(leases []*broker.Lease) []broker.LeaseRef {
	refs := make([]broker.LeaseRef, len(leases))
	for i, l := range leases {
		refs[i] = l.Ref()
	}
	return refs
}

// BenchmarkFetchComplete measures processing: workers that fetch a batch
// and complete it, as the Server's Processor does with a no-op handler.
func BenchmarkFetchComplete(b *testing.B) {
	for _, v := range clientVariants {
		for _, batch := range []int{1, 16, 64} {
			workers := 4
			if batch == 1 {
				workers = 16
			}
			b.Run(fmt.Sprintf("%s/batch=%d/workers=%d", v.name, batch, workers), func(b *testing.B) {
				br := benchBroker(b, v)
				preload(b, br, "bench", b.N)
				ctx := context.Background()
				var done atomic.Int64
				var wg sync.WaitGroup
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						refs := make([]broker.LeaseRef, 0, batch)
						for {
							ls, err := br.Fetch(ctx, broker.FetchParams{Queue: "bench", Max: batch, LeaseDuration: time.Minute, ServerID: "bench"})
							if err != nil {
								b.Error(err)
								return
							}
							if len(ls) == 0 {
								return
							}
							refs = refs[:0]
							for _, l := range ls {
								refs = append(refs, l.Ref())
							}
							for _, err := range br.Complete(ctx, refs) {
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
				b.StopTimer()
				if int(done.Load()) != b.N {
					b.Fatalf("processed %d of %d", done.Load(), b.N)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
			})
		}
	}
}

// BenchmarkEnqueue measures single Enqueue calls from 1 goroutine (one
// round trip each) and from 16 (the client's pipelining batches them), and
// EnqueueBatch of 1,000 from 1 goroutine.
func BenchmarkEnqueue(b *testing.B) {
	for _, v := range clientVariants {
		b.Run(v.name+"/single/goroutines=1", func(b *testing.B) {
			br := benchBroker(b, v)
			ctx := context.Background()
			b.ReportAllocs()
			cpu := startCPU(b, br)
			start := time.Now()
			for i := range b.N {
				m := msg("bench", fmt.Sprint("t", i))
				m.Payload = payload100
				if err := br.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
			cpu.report(b)
		})
		b.Run(v.name+"/single/goroutines=16", func(b *testing.B) {
			br := benchBroker(b, v)
			var n atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(16 / max(1, runtimeProcs()))
			cpu := startCPU(b, br)
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					m := msg("bench", fmt.Sprint("t", n.Add(1)))
					m.Payload = payload100
					if err := br.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
			cpu.report(b)
		})
		b.Run(v.name+"/batch=1000", func(b *testing.B) {
			br := benchBroker(b, v)
			b.ReportAllocs()
			cpu := startCPU(b, br)
			start := time.Now()
			preload(b, br, "bench", b.N)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
			cpu.report(b)
		})
	}
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

// cpuMeter measures the CPU time Redis and this process spend during a
// benchmark, so that runs on a loaded machine still compare: wall-clock
// throughput depends on what else runs, CPU per task much less.
type cpuMeter struct {
	br            *Broker
	redis, client time.Duration
	clientOK      bool
}

func startCPU(b *testing.B, br *Broker) *cpuMeter {
	cl, ok := clientCPU()
	return &cpuMeter{br: br, redis: redisCPU(b, br), client: cl, clientOK: ok}
}

// report adds redis-µs/task and (where /proc tells it) client-µs/task to
// the benchmark's metrics.
func (c *cpuMeter) report(b *testing.B) {
	r := redisCPU(b, c.br) - c.redis
	b.ReportMetric(float64(r.Microseconds())/float64(b.N), "redis-µs/task")
	if cl, ok := clientCPU(); ok && c.clientOK {
		b.ReportMetric(float64((cl-c.client).Microseconds())/float64(b.N), "client-µs/task")
	}
}

// redisCPU returns the CPU time (user + system) the Redis server used so far.
func redisCPU(b *testing.B, br *Broker) time.Duration {
	s, err := br.c.Do(context.Background(), br.c.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for _, line := range strings.Split(s, "\n") {
		name, val, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, err := strconv.ParseFloat(val, 64)
			if err != nil {
				b.Fatal(err)
			}
			total += time.Duration(f * float64(time.Second))
		}
	}
	return total
}

// clientCPU returns the CPU time (user + system) this process used so far,
// from /proc/self/stat (Linux; in clock ticks of 10 ms); false elsewhere.
func clientCPU() (time.Duration, bool) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which ends with the last ')': state
	// is field 3, utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// BenchmarkProcessCost measures the Redis CPU of processing one task the
// way a busy Server does (one fetch of a batch, then one completion of it),
// without the Server: one loop, so that the figures are Redis's work per
// task and not scheduling. Variants: the defaults (event log on, the task
// deleted on success), the event log off, and tasks kept 24 h once
// completed (htq serve's default retention). Run with
//
//	go test ./internal/rdb -run XXX -bench ProcessCost -benchtime 50000x
//
// it reports redis-µs/task and, per task, the calls and µs of each command
// Redis ran (a script's µs include its commands').
func BenchmarkProcessCost(b *testing.B) {
	variants := []struct {
		name      string
		logOff    bool
		retention time.Duration
	}{{"default", false, 0}, {"eventlog=off", true, 0}, {"retention=24h", false, 24 * time.Hour}}
	for _, v := range variants {
		for _, batch := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/batch=%d", v.name, batch), func(b *testing.B) {
				br := benchBroker(b, clientVariants[0])
				if v.logOff {
					br.logLen = "0"
				}
				preloadWith(b, br, "bench", b.N, v.retention)
				ctx := context.Background()
				if err := br.c.Do(ctx, br.c.B().ConfigResetstat().Build()).Error(); err != nil {
					b.Fatal(err)
				}
				cpu := startCPU(b, br)
				b.ResetTimer()
				brokerbench.Drain(ctx, b, br, "bench", batch, b.N)
				b.StopTimer()
				cpu.report(b)
				reportCommands(b, br)
			})
		}
	}
}

// BenchmarkProcessSplit measures the Redis CPU of Fetch and of Complete
// apart, per task, with one batch of 64 always in flight: the next batch
// is fetched before the last one completes, so that 64 to 128 tasks are
// active, as in a busy Server (BenchmarkProcessCost empties the active
// zset on every batch). The event log is off. Run with
//
//	go test ./internal/rdb -run XXX -bench ProcessSplit -benchtime 64000x -count 3
//
// fetch-µs/task and complete-µs/task are the scripts' µs of INFO
// commandstats (their commands included), read after each call.
func BenchmarkProcessSplit(b *testing.B) {
	const batch = 64
	br := benchBroker(b, clientVariants[0])
	br.logLen = "0"
	preloadWith(b, br, "bench", b.N+batch, 0)
	ctx := context.Background()
	fetch := func() []broker.LeaseRef {
		ls, err := br.Fetch(ctx, broker.FetchParams{Queue: "bench", Max: batch, LeaseDuration: time.Minute, ServerID: "bench"})
		if err != nil || len(ls) == 0 {
			b.Fatalf("Fetch: %d leases, %v", len(ls), err)
		}
		return refsOf(ls)
	}
	held := fetch()
	var fetchUS, completeUS float64
	b.ResetTimer()
	for done := 0; done < b.N; {
		u0 := scriptUsec(b, br)
		next := fetch()
		u1 := scriptUsec(b, br)
		for _, err := range br.Complete(ctx, held) {
			if err != nil {
				b.Fatal(err)
			}
		}
		fetchUS += u1 - u0
		completeUS += scriptUsec(b, br) - u1
		done += len(held)
		held = next
	}
	b.ReportMetric(fetchUS/float64(b.N), "fetch-µs/task")
	b.ReportMetric(completeUS/float64(b.N), "complete-µs/task")
}

// scriptUsec returns the µs Redis spent in EVALSHA so far (INFO
// commandstats).
func scriptUsec(b *testing.B, br *Broker) float64 {
	s, err := br.c.Do(context.Background(), br.c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:")
		if !ok {
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "usec="); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return f
			}
		}
	}
	return 0
}

// reportCommands adds, per task, the calls and µs of each command that ran
// since the last CONFIG RESETSTAT (INFO commandstats; a script's µs
// include those of the commands it ran).
func reportCommands(b *testing.B, br *Broker) {
	s, err := br.c.Do(context.Background(), br.c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd || name == "info" || name == "config|resetstat" {
			continue
		}
		var calls, usec float64
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				calls, _ = strconv.ParseFloat(v, 64)
			case "usec":
				usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		b.ReportMetric(calls/float64(b.N), name+"/task")
		b.ReportMetric(usec/float64(b.N), name+"-µs/task")
	}
}
