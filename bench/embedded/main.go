// Command embedbench measures the embedded backend (package embedded) at the
// broker level and prints one JSON line per scenario run, in the shape of
// the peer harness (shared/bench/cmd/peerbench): scenario, impl, label, run,
// go_version, gomaxprocs, time, then the scenario's figures.
//
//	cd bench/embedded && go run . -scenario enqueue -conc 16
//	cd bench/embedded && go run . -scenario all
//
// Scenarios:
//
//	enqueue  durable Enqueue of n tasks from conc goroutines
//	process  fetch + complete of n preloaded tasks by conc workers, straight
//	         on the broker (no Server: an upper bound for it)
//	serverprocess  the same through htq.Server (Concurrency conc, no-op
//	         handler), as peerbench's process scenario
//	latency  an idle htq.Server; n tasks enqueued at -rate per second;
//	         handler start minus enqueue start
//	reopen   open a directory holding n pending tasks (default 1,000,000)
//	disk     file bytes and Go heap per pending task after n enqueues
//	churn    n tasks pass through a queue holding a steady number; file size
//	         at each quarter (growth)
//
// The data directory is a fresh temporary one on the working disk (or
// under -dir) and is removed afterwards.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/embedded"
)

type config struct {
	scenario string
	n        int
	conc     int
	payload  int
	steady   int
	rate     int
	label    string
	run      int
	dir      string
}

func main() {
	var c config
	flag.StringVar(&c.scenario, "scenario", "enqueue", "enqueue|process|reopen|disk|churn|all")
	flag.IntVar(&c.n, "n", 0, "tasks (default depends on the scenario)")
	flag.IntVar(&c.conc, "conc", 16, "goroutines (enqueue) or workers (process)")
	flag.IntVar(&c.payload, "payload", 100, "payload bytes")
	flag.IntVar(&c.steady, "steady", 10_000, "churn: tasks kept pending")
	flag.IntVar(&c.rate, "rate", 500, "latency: tasks enqueued per second")
	flag.StringVar(&c.label, "label", "", "free text copied into every line")
	flag.IntVar(&c.run, "run", 1, "repetition number copied into every line")
	flag.StringVar(&c.dir, "dir", "", "parent of the scratch data directory (default: system temp dir)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	scenarios := []string{c.scenario}
	if c.scenario == "all" {
		scenarios = []string{"enqueue", "process", "serverprocess", "latency", "disk", "churn", "reopen"}
	}
	for _, s := range scenarios {
		var err error
		switch s {
		case "enqueue":
			err = scenarioEnqueue(ctx, c)
		case "process":
			err = scenarioProcess(ctx, c)
		case "reopen":
			err = scenarioReopen(ctx, c)
		case "serverprocess":
			err = scenarioServerProcess(ctx, c)
		case "latency":
			err = scenarioLatency(ctx, c)
		case "disk":
			err = scenarioDisk(ctx, c)
		case "churn":
			err = scenarioChurn(ctx, c)
		default:
			flag.Usage()
			os.Exit(2)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "embedbench: %s: %v\n", s, err)
			pprof.StopCPUProfile()
			os.Exit(1)
		}
	}
}

func emit(c config, scenario string, f map[string]any) {
	rec := map[string]any{
		"scenario":     scenario,
		"impl":         "htq-embedded",
		"impl_version": "bbolt v1.5.0",
		"label":        c.label,
		"run":          c.run,
		"go_version":   runtime.Version(),
		"gomaxprocs":   runtime.GOMAXPROCS(0),
		"time":         time.Now().UTC().Format(time.RFC3339),
	}
	for k, v := range f {
		rec[k] = v
	}
	b, _ := json.Marshal(rec)
	fmt.Println(string(b))
}

