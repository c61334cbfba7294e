// Command servebench measures `htq serve` over loopback HTTP: enqueue
// through the native API (single tasks on keep-alive connections, and
// batches) and URL dispatch to a fast local target. It starts everything it
// measures (a private redis-server on a free loopback port, or an embedded
// store in a temporary directory; the htq binary given by -htq; the target)
// and stops it again, and prints one JSON line per scenario run, in the
// shape of the shared peer harness (scenario, impl, run, metric, value, …).
//
//	servebench -htq ./bin/htq -backend redis -run 1
//	servebench -summarize results.jsonl
//
// Every scenario is bounded in count (-n…) and in time (-max-duration).
// Only loopback addresses are used.
//
// -backend floor measures bench/serve/floor (the net/http floor, -floor)
// in place of htq serve, with no storage, by the same request-cpu code:
//
//	servebench -floor ./bin/floor -backend floor -scenario request-cpu
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	htqBin, floorBin, backend, redisBin, scenarios, label string
	run                                                   int
	nSingle, conns                                        int
	nRequestCPU                                           int
	nBatch, batch, batchConns                             int
	nDispatch, dispatchConc                               int
	nTiming                                               int
	timingSpread                                          time.Duration
	payload                                               int
	maxDuration                                           time.Duration
	serveLog                                              string
	client                                                string
	// scale-out scenario
	redisCLI, topology, procs, queues string
	nScaleout                         int
	// out receives the JSON lines (standard output by default).
	out io.Writer
}

func main() {
	c := config{out: os.Stdout}
	var summarize string
	flag.StringVar(&c.htqBin, "htq", "", "path of the htq binary to measure (required unless -backend floor)")
	flag.StringVar(&c.floorBin, "floor", "", "path of bench/serve/floor's binary, measured in place of htq serve by -backend floor")
	flag.StringVar(&c.backend, "backend", "redis", "storage: redis (a private redis-server), file (embedded, temp dir), or floor (no storage: the -floor binary in place of htq serve; request-cpu only)")
	flag.StringVar(&c.redisBin, "redis-server", "redis-server", "redis-server binary")
	flag.StringVar(&c.scenarios, "scenario", "enqueue,batch,dispatch,timing", "comma list of scenarios: enqueue, batch, dispatch, timing, request-cpu (htq serve's CPU per request of /v1, HTQ's addTask and a refused addTask, net/http at -conns), scaleout (not in the default: one redis-server or Cluster per invocation, see -topology)")
	flag.StringVar(&c.label, "label", "", "label copied into every JSON line")
	flag.IntVar(&c.run, "run", 1, "run number copied into every JSON line")
	flag.IntVar(&c.nSingle, "n-enqueue", 100000, "single-task enqueues to time (after 2,000 of warm-up)")
	flag.IntVar(&c.nRequestCPU, "n-request-cpu", 20000, "request-cpu: requests of each kind to time (after 2,000 of warm-up)")
	flag.IntVar(&c.conns, "conns", 32, "keep-alive connections of the single-enqueue scenario")
	flag.IntVar(&c.nBatch, "n-batch", 300000, "tasks to enqueue in the batch scenario")
	flag.IntVar(&c.batch, "batch", 1000, "tasks per batch request")
	flag.IntVar(&c.batchConns, "batch-conns", 4, "connections of the batch scenario")
	flag.IntVar(&c.nDispatch, "n-dispatch", 30000, "URL tasks of the dispatch scenario")
	flag.IntVar(&c.dispatchConc, "dispatch-concurrency", 100, "htq serve --concurrency in the dispatch scenario")
	flag.IntVar(&c.nTiming, "n-timing", 2000, "URL tasks of the timing scenario, due over -timing-spread")
	flag.DurationVar(&c.timingSpread, "timing-spread", 5*time.Second, "span of the due times in the timing scenario")
	flag.IntVar(&c.payload, "payload", 100, "bytes of payload per task")
	flag.DurationVar(&c.maxDuration, "max-duration", 90*time.Second, "bound of each scenario's timed part")
	flag.StringVar(&c.serveLog, "serve-log", "", "file for htq serve's standard error (default: discarded)")
	flag.StringVar(&c.client, "client", "raw", "HTTP client of the enqueue scenarios: raw (a minimal HTTP/1.1 keep-alive client, less CPU) or nethttp (net/http)")
	flag.StringVar(&c.redisCLI, "redis-cli", "redis-cli", "redis-cli binary (scaleout: cluster creation, INFO)")
	flag.StringVar(&c.topology, "topology", "single", "scaleout: single (one redis-server) or cluster (three primaries)")
	flag.StringVar(&c.procs, "procs", "1,2,4", "scaleout: comma list of htq serve process counts")
	flag.StringVar(&c.queues, "queues", "1,6", "scaleout: comma list of queue counts")
	flag.IntVar(&c.nScaleout, "n-scaleout", 50000, "scaleout: single-task enqueues to time per run (after 2,000 of warm-up)")
	flag.StringVar(&summarize, "summarize", "", "print the medians of a JSON-lines file as a Markdown table and exit")
	flag.Parse()
	if summarize != "" {
		if err := printSummary(summarize, os.Stdout); err != nil {
			fatal("%v", err)
		}
		if err := printScaleoutSummary(summarize, os.Stdout); err != nil {
			fatal("%v", err)
		}
		return
	}
	if err := c.validate(); err != nil {
		fatal("%v", err)
	}
	for _, s := range strings.Split(c.scenarios, ",") {
		var err error
		switch strings.TrimSpace(s) {
		case "enqueue":
			err = withService(c, 0, func(sv *service) error { return scenarioEnqueue(c, sv) })
		case "batch":
			err = withService(c, 0, func(sv *service) error { return scenarioBatch(c, sv) })
		case "dispatch":
			err = withService(c, c.dispatchConc, func(sv *service) error { return scenarioDispatch(c, sv) })
		case "timing":
			err = withService(c, 0, func(sv *service) error { return scenarioTiming(c, sv) })
		case "request-cpu":
			err = withService(c, 0, func(sv *service) error { return scenarioRequestCPU(c, sv) })
		case "scaleout":
			err = scenarioScaleout(c)
		default:
			err = fmt.Errorf("unknown scenario %q", s)
		}
		if err != nil {
			fatal("%s: %v", s, err)
		}
	}
}

