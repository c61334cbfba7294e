// Command riverbench measures River (github.com/riverqueue/river) on an
// embedded SQLite file (riversqlite driver + the pure-Go modernc.org/sqlite,
// WAL, synchronous=FULL, one connection as River's SQLite driver advises),
// through River's public API only: the embedded peer of htq's file: store in
// `make bench` (bench/all). One invocation runs one scenario once and prints
// one JSON line on stdout.
//
//	enqueue  -variant seq|conc|many   N jobs by Insert from 1 goroutine, from
//	                                  -g goroutines, or by InsertMany in
//	                                  batches of -batch
//	process  -workers W               N jobs preloaded, then Start a client
//	                                  with a no-op worker; time until it ran N
//
// Adapted from the River harness the htq team measured its embedded store
// against (River v0.51.2); its figures are in docs/performance.md.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite"
)

const impl = "river-sqlite"

// benchArgs is the job payload; with the 80-byte pad its JSON encoding is
// 95-100 bytes (args_bytes in the output), like the peer harness's
// 100-byte payloads.
type benchArgs struct {
	I int    `json:"i"`
	P string `json:"p"`
}

// Kind names the job kind for River.
func (benchArgs) Kind() string { return "bench" }

var pad = strings.Repeat("x", 80)

type noopWorker struct {
	river.WorkerDefaults[benchArgs]
	onWork func(i int)
}

func (w *noopWorker) Work(_ context.Context, job *river.Job[benchArgs]) error {
	if w.onWork != nil {
		w.onWork(job.Args.I)
	}
	return nil
}

type opts struct {
	scenario  string
	variant   string
	dir       string
	sync      string
	n         int
	g         int
	batch     int
	workers   int
	cap       time.Duration
	fetchCool time.Duration
	maxConns  int
	rep       int
	label     string
}

func main() {
	var o opts
	flag.StringVar(&o.scenario, "scenario", "enqueue", "enqueue|process")
	flag.StringVar(&o.variant, "variant", "seq", "enqueue: seq|conc|many")
	flag.StringVar(&o.dir, "dir", "", "parent directory of the scratch database (default: the system's temp dir)")
	flag.StringVar(&o.sync, "sync", "FULL", "PRAGMA synchronous: FULL|NORMAL")
	flag.IntVar(&o.n, "n", 20000, "jobs")
	flag.IntVar(&o.g, "g", 16, "goroutines for enqueue -variant conc")
	flag.IntVar(&o.batch, "batch", 1000, "InsertMany batch size (enqueue many, preloads)")
	flag.IntVar(&o.workers, "workers", 10, "QueueConfig.MaxWorkers for the default queue")
	flag.DurationVar(&o.cap, "cap", 0, "process: stop timing after this long even if not all jobs ran (0 = no cap)")
	flag.DurationVar(&o.fetchCool, "fetch-cooldown", time.Millisecond, "Config.FetchCooldown (River's minimum, 1 ms, by default: at River's own default of 100 ms a client fetches at most ten times a second)")
	flag.IntVar(&o.maxConns, "max-conns", 1, "sql.DB SetMaxOpenConns (River's SQLite driver docs recommend 1)")
	flag.IntVar(&o.rep, "rep", 1, "repetition number (recorded only)")
	flag.StringVar(&o.label, "label", "", "settings label recorded in the output")
	flag.Parse()

	d, err := os.MkdirTemp(o.dir, "riverbench")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(d)
	o.dir = d

	ctx := context.Background()
	var rec map[string]any
	switch o.scenario {
	case "enqueue":
		rec, err = runEnqueue(ctx, o)
	case "process":
		rec, err = runProcess(ctx, o)
	default:
		err = fmt.Errorf("unknown scenario %q", o.scenario)
	}
	if err != nil {
		os.RemoveAll(d)
		fatal(fmt.Errorf("%s/%s: %w", o.scenario, o.variant, err))
	}
	out, err := json.Marshal(rec)
	if err != nil {
		fatal(err)
	}
	fmt.Println(string(out))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "riverbench:", err)
	os.Exit(1)
}

// ---------------------------------------------------------------- setup