func def(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

func scratch(c config) (string, func(), error) {
	dir, err := os.MkdirTemp(c.dir, "embedbench")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}

var reopenProfile = flag.String("reopenprofile", "", "reopen: write a CPU profile of the Open call to this file")

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func open(ctx context.Context, dir string) (*embedded.Broker, error) {
	return embedded.Open(ctx, dir, embedded.Options{Logger: quiet})
}

var idSeq atomic.Int64

func newMsg(c config) *base.TaskMessage {
	return &base.TaskMessage{
		ID:       fmt.Sprintf("%016x", idSeq.Add(1)),
		Type:     "bench:noop",
		Payload:  make([]byte, c.payload),
		Queue:    "default",
		MaxRetry: 25,
		Timeout:  time.Minute,
	}
}

// preload enqueues n pending tasks in batches of 1,000.
func preload(ctx context.Context, b *embedded.Broker, c config, n int) error {
	for i := 0; i < n; i += 1000 {
		ps := make([]broker.EnqueueParams, 0, 1000)
		for j := i; j < min(n, i+1000); j++ {
			ps = append(ps, broker.EnqueueParams{Msg: newMsg(c)})
		}
		for _, err := range b.EnqueueBatch(ctx, ps) {
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func fileSize(dir string) int64 {
	fi, err := os.Stat(filepath.Join(dir, embedded.DataFileName))
	if err != nil {
		return -1
	}
	return fi.Size()
}

func scenarioEnqueue(ctx context.Context, c config) error {
	n := def(c.n, 100_000)
	dir, cleanup, err := scratch(c)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := open(ctx, dir)
	if err != nil {
		return err
	}
	defer b.Close()
	lat := make([][]float64, c.conc)
	var next atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuSeconds()
	start := time.Now()
	for g := range c.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				t0 := time.Now()
				if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: newMsg(c)}); err != nil {
					panic(err)
				}
				lat[g] = append(lat[g], float64(time.Since(t0).Nanoseconds())/1e6)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := cpuSeconds() - cpu0
	commits, commitTime := b.CommitStats()
	var all []float64
	for _, l := range lat {
		all = append(all, l...)
	}
	f := map[string]any{
		"n": n, "conc": c.conc, "payload_bytes": c.payload,
		"wall_s":           round(wall.Seconds(), 4),
		"tasks_per_s":      round(float64(n)/wall.Seconds(), 1),
		"durable":          true,
		"commits":          commits,
		"tasks_per_commit": round(float64(n)/float64(commits), 2),
		"commit_mean_ms":   round(float64(commitTime.Nanoseconds())/float64(commits)/1e6, 3),
		"cpu_us_per_task":  round(cpu*1e6/float64(n), 2),
	}
	for k, v := range distribution(all) {
		f["call_"+k] = v
	}
	emit(c, "enqueue", f)
	return nil
}

func scenarioProcess(ctx context.Context, c config) error {
	n := def(c.n, 100_000)
	dir, cleanup, err := scratch(c)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := open(ctx, dir)
	if err != nil {
		return err
	}
	defer b.Close()
	t0 := time.Now()
	if err := preload(ctx, b, c, n); err != nil {
		return err
	}
	preloadT := time.Since(t0)
	c0, _ := b.CommitStats()
	var done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c.conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: time.Minute, ServerID: "bench"})
				if err != nil {
					panic(err)
				}
				if len(ls) == 0 {
					return
				}
				if errs := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
					panic(errs[0])
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	c1, _ := b.CommitStats()
	emit(c, "process", map[string]any{
		"n": n, "conc": c.conc, "payload_bytes": c.payload,
		"level":       "broker: Fetch(Max 1) + Complete per task, no Server",
		"processed":   done.Load(),
		"wall_s":      round(wall.Seconds(), 4),
		"tasks_per_s": round(float64(done.Load())/wall.Seconds(), 1),
		"preload_s":   round(preloadT.Seconds(), 3),
		"commits":     c1 - c0,
	})
	return nil
}