// validate checks the flags that main cannot default.
func (c config) validate() error {
	switch c.backend {
	case "redis", "file":
		if c.htqBin == "" {
			return errors.New("-htq is required (build it with: go build -o bench/serve/bin/htq ./cmd/htq)")
		}
	case "floor":
		if c.floorBin == "" {
			return errors.New("-backend floor needs -floor (build it with: cd bench/serve && go build -o bin/floor ./floor)")
		}
		if strings.TrimSpace(c.scenarios) != "request-cpu" {
			return fmt.Errorf("-backend floor measures -scenario request-cpu only, not %q", c.scenarios)
		}
	default:
		return fmt.Errorf("-backend %q: want redis, file or floor", c.backend)
	}
	if c.client != "raw" && c.client != "nethttp" {
		return fmt.Errorf("-client %q: want raw or nethttp", c.client)
	}
	return nil
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "servebench: "+format+"\n", a...)
	os.Exit(1)
}

// emit prints one JSON line to c.out (impl floor for -backend floor,
// htq-serve otherwise).
func emit(c config, scenario string, fields map[string]any) {
	impl := "htq-serve"
	if c.backend == "floor" {
		impl = "floor"
	}
	rec := map[string]any{
		"scenario": scenario, "impl": impl, "backend": c.backend,
		"label": c.label, "run": c.run,
		"go_version": runtime.Version(), "gomaxprocs": runtime.GOMAXPROCS(0), "cpus": runtime.NumCPU(),
		"time": time.Now().UTC().Format(time.RFC3339), "loadavg": loadavg(),
	}
	for k, v := range fields {
		rec[k] = v
	}
	b, err := json.Marshal(rec)
	if err != nil {
		fatal("json: %v", err)
	}
	if _, err := c.out.Write(append(b, '\n')); err != nil {
		fatal("write: %v", err)
	}
}

const token = "servebench-token-0123456789"

// The credentials of HTQ's /api endpoints (request-cpu's addTask).
const (
	htqAppKey   = "servebench-app"
	htqAppToken = "servebench-app-token-0123456789"
)

// service is a running htq serve with its storage.
type service struct {
	addr    string // host:port
	base    string
	hc      *http.Client
	stop    func()
	backend string
	// pids are the processes whose CPU time cpu() sums: htq serve and,
	// on Redis, redis-server.
	servePID, redisPID int
}

