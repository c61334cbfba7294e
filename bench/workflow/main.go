// Command wfbench measures htq workflows end to end, through the public
// API and an htq.Server, on Redis and on the embedded store, and prints
// one JSON line per run in the shape of the peer harness (bench/peer):
// scenario, impl, label, run, go_version, gomaxprocs, time, then the
// figures.
//
//	go run . -storage redis://127.0.0.1:6393/0 -scenario chain -n 1000
//	go run . -storage file: -scenario fanin -n 10000
//
// Scenarios (each a workflow in one queue, run by one Server of -conc
// workers with a handler that does nothing):
//
//	chain  a1 → a2 → … → an: n-1 edges, every task waits for the one before
//	fanin  n tasks without dependencies → one sink: n edges
//
// Each run of a scenario is followed by its baseline on the same Server:
// for the chain, the same chain made by hand (each handler enqueues the
// next task, as one does without workflows); for the fan-in, as many plain
// tasks enqueued in batches of 1,000 (no dependency is tracked at all), so
// that the storage work of the dependencies shows as the difference. The
// end of a run is the completion of its last task (kept with a retention,
// and polled with GetTaskInfo once its handler has run).
// A line reports the total time from the start of EnqueueWorkflow to the
// workflow's success (wall_s), the enqueue alone (enqueue_s), and the
// storage work per edge: on Redis every command Redis ran, scripts' inner
// commands included (INFO commandstats), and Redis's CPU; on the embedded
// store the committer's transactions (group commits) and the bytes the
// process wrote to disk (/proc/self/io write_bytes).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/embedded"
	"github.com/htqueue/htq/internal/storage"
)

type config struct {
	storage  string
	scenario string
	n        int
	conc     int
	run      int
	label    string
}