// openDB opens the database file the way River's SQLite driver docs and its
// own test harness do (WAL journal, one open connection), plus an explicit
// synchronous level and a busy timeout.
func openDB(o opts) (*sql.DB, error) {
	dsn := "file:" + filepath.Join(o.dir, "river.db") +
		"?_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(" + o.sync + ")" +
		"&_pragma=busy_timeout(10000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(o.maxConns)
	return db, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// newClient builds a River client. workers == 0 gives an insert-only client
// (no Queues), which is how a producer-side process is configured.
func newClient(db *sql.DB, o opts, workers int, onWork func(int)) (*river.Client[*sql.Tx], error) {
	ws := river.NewWorkers()
	river.AddWorker(ws, &noopWorker{onWork: onWork})
	cfg := &river.Config{
		Logger:        quietLogger(),
		Workers:       ws,
		FetchCooldown: o.fetchCool,
	}
	if workers > 0 {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}}
	}
	return river.NewClient(riversqlite.New(db), cfg)
}

func pragmas(ctx context.Context, db *sql.DB) (journal string, syncLevel int, pageSize int, err error) {
	if err = db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
		return
	}
	if err = db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&syncLevel); err != nil {
		return
	}
	err = db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize)
	return
}

func setup(ctx context.Context, o opts) (*sql.DB, map[string]any, error) {
	db, err := openDB(o)
	if err != nil {
		return nil, nil, err
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrate: %w", err)
	}
	j, s, ps, err := pragmas(ctx, db)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	var sqliteVersion string
	if err := db.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&sqliteVersion); err != nil {
		db.Close()
		return nil, nil, err
	}
	argsJSON, _ := json.Marshal(benchArgs{I: o.n / 2, P: pad})
	rec := map[string]any{
		"impl":                impl,
		"scenario":            o.scenario,
		"rep":                 o.rep,
		"n":                   o.n,
		"sync":                strings.ToUpper(o.sync),
		"sqlite_version":      sqliteVersion,
		"pragma_journal_mode": j,
		"pragma_synchronous":  s,
		"page_size":           ps,
		"max_open_conns":      o.maxConns,
		"args_bytes":          len(argsJSON),
		"fetch_cooldown_ms":   ms(orDefault(o.fetchCool, river.FetchCooldownDefault)),
	}
	if o.label != "" {
		rec["label"] = o.label
	}
	return db, rec, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

func ms(d time.Duration) float64 { return round3(float64(d) / float64(time.Millisecond)) }

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func percentiles(rec map[string]any, prefix string, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	s := append([]time.Duration(nil), durs...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	pick := func(q float64) time.Duration {
		k := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(k, len(s)-1))]
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	rec[prefix+"p50_ms"] = ms(pick(0.50))
	rec[prefix+"p95_ms"] = ms(pick(0.95))
	rec[prefix+"p99_ms"] = ms(pick(0.99))
	rec[prefix+"max_ms"] = ms(s[len(s)-1])
	rec[prefix+"mean_ms"] = ms(sum / time.Duration(len(s)))
}

func insertManyBatches(ctx context.Context, c *river.Client[*sql.Tx], n, batch int) error {
	for done := 0; done < n; {
		k := min(batch, n-done)
		params := make([]river.InsertManyParams, k)
		for i := range params {
			params[i] = river.InsertManyParams{Args: benchArgs{I: done + i, P: pad}}
		}
		if _, err := c.InsertMany(ctx, params); err != nil {
			return err
		}
		done += k
	}
	return nil
}

func countState(ctx context.Context, db *sql.DB, state string) (int, error) {
	var n int
	err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = ?", state).Scan(&n)
	return n, err
}

// ---------------------------------------------------------------- enqueue