// cpuTime is the user+system CPU time of the process pid so far
// (/proc/pid/stat, in clock ticks of 10 ms); 0 when pid is 0 or gone.
func cpuTime(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// cpuMark remembers the CPU time of htq serve and redis-server; its
// perTask method turns the CPU spent since into µs per unit of work.
type cpuMark struct {
	sv           *service
	serve, redis time.Duration
}

func (sv *service) mark() cpuMark {
	return cpuMark{sv: sv, serve: cpuTime(sv.servePID), redis: cpuTime(sv.redisPID)}
}

// fields are the JSON fields of the CPU spent per unit since m, n units.
func (m cpuMark) fields(n int) map[string]any {
	if n <= 0 {
		return nil
	}
	out := map[string]any{"serve_cpu_us_per_unit": round(float64((cpuTime(m.sv.servePID) - m.serve).Microseconds()) / float64(n))}
	if m.sv.redisPID != 0 {
		out["redis_cpu_us_per_unit"] = round(float64((cpuTime(m.sv.redisPID) - m.redis).Microseconds()) / float64(n))
	}
	return out
}

// with adds extra's fields to f.
func with(f map[string]any, extra map[string]any) map[string]any {
	for k, v := range extra {
		f[k] = v
	}
	return f
}

// withService starts storage and htq serve (with the given dispatch
// concurrency, 0 for the default), or for -backend floor the floor alone,
// runs fn, and stops them.
func withService(c config, concurrency int, fn func(*service) error) error {
	dir, err := os.MkdirTemp("", "servebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var stops stopper
	defer stops.run()
	var broker string
	var redisPID int
	switch c.backend {
	case "redis":
		rs, err := startRedis(c, dir, &stops)
		if err != nil {
			return err
		}
		redisPID, broker = rs.pid, "redis://"+rs.addr+"/0"
	case "file":
		broker = "file:" + filepath.Join(dir, "data")
	}
	// floor: no storage, broker stays empty
	sv, err := startServe(c, broker, concurrency, &stops)
	if err != nil {
		return err
	}
	sv.redisPID = redisPID
	return fn(sv)
}

// stopper collects the stop functions of started processes; run calls
// them in reverse order.
type stopper []func()

func (s *stopper) add(f func()) { *s = append(*s, f) }

func (s *stopper) run() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
	*s = nil
}

// redisProc is a private redis-server on a free loopback port.
type redisProc struct {
	addr string
	pid  int
}

// startRedis starts a redis-server without persistence, its files in dir,
// with the extra arguments, and waits until it listens.
func startRedis(c config, dir string, stops *stopper, extra ...string) (redisProc, error) {
	port, err := freePort()
	if err != nil {
		return redisProc{}, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning"}, extra...)
	rs := exec.Command(c.redisBin, args...)
	if err := rs.Start(); err != nil {
		return redisProc{}, fmt.Errorf("start redis-server: %w", err)
	}
	stops.add(func() { _ = rs.Process.Kill(); _ = rs.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitTCP(addr, 5*time.Second); err != nil {
		return redisProc{}, err
	}
	return redisProc{addr: addr, pid: rs.Process.Pid}, nil
}

// startServe starts htq serve on a free loopback port with the storage
// URL broker (or, for -backend floor, the floor, as cpu-ab-paired.sh starts
// it: `floor serve` with HTQ_ADDR) and waits until it is ready; stops gets
// its stop function.
func startServe(c config, broker string, concurrency int, stops *stopper) (*service, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"serve", "--addr", addr, "--storage", broker, "--token", token,
		"--allow-targets", "127.0.0.0/8", "--log-level", "warn",
		"--htq-app-key", htqAppKey, "--htq-app-token", htqAppToken}
	if concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(concurrency))
	}
	cmd := exec.Command(c.htqBin, args...)
	if c.backend == "floor" {
		cmd = exec.Command(c.floorBin, "serve")
		cmd.Env = append(os.Environ(), "HTQ_ADDR="+addr)
	}
	cmd.Stdout = io.Discard
	if c.serveLog != "" {
		f, err := os.OpenFile(c.serveLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		defer f.Close() // the child holds its own descriptor
		cmd.Stderr = f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start htq serve: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stops.add(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	sv := &service{addr: addr, base: "http://" + addr, backend: c.backend, servePID: cmd.Process.Pid, hc: &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, DisableCompression: true},
		Timeout:   60 * time.Second,
	}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("htq serve exited at start: %v (use -serve-log to see why)", err)
		default:
		}
		resp, err := sv.hc.Get(sv.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return sv, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("htq serve not ready after 20 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call sends one JSON request and checks the status.
func (sv *service) call(hc *http.Client, method, path string, body []byte, want int, out any) error {
	req, err := http.NewRequest(method, sv.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %.300s", method, path, resp.StatusCode, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func (sv *service) createQueue(name, mode string) error {
	body, _ := json.Marshal(map[string]any{"name": name, "mode": mode})
	return sv.call(sv.hc, "POST", "/v1/queues", body, http.StatusCreated, nil)
}

// queueSize reads how many of a queue's tasks are not finished yet:
// completed tasks are kept for htq serve's completed retention (24 h by
// default) and archived ones until deleted, so neither counts.
func (sv *service) queueSize(name string) (int, error) {
	var q struct {
		Stats struct {
			Size      int `json:"size"`
			Completed int `json:"completed"`
			Archived  int `json:"archived"`
		} `json:"stats"`
	}
	if err := sv.call(sv.hc, "GET", "/v1/queues/"+name, nil, http.StatusOK, &q); err != nil {
		return 0, err
	}
	return q.Stats.Size - q.Stats.Completed - q.Stats.Archived, nil
}

// typedTask is a task spec with a payload of about size bytes.
func typedTask(size, i int) map[string]any {
	pad := strings.Repeat("x", max(0, size-24))
	return map[string]any{"type": "bench", "payload": map[string]any{"i": i, "d": pad}}
}

// scenarioEnqueue: single-task enqueues from c.conns goroutines, each on
// its own keep-alive connection.
func scenarioEnqueue(c config, sv *service) error {
	const q = "bench-single"
	if err := sv.createQueue(q, "pull"); err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.conns, MaxConnsPerHost: c.conns, DisableCompression: true}, Timeout: 30 * time.Second}
	bodies := make([][]byte, 64)
	for i := range bodies {
		bodies[i], _ = json.Marshal(typedTask(c.payload, i))
	}
	rawReqs := make([][]byte, len(bodies))
	for i, b := range bodies {
		rawReqs[i] = rawRequest("POST", sv.addr, "/v1/queues/"+q+"/tasks", b)
	}
	phase := func(n int) (time.Duration, []time.Duration, error) {
		return loadPhase(c, n, func(int) string { return sv.addr }, func(_ int, rc *rawConn, i int64) error {
			if c.client != "raw" {
				return sv.call(hc, "POST", "/v1/queues/"+q+"/tasks", bodies[i%64], http.StatusCreated, nil)
			}
			status, body, err := rc.do(rawReqs[i%64])
			if err == nil && status != http.StatusCreated {
				err = fmt.Errorf("POST /v1/queues/%s/tasks: status %d: %.300s", q, status, body)
			}
			return err
		})
	}
	if _, _, err := phase(2000); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	cpu := sv.mark()
	elapsed, lat, err := phase(c.nSingle)
	if err != nil {
		return err
	}
	done := len(lat)
	p50, p99 := percentiles(lat)
	emit(c, "serve-enqueue", with(cpu.fields(done), map[string]any{
		"metric": "requests_per_s", "value": round(float64(done) / elapsed.Seconds()),
		"n": done, "conns": c.conns, "payload": c.payload, "seconds": round(elapsed.Seconds()), "client": c.client,
		"truncated": done < c.nSingle, "p50_ms": p50, "p99_ms": p99,
	}))
	return nil
}

// scenarioBatch: batches of c.batch tasks from c.batchConns connections.
func scenarioBatch(c config, sv *service) error {
	const q = "bench-batch"
	if err := sv.createQueue(q, "pull"); err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.batchConns, MaxConnsPerHost: c.batchConns, DisableCompression: true}, Timeout: 60 * time.Second}
	tasks := make([]map[string]any, c.batch)
	for i := range tasks {
		tasks[i] = typedTask(c.payload, i)
	}
	body, _ := json.Marshal(map[string]any{"tasks": tasks})
	rawReq := rawRequest("POST", sv.addr, "/v1/queues/"+q+"/tasks/batch", body)
	phase := func(calls int) (time.Duration, int, []time.Duration, error) {
		var next atomic.Int64
		var mu sync.Mutex
		var lat []time.Duration
		errs := make(chan error, c.batchConns)
		ctx, cancel := context.WithTimeout(context.Background(), c.maxDuration)
		defer cancel()
		start := time.Now()
		var wg sync.WaitGroup
		for g := 0; g < c.batchConns; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rc := newRawConn(sv.addr, 60*time.Second)
				defer rc.close()
				for ctx.Err() == nil {
					if next.Add(1) > int64(calls) {
						return
					}
					t0 := time.Now()
					var enqueued int
					if c.client == "raw" {
						status, data, err := rc.do(rawReq)
						if err == nil && status != http.StatusCreated {
							err = fmt.Errorf("POST /v1/queues/%s/tasks/batch: status %d: %.300s", q, status, data)
						}
						if err != nil {
							errs <- err
							return
						}
						n, ok := enqueuedCount(data)
						if !ok {
							errs <- fmt.Errorf("batch answer %.300s", data)
							return
						}
						enqueued = n
					} else {
						var resp struct {
							Enqueued int `json:"enqueued"`
						}
						if err := sv.call(hc, "POST", "/v1/queues/"+q+"/tasks/batch", body, http.StatusCreated, &resp); err != nil {
							errs <- err
							return
						}
						enqueued = resp.Enqueued
					}
					if enqueued != c.batch {
						errs <- fmt.Errorf("batch enqueued %d of %d", enqueued, c.batch)
						return
					}
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			return 0, 0, nil, err
		}
		return elapsed, len(lat) * c.batch, lat, nil
	}
	if _, _, _, err := phase(3); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	cpu := sv.mark()
	elapsed, n, lat, err := phase(max(1, c.nBatch/c.batch))
	if err != nil {
		return err
	}
	p50, p99 := percentiles(lat)
	emit(c, "serve-enqueue-batch", with(cpu.fields(n), map[string]any{
		"metric": "tasks_per_s", "value": round(float64(n) / elapsed.Seconds()),
		"n": n, "batch": c.batch, "conns": c.batchConns, "payload": c.payload, "seconds": round(elapsed.Seconds()), "client": c.client,
		"truncated": n < c.nBatch/c.batch*c.batch, "call_p50_ms": p50, "call_p99_ms": p99,
	}))
	return nil
}

// scenarioDispatch: n URL tasks wait in a paused queue; the queue is
// resumed and the time until the target has answered all of them (and the
// queue is empty) is measured.
func scenarioDispatch(c config, sv *service) error {
	const q = "bench-dispatch"
	var hits atomic.Int64
	allHit := make(chan time.Time, 1)
	n := int64(c.nDispatch)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	target := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok")
		if hits.Add(1) == n {
			allHit <- time.Now()
		}
	})}
	go func() { _ = target.Serve(ln) }()
	defer target.Close()
	url := "http://" + ln.Addr().String() + "/hook"

	if err := sv.createQueue(q, "timing"); err != nil {
		return err
	}
	if err := sv.call(sv.hc, "POST", "/v1/queues/"+q+"/pause", nil, http.StatusNoContent, nil); err != nil {
		return err
	}
	pad := strings.Repeat("x", max(0, c.payload-12))
	for sent := 0; sent < c.nDispatch; {
		k := min(1000, c.nDispatch-sent)
		tasks := make([]map[string]any, k)
		for i := range tasks {
			tasks[i] = map[string]any{"url": url, "body": `{"d":"` + pad + `"}`}
		}
		body, _ := json.Marshal(map[string]any{"tasks": tasks})
		if err := sv.call(sv.hc, "POST", "/v1/queues/"+q+"/tasks/batch", body, http.StatusCreated, nil); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
		sent += k
	}
	cpu := sv.mark()
	start := time.Now()
	if err := sv.call(sv.hc, "POST", "/v1/queues/"+q+"/resume", nil, http.StatusNoContent, nil); err != nil {
		return err
	}
	var last time.Time
	select {
	case last = <-allHit:
	case <-time.After(c.maxDuration):
	}
	got := hits.Load()
	elapsed := time.Since(start)
	if !last.IsZero() {
		elapsed = last.Sub(start)
	}
	// The outcomes are written after the answers: wait for the queue to
	// empty (completed tasks are deleted) and time that too.
	var drained time.Duration
	for deadline := time.Now().Add(c.maxDuration); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		size, err := sv.queueSize(q)
		if err != nil {
			return err
		}
		if size == 0 {
			drained = time.Since(start)
			break
		}
	}
	if drained == 0 {
		return fmt.Errorf("serve-dispatch: %d tasks still unfinished after %v", n, c.maxDuration)
	}
	emit(c, "serve-dispatch", with(cpu.fields(int(got)), map[string]any{
		"metric": "requests_per_s", "value": round(float64(got) / elapsed.Seconds()),
		"n": got, "concurrency": c.dispatchConc, "payload": c.payload, "seconds": round(elapsed.Seconds()),
		"truncated": got < n, "completed_per_s": round(float64(got) / drained.Seconds()), "drained_s": round(drained.Seconds()),
	}))
	return nil
}