func main() {
	var c config
	flag.StringVar(&c.storage, "storage", "file:", "redis://host:port/db, or file: for a fresh temporary directory")
	flag.StringVar(&c.scenario, "scenario", "chain", "chain|fanin")
	flag.IntVar(&c.n, "n", 0, "tasks of the chain (default 1000) or of the fan-in's first level (default 10000)")
	flag.IntVar(&c.conc, "conc", 10, "Server concurrency")
	flag.IntVar(&c.run, "run", 1, "repetition number copied into every line")
	flag.StringVar(&c.label, "label", "", "free text copied into every line")
	flag.Parse()
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "wfbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	url := c.storage
	if url == "file:" {
		dir, err := os.MkdirTemp("", "wfbench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		url = "file:" + dir
	}
	st, err := htq.OpenWithOptions(ctx, url, htq.OpenOptions{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		return err
	}
	defer st.Close()
	m, err := newMeter(ctx, url, st)
	if err != nil {
		return err
	}
	defer m.close()

	ins := htq.NewInspector(st)
	client := htq.NewClient(st)
	var done atomic.Int64
	sinkDone := make(chan struct{}, 1)
	var sink atomic.Value // task ID whose end ends the run
	handChain := 0        // length of the hand-made chain
	h := htq.HandlerFunc(func(ctx context.Context, t *htq.Task) error {
		id, _ := htq.GetTaskID(ctx)
		if t.Type() == "hand" {
			// The hand-made chain: enqueue the next task.
			i, _ := strconv.Atoi(string(t.Payload()))
			if i+1 < handChain {
				opts := []htq.Option{htq.Queue("wf"), htq.TaskID(fmt.Sprintf("%s-%d", strings.TrimSuffix(id, "-"+string(t.Payload())), i+1))}
				if i+2 == handChain {
					opts = append(opts, htq.Retention(time.Hour))
				}
				if _, err := client.EnqueueContext(ctx, htq.NewTask("hand", []byte(strconv.Itoa(i+1))), opts...); err != nil {
					return err
				}
			}
		}
		if s, _ := sink.Load().(string); s == id {
			sinkDone <- struct{}{}
		}
		done.Add(1)
		return nil
	})
	srv := htq.NewServer(st, htq.Config{Concurrency: c.conc, Queues: map[string]int{"wf": 1}, ShutdownTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := srv.Start(h); err != nil {
		return err
	}
	defer srv.Shutdown()

	var wf *htq.Workflow
	var tasks, edges int
	var last string
	id := fmt.Sprintf("%s-%d-%d", c.scenario, c.run, time.Now().UnixNano())
	switch c.scenario {
	case "chain":
		tasks = def(c.n, 1000)
		edges = tasks - 1
		wf = htq.NewWorkflow(htq.WorkflowID(id))
		for i := range tasks {
			opts := []htq.Option{htq.Queue("wf")}
			if i > 0 {
				opts = append(opts, htq.DependsOn(fmt.Sprint("t", i-1)))
			}
			if i == tasks-1 {
				opts = append(opts, htq.Retention(time.Hour))
			}
			wf.Add(fmt.Sprint("t", i), htq.NewTask("step", nil), opts...)
		}
		last = fmt.Sprint("t", tasks-1)
	case "fanin":
		width := def(c.n, 10000)
		tasks, edges = width+1, width
		wf = htq.NewWorkflow(htq.WorkflowID(id))
		deps := make([]string, width)
		for i := range width {
			deps[i] = fmt.Sprint("t", i)
			wf.Add(deps[i], htq.NewTask("step", nil), htq.Queue("wf"))
		}
		wf.Add("sink", htq.NewTask("sink", nil), htq.Queue("wf"), htq.DependsOn(deps...), htq.Retention(time.Hour))
		last = "sink"
	default:
		return fmt.Errorf("unknown scenario %q", c.scenario)
	}
	sink.Store(id + "." + last)

	if err := m.start(ctx); err != nil {
		return err
	}
	start := time.Now()
	if _, err := client.EnqueueWorkflow(ctx, wf); err != nil {
		return err
	}
	enq := time.Since(start)
	if err := waitCompleted(ins, sinkDone, id+"."+last, &done); err != nil {
		return err
	}
	wall := time.Since(start)
	f, err := m.end(ctx, edges)
	if err != nil {
		return err
	}
	if wi, err := ins.GetWorkflow(id); err != nil || wi.State != htq.WorkflowSucceeded {
		return fmt.Errorf("workflow %s after its last task: %v %v", id, wi, err)
	}
	f["tasks"], f["edges"], f["conc"] = tasks, edges, c.conc
	f["wall_s"] = round(wall.Seconds(), 4)
	f["enqueue_s"] = round(enq.Seconds(), 4)
	f["tasks_per_s"] = round(float64(tasks)/wall.Seconds(), 1)
	emit(c, "wf-"+c.scenario, m.kind, f)

	// The baseline.
	if err := m.start(ctx); err != nil {
		return err
	}
	start = time.Now()
	var lastID string
	if c.scenario == "chain" {
		handChain = tasks
		prefix := "hand-" + id
		lastID = fmt.Sprintf("%s-%d", prefix, tasks-1)
		sink.Store(lastID)
		if _, err := client.EnqueueContext(ctx, htq.NewTask("hand", []byte("0")), htq.Queue("wf"), htq.TaskID(prefix+"-0")); err != nil {
			return err
		}
	} else {
		for i := 0; i < tasks; i += 1000 {
			batch := make([]*htq.Task, 0, 1000)
			for j := i; j < min(i+1000, tasks); j++ {
				opts := []htq.Option{htq.TaskID(fmt.Sprintf("plain-%s-%d", id, j))}
				if j == tasks-1 {
					opts = append(opts, htq.Retention(time.Hour))
				}
				batch = append(batch, htq.NewTask("plain", nil, opts...))
			}
			if _, err := client.EnqueueBatch(ctx, batch, htq.Queue("wf")); err != nil {
				return err
			}
		}
		lastID = fmt.Sprintf("plain-%s-%d", id, tasks-1)
		sink.Store(lastID)
	}
	enq = time.Since(start)
	if err := waitCompleted(ins, sinkDone, lastID, &done); err != nil {
		return err
	}
	wall = time.Since(start)
	f, err = m.end(ctx, edges)
	if err != nil {
		return err
	}
	f["tasks"], f["edges"], f["conc"] = tasks, edges, c.conc
	f["wall_s"] = round(wall.Seconds(), 4)
	f["enqueue_s"] = round(enq.Seconds(), 4)
	f["tasks_per_s"] = round(float64(tasks)/wall.Seconds(), 1)
	emit(c, "wf-"+c.scenario+"-baseline", m.kind, f)
	return nil
}

// waitCompleted waits for the handler of task id to have run (sinkDone),
// then for its completion to be stored.
func waitCompleted(ins *htq.Inspector, sinkDone <-chan struct{}, id string, done *atomic.Int64) error {
	select {
	case <-sinkDone:
	case <-time.After(10 * time.Minute):
		return fmt.Errorf("task %s did not run within 10 min (%d tasks done)", id, done.Load())
	}
	for {
		ti, err := ins.GetTaskInfo("wf", id)
		if err != nil {
			return err
		}
		if ti.State == htq.TaskStateCompleted {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
}

// meter reads the storage's work over a window.
type meter struct {
	kind string // "redis" or "embedded"
	rc   rueidis.Client
	eb   *embedded.Broker

	redisCPU float64
	commits  int64
	written  int64
}

func newMeter(ctx context.Context, url string, st *htq.Storage) (*meter, error) {
	if strings.HasPrefix(url, "file:") {
		eb, ok := storage.BrokerOf(st).(*embedded.Broker)
		if !ok {
			return nil, fmt.Errorf("%s is not the embedded store", url)
		}
		return &meter{kind: "embedded", eb: eb}, nil
	}
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	rc, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	return &meter{kind: "redis", rc: rc}, nil
}

func (m *meter) close() {
	if m.rc != nil {
		m.rc.Close()
	}
}

func (m *meter) start(ctx context.Context) error {
	if m.eb != nil {
		m.commits, _ = m.eb.CommitStats()
		m.written = writeBytes()
		return nil
	}
	if err := m.rc.Do(ctx, m.rc.B().ConfigResetstat().Build()).Error(); err != nil {
		return err
	}
	info, err := m.info(ctx, "cpu")
	if err != nil {
		return err
	}
	m.redisCPU = cpu(info)
	return nil
}

// end returns the work since start, per edge.
func (m *meter) end(ctx context.Context, edges int) (map[string]any, error) {
	if m.eb != nil {
		commits, _ := m.eb.CommitStats()
		written := writeBytes() - m.written
		return map[string]any{
			"commits": commits - m.commits, "commits_per_edge": round(float64(commits-m.commits)/float64(edges), 3),
			"bytes_written": written, "bytes_written_per_edge": round(float64(written)/float64(edges), 1),
		}, nil
	}
	info, err := m.info(ctx, "cpu", "commandstats")
	if err != nil {
		return nil, err
	}
	cmds := map[string]float64{}
	var calls int64
	for k, v := range info {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok || name == "info" || name == "config|resetstat" {
			continue
		}
		for _, kv := range strings.Split(v, ",") {
			if f, val, _ := strings.Cut(kv, "="); f == "calls" {
				n, _ := strconv.ParseInt(val, 10, 64)
				calls += n
				cmds[name] = round(float64(n)/float64(edges), 3)
			}
		}
	}
	used := cpu(info) - m.redisCPU
	return map[string]any{
		"redis_calls": calls, "redis_calls_per_edge": round(float64(calls)/float64(edges), 3),
		"redis_cmds_per_edge": cmds, "redis_cpu_s": round(used, 3),
		"redis_cpu_us_per_edge": round(used*1e6/float64(edges), 2),
	}, nil
}

func (m *meter) info(ctx context.Context, sections ...string) (map[string]string, error) {
	s, err := m.rc.Do(ctx, m.rc.B().Info().Section(sections...).Build()).ToString()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok {
			out[k] = v
		}
	}
	return out, sc.Err()
}

func cpu(info map[string]string) float64 {
	u, _ := strconv.ParseFloat(info["used_cpu_user"], 64)
	s, _ := strconv.ParseFloat(info["used_cpu_sys"], 64)
	return u + s
}

// writeBytes is this process's write_bytes of /proc/self/io: the bytes it
// caused to be written to storage (0 where there is no /proc).
func writeBytes() int64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func emit(c config, scenario, backend string, f map[string]any) {
	rec := map[string]any{
		"scenario": scenario, "impl": "htq", "impl_version": "workspace", "label": strings.TrimPrefix(c.label+" "+backend, " "),
		"run": c.run, "go_version": runtime.Version(), "gomaxprocs": runtime.GOMAXPROCS(0),
		"time": time.Now().UTC().Format(time.RFC3339),
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

func round(x float64, places int) float64 {
	p := 1.0
	for range places {
		p *= 10
	}
	return float64(int64(x*p+0.5)) / p
}