func runEnqueue(ctx context.Context, o opts) (map[string]any, error) {
	db, rec, err := setup(ctx, o)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	c, err := newClient(db, o, 0, nil)
	if err != nil {
		return nil, err
	}
	rec["variant"] = o.variant

	var lat []time.Duration
	cpu0 := cpuSeconds()
	start := time.Now()
	switch o.variant {
	case "seq":
		rec["goroutines"] = 1
		lat = make([]time.Duration, o.n)
		for i := 0; i < o.n; i++ {
			t := time.Now()
			if _, err := c.Insert(ctx, benchArgs{I: i, P: pad}, nil); err != nil {
				return nil, err
			}
			lat[i] = time.Since(t)
		}
	case "conc":
		rec["goroutines"] = o.g
		lat = make([]time.Duration, o.n)
		var (
			next     atomic.Int64
			wg       sync.WaitGroup
			errOnce  sync.Once
			firstErr error
		)
		for g := 0; g < o.g; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1) - 1)
					if i >= o.n {
						return
					}
					t := time.Now()
					if _, err := c.Insert(ctx, benchArgs{I: i, P: pad}, nil); err != nil {
						errOnce.Do(func() { firstErr = err })
						return
					}
					lat[i] = time.Since(t)
				}
			}()
		}
		wg.Wait()
		if firstErr != nil {
			return nil, firstErr
		}
	case "many":
		rec["goroutines"] = 1
		rec["batch"] = o.batch
		for done := 0; done < o.n; {
			k := min(o.batch, o.n-done)
			params := make([]river.InsertManyParams, k)
			for i := range params {
				params[i] = river.InsertManyParams{Args: benchArgs{I: done + i, P: pad}}
			}
			t := time.Now()
			if _, err := c.InsertMany(ctx, params); err != nil {
				return nil, err
			}
			lat = append(lat, time.Since(t))
			done += k
		}
	default:
		return nil, fmt.Errorf("unknown enqueue variant %q", o.variant)
	}
	elapsed := time.Since(start)
	cpu := cpuSeconds() - cpu0

	got, err := countState(ctx, db, "available")
	if err != nil {
		return nil, err
	}
	if got != o.n {
		return nil, fmt.Errorf("expected %d available jobs, found %d", o.n, got)
	}
	rec["seconds"] = round3(elapsed.Seconds())
	rec["tasks_per_s"] = math.Round(float64(o.n) / elapsed.Seconds())
	rec["cpu_s"] = round3(cpu)
	rec["cpu_util"] = round3(cpu / elapsed.Seconds())
	// Per call: one Insert, or one InsertMany batch.
	percentiles(rec, "", lat)
	return rec, nil
}

// ---------------------------------------------------------------- process

func runProcess(ctx context.Context, o opts) (map[string]any, error) {
	db, rec, err := setup(ctx, o)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	rec["variant"] = fmt.Sprintf("workers=%d", o.workers)
	rec["workers"] = o.workers

	var (
		count    atomic.Int64
		done     = make(chan struct{})
		doneOnce sync.Once
		target   = int64(o.n)
	)
	c, err := newClient(db, o, o.workers, func(int) {
		if count.Add(1) == target {
			doneOnce.Do(func() { close(done) })
		}
	})
	if err != nil {
		return nil, err
	}

	// Preload (not timed), then fold the WAL into the db so that every run
	// starts from the same file state.
	if err := insertManyBatches(ctx, c, o.n, o.batch); err != nil {
		return nil, fmt.Errorf("preload: %w", err)
	}
	if _, err := db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return nil, err
	}

	var capC <-chan time.Time
	if o.cap > 0 {
		t := time.NewTimer(o.cap)
		defer t.Stop()
		capC = t.C
	}
	cpu0 := cpuSeconds()
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	capped := false
	select {
	case <-done:
	case <-capC:
		capped = true
	}
	elapsed := time.Since(start)
	cpu := cpuSeconds() - cpu0
	ran := count.Load()

	stopStart := time.Now()
	stopCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.Stop(stopCtx); err != nil {
		return nil, fmt.Errorf("stop: %w", err)
	}
	stopS := time.Since(stopStart).Seconds()
	completed, err := countState(ctx, db, "completed")
	if err != nil {
		return nil, err
	}

	rec["capped"] = capped
	rec["ran"] = ran
	rec["completed_after_stop"] = completed
	rec["seconds"] = round3(elapsed.Seconds())
	rec["tasks_per_s"] = math.Round(float64(ran) / elapsed.Seconds())
	rec["stop_s"] = round3(stopS)
	rec["cpu_s"] = round3(cpu)
	rec["cpu_util"] = round3(cpu / elapsed.Seconds())
	return rec, nil
}