// scenarioTiming: URL tasks due at times spread over the next few seconds
// in a timing queue; the target reads each task's due time from its body
// and records how late it arrived.
func scenarioTiming(c config, sv *service) error {
	const q = "bench-timing"
	var mu sync.Mutex
	var late []time.Duration
	allHit := make(chan struct{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	target := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(r.Body)
		due, err := strconv.ParseInt(string(body), 10, 64)
		if err != nil {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		mu.Lock()
		late = append(late, now.Sub(time.Unix(0, due)))
		if len(late) == c.nTiming {
			close(allHit)
		}
		mu.Unlock()
	})}
	go func() { _ = target.Serve(ln) }()
	defer target.Close()
	url := "http://" + ln.Addr().String() + "/due"
	if err := sv.createQueue(q, "timing"); err != nil {
		return err
	}
	start := time.Now().Add(time.Second) // time to send the batches
	tasks := make([]map[string]any, c.nTiming)
	for i := range tasks {
		due := start.Add(time.Duration(i) * c.timingSpread / time.Duration(c.nTiming))
		tasks[i] = map[string]any{"url": url, "body": strconv.FormatInt(due.UnixNano(), 10),
			"options": map[string]any{"process_at": due.UTC().Format(time.RFC3339Nano)}}
	}
	for i := 0; i < len(tasks); i += 500 {
		body, _ := json.Marshal(map[string]any{"tasks": tasks[i:min(i+500, len(tasks))]})
		if err := sv.call(sv.hc, "POST", "/v1/queues/"+q+"/tasks/batch", body, http.StatusCreated, nil); err != nil {
			return err
		}
	}
	if time.Now().After(start) {
		return errors.New("enqueueing the timed tasks took longer than 1 s; lower -n-timing")
	}
	select {
	case <-allHit:
	case <-time.After(c.timingSpread + c.maxDuration):
	}
	mu.Lock()
	got := append([]time.Duration(nil), late...)
	mu.Unlock()
	p50, p99 := percentiles(got)
	var early int
	var earliest time.Duration
	for _, d := range got {
		if d < 0 {
			early++
		}
		earliest = min(earliest, d)
	}
	emit(c, "serve-timing-lateness", map[string]any{
		"metric": "p99_ms", "value": p99, "p50_ms": p50, "n": len(got), "early": early, "earliest_ms": round(float64(earliest.Microseconds()) / 1000),
		"rate_per_s": round(float64(c.nTiming) / c.timingSpread.Seconds()), "truncated": len(got) < c.nTiming,
	})
	return nil
}

