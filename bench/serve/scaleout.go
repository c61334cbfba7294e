package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The scale-out scenario (-scenario scaleout) runs -procs htq serve
// processes on one private redis-server (-topology single) or on a private
// three-primary Redis Cluster (-topology cluster), started once per
// invocation. For every count of processes and of queues (-queues) it
// empties Redis, starts the processes, creates the pull queues and sends
// single typed-task enqueues spread over the queues, from c.conns
// keep-alive connections spread evenly over the processes. Per run it
// prints requests/s, the CPU per request of the htq serve processes
// (summed) and of Redis (every node), and Redis commands per request
// (INFO commandstats before and after, every node).

// harnessCmds are the commands servebench itself sends to Redis; they are
// left out of the per-request figures.
var harnessCmds = map[string]bool{"info": true, "flushall": true, "ping": true, "cluster|info": true, "cluster": true}

// scriptCmds are the commands that run a Lua script or function.
var scriptCmds = map[string]bool{"evalsha": true, "eval": true, "evalsha_ro": true, "eval_ro": true, "fcall": true, "fcall_ro": true}

// redisTopology is the running Redis of a scale-out invocation.
type redisTopology struct {
	nodes   []redisProc
	storage string // htq serve's --storage URL
}

// startTopology starts one redis-server, or three cluster-enabled ones
// joined by redis-cli --cluster create.
func startTopology(c config, dir string, stops *stopper) (redisTopology, error) {
	if c.topology == "single" {
		rs, err := startRedis(c, dir, stops)
		if err != nil {
			return redisTopology{}, err
		}
		return redisTopology{nodes: []redisProc{rs}, storage: "redis://" + rs.addr + "/0"}, nil
	}
	var t redisTopology
	var addrs []string
	for i := range 3 {
		nd := fmt.Sprintf("%s/node%d", dir, i)
		if err := os.Mkdir(nd, 0o755); err != nil {
			return t, err
		}
		rs, err := startRedis(c, nd, stops, "--cluster-enabled", "yes", "--cluster-config-file", nd+"/nodes.conf")
		if err != nil {
			return t, err
		}
		t.nodes = append(t.nodes, rs)
		addrs = append(addrs, rs.addr)
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(c.redisCLI, args...).CombinedOutput(); err != nil {
		return t, fmt.Errorf("redis-cli --cluster create: %w: %.500s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, nd := range t.nodes {
		for {
			m, err := redisInfo(c, nd.addr, "cluster", "info")
			if err == nil && m["cluster_state"] == "ok" {
				break
			}
			if time.Now().After(deadline) {
				return t, fmt.Errorf("cluster node %s not ok after 20 s: %v", nd.addr, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.storage = "redis-cluster://" + strings.Join(addrs, ",")
	return t, nil
}

// redisCmd runs one command on the node at addr through redis-cli and
// returns its output.
func redisCmd(c config, addr string, args ...string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	out, err := exec.Command(c.redisCLI, append([]string{"-h", host, "-p", port}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("redis-cli %s on %s: %w", strings.Join(args, " "), addr, err)
	}
	return string(out), nil
}

// redisInfo runs a command answering "key:value" lines (INFO, CLUSTER
// INFO) and returns them as a map.
func redisInfo(c config, addr string, args ...string) (map[string]string, error) {
	out, err := redisCmd(c, addr, args...)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":"); ok && !strings.HasPrefix(k, "#") {
			m[k] = v
		}
	}
	return m, sc.Err()
}

// commandCalls sums INFO commandstats' calls by command name over the
// nodes. Redis 7 counts the commands a Lua script runs too, so a script
// appears as EVALSHA and as the commands it ran.
func commandCalls(c config, nodes []redisProc) (map[string]int64, error) {
	sum := map[string]int64{}
	for _, nd := range nodes {
		m, err := redisInfo(c, nd.addr, "INFO", "commandstats")
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			name, ok := strings.CutPrefix(k, "cmdstat_")
			if !ok {
				continue
			}
			for _, kv := range strings.Split(v, ",") {
				if f, val, _ := strings.Cut(kv, "="); f == "calls" {
					n, err := strconv.ParseInt(val, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("commandstats %s=%s on %s: %w", k, v, nd.addr, err)
					}
					sum[name] += n
				}
			}
		}
	}
	return sum, nil
}

// scenarioScaleout runs every count of processes and of queues once.
func scenarioScaleout(c config) error {
	procs, err := intList(c.procs)
	if err != nil {
		return fmt.Errorf("-procs: %w", err)
	}
	queues, err := intList(c.queues)
	if err != nil {
		return fmt.Errorf("-queues: %w", err)
	}
	if c.topology != "single" && c.topology != "cluster" {
		return fmt.Errorf("-topology %q: want single or cluster", c.topology)
	}
	dir, err := os.MkdirTemp("", "servebench-scaleout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var stops stopper
	defer stops.run()
	topo, err := startTopology(c, dir, &stops)
	if err != nil {
		return err
	}
	for _, q := range queues {
		for _, p := range procs {
			if err := scaleoutRun(c, topo, p, q); err != nil {
				return fmt.Errorf("%d processes, %d queues: %w", p, q, err)
			}
		}
	}
	return nil
}

// scaleoutRun measures procs htq serve processes on nQueues queues.
func scaleoutRun(c config, topo redisTopology, procs, nQueues int) error {
	for _, nd := range topo.nodes {
		if _, err := redisCmd(c, nd.addr, "FLUSHALL"); err != nil {
			return err
		}
	}
	var stops stopper
	defer stops.run()
	svs := make([]*service, procs)
	for i := range svs {
		sv, err := startServe(c, topo.storage, 0, &stops)
		if err != nil {
			return err
		}
		svs[i] = sv
	}
	names := make([]string, nQueues)
	for i := range names {
		names[i] = "bench" + strconv.Itoa(i)
		if err := svs[0].createQueue(names[i], "pull"); err != nil {
			return err
		}
	}
	// reqs[p][q][b]: process p, queue q, body b, built once.
	const bodies = 16
	reqs := make([][][][]byte, procs)
	for p, sv := range svs {
		reqs[p] = make([][][]byte, nQueues)
		for q, name := range names {
			for b := range bodies {
				body, _ := json.Marshal(typedTask(c.payload, b))
				reqs[p][q] = append(reqs[p][q], rawRequest("POST", sv.addr, "/v1/queues/"+name+"/tasks", body))
			}
		}
	}
	addrOf := func(g int) string { return svs[g%procs].addr }
	send := func(g int, rc *rawConn, i int64) error {
		q := int(i % int64(nQueues))
		status, body, err := rc.do(reqs[g%procs][q][(i/int64(nQueues))%bodies])
		if err == nil && status != http.StatusCreated {
			err = fmt.Errorf("POST /v1/queues/%s/tasks: status %d: %.300s", names[q], status, body)
		}
		return err
	}
	const warm = 2000
	if _, _, err := loadPhase(c, warm, addrOf, send); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	cmdsBefore, err := commandCalls(c, topo.nodes)
	if err != nil {
		return err
	}
	serveCPU0, redisCPU0 := cpuSum(svs), redisCPU(topo.nodes)
	elapsed, lat, err := loadPhase(c, c.nScaleout, addrOf, send)
	if err != nil {
		return err
	}
	serveCPU, redisCPUd := cpuSum(svs)-serveCPU0, redisCPU(topo.nodes)-redisCPU0
	cmdsAfter, err := commandCalls(c, topo.nodes)
	if err != nil {
		return err
	}
	done := len(lat)
	if done == 0 {
		return errors.New("no request answered")
	}
	var sent int
	for _, name := range names {
		size, err := svs[0].queueSize(name)
		if err != nil {
			return err
		}
		sent += size
	}
	if sent != warm+done {
		return fmt.Errorf("queues hold %d tasks after %d enqueues", sent, warm+done)
	}
	byName := map[string]float64{}
	var calls, scripts int64
	for name, after := range cmdsAfter {
		d := after - cmdsBefore[name]
		if harnessCmds[name] || d == 0 {
			continue
		}
		calls += d
		if scriptCmds[name] {
			scripts += d
		}
		if per := float64(d) / float64(done); per >= 0.0005 {
			byName[name] = round(per)
		}
	}
	p50, p99 := percentiles(lat)
	backend := "redis"
	if c.topology == "cluster" {
		backend = "redis-cluster"
	}
	c.backend = backend
	emit(c, "serve-scaleout", map[string]any{
		"metric": "requests_per_s", "value": round(float64(done) / elapsed.Seconds()),
		"topology": c.topology, "procs": procs, "queues": nQueues, "redis_nodes": len(topo.nodes),
		"n": done, "conns": c.conns, "payload": c.payload, "seconds": round(elapsed.Seconds()), "client": "raw",
		"truncated": done < c.nScaleout, "p50_ms": p50, "p99_ms": p99,
		"serve_cpu_us_per_unit":        round(float64(serveCPU.Microseconds()) / float64(done)),
		"redis_cpu_us_per_unit":        round(float64(redisCPUd.Microseconds()) / float64(done)),
		"redis_calls_per_unit":         round(float64(calls) / float64(done)),
		"redis_scripts_per_unit":       round(float64(scripts) / float64(done)),
		"redis_calls_per_unit_by_name": byName,
	})
	return nil
}

// cpuSum is the CPU time of the htq serve processes so far.
func cpuSum(svs []*service) time.Duration {
	var d time.Duration
	for _, sv := range svs {
		d += cpuTime(sv.servePID)
	}
	return d
}

// redisCPU is the CPU time of the Redis nodes so far.
func redisCPU(nodes []redisProc) time.Duration {
	var d time.Duration
	for _, nd := range nodes {
		d += cpuTime(nd.pid)
	}
	return d
}

// intList parses a comma list of positive integers.
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want a comma list of positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// printScaleoutSummary prints the medians of the serve-scaleout lines of
// path as a Markdown table; it prints nothing when there are none.
func printScaleoutSummary(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	type key struct {
		topology      string
		queues, procs int
	}
	type rec struct {
		Scenario string  `json:"scenario"`
		Topology string  `json:"topology"`
		Queues   int     `json:"queues"`
		Procs    int     `json:"procs"`
		Value    float64 `json:"value"`
		Serve    float64 `json:"serve_cpu_us_per_unit"`
		Redis    float64 `json:"redis_cpu_us_per_unit"`
		Calls    float64 `json:"redis_calls_per_unit"`
		Scripts  float64 `json:"redis_scripts_per_unit"`
	}
	rows := map[key][]rec{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if r.Scenario == "serve-scaleout" {
			k := key{r.Topology, r.Queues, r.Procs}
			rows[k] = append(rows[k], r)
		}
	}
	if err := sc.Err(); err != nil || len(rows) == 0 {
		return err
	}
	keys := make([]key, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.topology != b.topology {
			return a.topology > b.topology // single first
		}
		if a.queues != b.queues {
			return a.queues < b.queues
		}
		return a.procs < b.procs
	})
	med := func(rs []rec, f func(rec) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		sort.Float64s(v)
		return v[len(v)/2]
	}
	fmt.Fprintln(w, "| Redis | queues | htq serve processes | requests/s | htq serve CPU µs/request | Redis CPU µs/request | Redis calls/request | scripts/request | runs |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		rs := rows[k]
		fmt.Fprintf(w, "| %s | %d | %d | %s | %.1f | %.1f | %.2f | %.3f | %d |\n", k.topology, k.queues, k.procs,
			num(med(rs, func(r rec) float64 { return r.Value })),
			med(rs, func(r rec) float64 { return r.Serve }), med(rs, func(r rec) float64 { return r.Redis }),
			med(rs, func(r rec) float64 { return r.Calls }), med(rs, func(r rec) float64 { return r.Scripts }), len(rs))
	}
	return nil
}