func scenarioReopen(ctx context.Context, c config) error {
	n := def(c.n, 1_000_000)
	dir, cleanup, err := scratch(c)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := open(ctx, dir)
	if err != nil {
		return err
	}
	if err := preload(ctx, b, c, n); err != nil {
		return err
	}
	if err := b.Close(); err != nil {
		return err
	}
	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if *reopenProfile != "" {
		f, err := os.Create(*reopenProfile)
		if err != nil {
			return err
		}
		_ = pprof.StartCPUProfile(f)
	}
	start := time.Now()
	b, err = open(ctx, dir)
	if err != nil {
		return err
	}
	took := time.Since(start)
	if *reopenProfile != "" {
		pprof.StopCPUProfile()
	}
	runtime.GC()
	var m1 runtime.MemStats
	runtime.ReadMemStats(&m1)
	ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "default", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ls) != 1 {
		return fmt.Errorf("fetch after reopen: %v, %d tasks", err, len(ls))
	}
	if err := b.Close(); err != nil {
		return err
	}
	emit(c, "reopen", map[string]any{
		"n": n, "payload_bytes": c.payload,
		"open_ms":             round(float64(took.Nanoseconds())/1e6, 1),
		"file_bytes":          fileSize(dir),
		"heap_bytes_after":    m1.HeapAlloc,
		"heap_bytes_per_task": round(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(n), 1),
	})
	return nil
}

func scenarioDisk(ctx context.Context, c config) error {
	n := def(c.n, 100_000)
	dir, cleanup, err := scratch(c)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := open(ctx, dir)
	if err != nil {
		return err
	}
	empty := fileSize(dir)
	if err := preload(ctx, b, c, n); err != nil {
		return err
	}
	if err := b.Sync(ctx); err != nil {
		return err
	}
	full := fileSize(dir)
	if err := b.Close(); err != nil {
		return err
	}
	emit(c, "disk", map[string]any{
		"n": n, "payload_bytes": c.payload,
		"file_bytes_empty": empty,
		"file_bytes":       full,
		"bytes_per_task":   round(float64(full-empty)/float64(n), 1),
	})
	return nil
}

func scenarioChurn(ctx context.Context, c config) error {
	n := def(c.n, 1_000_000)
	dir, cleanup, err := scratch(c)
	if err != nil {
		return err
	}
	defer cleanup()
	b, err := open(ctx, dir)
	if err != nil {
		return err
	}
	if err := preload(ctx, b, c, c.steady); err != nil {
		return err
	}
	if err := b.Sync(ctx); err != nil {
		return err
	}
	atSteady := fileSize(dir)
	var sizes []int64
	const step = 100
	start := time.Now()
	// One producer batch and one consumer batch per step, like a queue in
	// balance: enqueue 100, fetch the 100 oldest, complete them.
	for done := 0; done < n; done += step {
		if err := preload(ctx, b, c, step); err != nil {
			return err
		}
		ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "default", Max: step, LeaseDuration: time.Minute})
		if err != nil {
			return err
		}
		refs := make([]broker.LeaseRef, len(ls))
		for i, l := range ls {
			refs[i] = l.Ref()
		}
		for _, err := range b.Complete(ctx, refs) {
			if err != nil {
				return err
			}
		}
		if (done+step)%(n/4) == 0 {
			sizes = append(sizes, fileSize(dir))
		}
	}
	wall := time.Since(start)
	if err := b.Close(); err != nil {
		return err
	}
	after := fileSize(dir)
	emit(c, "churn", map[string]any{
		"n": n, "steady_pending": c.steady, "payload_bytes": c.payload,
		"file_bytes_at_steady":    atSteady,
		"file_bytes_each_quarter": sizes,
		"file_bytes_after":        after,
		"growth_ratio":            round(float64(after)/float64(atSteady), 3),
		"wall_s":                  round(wall.Seconds(), 2),
	})
	return nil
}

func distribution(ms []float64) map[string]float64 {
	s := append([]float64(nil), ms...)
	sort.Float64s(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	return map[string]float64{
		"p50_ms":  round(percentile(s, 50), 3),
		"p95_ms":  round(percentile(s, 95), 3),
		"p99_ms":  round(percentile(s, 99), 3),
		"min_ms":  round(s[0], 3),
		"max_ms":  round(s[len(s)-1], 3),
		"mean_ms": round(sum/float64(len(s)), 3),
	}
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func round(v float64, digits int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}

// cpuSeconds returns the user and system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