// loadavg returns the 1-minute load average, or -1.
func loadavg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	if err != nil {
		return -1
	}
	return f
}

func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) float64 {
		return round(float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000)
	}
	return at(0.50), at(0.99)
}

func round(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'f', 3, 64), 64)
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitTCP(addr string, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening after %v: %w", addr, d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// num formats a figure: whole above 100, three significant digits below.
func num(f float64) string {
	if f >= 100 || f <= -100 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	return strconv.FormatFloat(f, 'g', 3, 64)
}

// printSummary prints the median value of each scenario and backend.
func printSummary(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	type key struct{ scenario, backend, metric string }
	vals := map[key][]float64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Scenario string  `json:"scenario"`
			Backend  string  `json:"backend"`
			Metric   string  `json:"metric"`
			Value    float64 `json:"value"`
			Request  string  `json:"request"` // serve-request-cpu's kind
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if rec.Request != "" {
			rec.Scenario += " " + rec.Request
		}
		if rec.Scenario == "serve-scaleout" {
			continue // printScaleoutSummary's
		}
		k := key{rec.Scenario, rec.Backend, rec.Metric}
		vals[k] = append(vals[k], rec.Value)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if len(vals) == 0 {
		return nil // a file of scale-out lines only
	}
	keys := make([]key, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].scenario != keys[j].scenario {
			return keys[i].scenario < keys[j].scenario
		}
		return keys[i].backend < keys[j].backend
	})
	fmt.Fprintln(w, "| scenario | backend | metric | median | runs (min-max) |")
	fmt.Fprintln(w, "|---|---|---|---:|---|")
	for _, k := range keys {
		v := vals[k]
		sort.Float64s(v)
		fmt.Fprintf(w, "| %s | %s | %s | %s | %d (%s-%s) |\n", k.scenario, k.backend, k.metric, num(v[len(v)/2]), len(v), num(v[0]), num(v[len(v)-1]))
	}
	return nil
}
