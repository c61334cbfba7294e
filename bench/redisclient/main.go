// Command redisclient measures the two Redis clients htq could be built on,
// github.com/redis/rueidis and github.com/redis/go-redis/v9, against a private
// redis-server that it starts on a loopback port and stops by its PID.
//
// Workload: EVALSHA of a small script (HSET + RPUSH + LPOP, a 100-byte
// argument) from 1, 16 and 64 goroutines, each client in each of the ways an
// application would call it; plus a dedicated pub/sub subscription in each
// client (publish-to-receive latency, and how many messages per second the
// subscriber takes in). Every measurement runs for -dur after a warm-up, and
// records operations, this process's CPU (getrusage) and Redis's CPU over the
// window. Modes are interleaved within each run, so drift on a shared machine
// spreads over all of them; the summary reports medians of the runs and the
// median of per-run ratios.
//
//	go run . -runs 3                  # the ADR's figures (about 2 minutes)
//	go run . -runs 1 -dur 500ms       # smoke run
//
// JSON lines go to -out; the Markdown summary goes to stdout.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

type options struct {
	port      int
	runs      int
	dur       time.Duration
	warmup    time.Duration
	concs     []int
	modes     []string
	pubsubN   int
	pubsubTpN int
	out       string
}

func main() {
	var o options
	var concs, modes string
	flag.IntVar(&o.port, "port", 6393, "loopback port for the private redis-server (must be free)")
	flag.IntVar(&o.runs, "runs", 3, "repetitions of every measurement")
	flag.DurationVar(&o.dur, "dur", 2*time.Second, "timed window of each EVALSHA measurement")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "untimed warm-up before each window")
	flag.StringVar(&concs, "conc", "1,16,64", "goroutine counts")
	flag.StringVar(&modes, "modes", strings.Join(modeNames(), ","), "client modes to measure")
	flag.IntVar(&o.pubsubN, "pubsub-n", 5000, "pub/sub latency: messages sent one at a time")
	flag.IntVar(&o.pubsubTpN, "pubsub-tp-n", 200000, "pub/sub throughput: messages published as fast as a pipelined publisher can")
	flag.StringVar(&o.out, "out", "results-latest.jsonl", "JSON lines output file (the ADR's run is in results/)")
	flag.Parse()
	for _, s := range strings.Split(concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fatal("bad -conc %q", s)
		}
		o.concs = append(o.concs, n)
	}
	for _, m := range strings.Split(modes, ",") {
		m = strings.TrimSpace(m)
		if _, ok := modeByName(m); !ok {
			fatal("unknown mode %q (have %v)", m, modeNames())
		}
		o.modes = append(o.modes, m)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, err := startRedis(o.port)
	if err != nil {
		fatal("%v", err)
	}
	err = run(ctx, o, srv.addr)
	srv.stop()
	if err != nil {
		fatal("%v", err)
	}
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "redisclient: "+format+"\n", a...)
	os.Exit(1)
}

func run(ctx context.Context, o options, addr string) error {
	f, err := os.Create(o.out)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	ad := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2})
	defer ad.Close()

	var recs []record
	emit := func(r record) error {
		r.GoVersion, r.GOMAXPROCS = runtime.Version(), runtime.GOMAXPROCS(0)
		recs = append(recs, r)
		return enc.Encode(r)
	}
	for run := 1; run <= o.runs; run++ {
		for _, conc := range o.concs {
			// Rotate the order of modes from run to run.
			for i := range o.modes {
				name := o.modes[(i+run-1)%len(o.modes)]
				if err := ctx.Err(); err != nil {
					return err
				}
				m, _ := modeByName(name)
				r, err := measureEval(ctx, ad, addr, m, conc, o)
				if err != nil {
					return fmt.Errorf("%s conc %d: %w", name, conc, err)
				}
				r.Run = run
				fmt.Fprintf(os.Stderr, "run %d %-22s conc %-3d %9.0f ops/s  client %5.1f us/op  redis %5.1f us/op\n",
					run, name, conc, r.OpsPerS, r.ClientCPUus, r.RedisCPUus)
				if err := emit(r); err != nil {
					return err
				}
			}
		}
		for i, name := range subscriberNames() {
			name = subscriberNames()[(i+run-1)%len(subscriberNames())]
			if err := ctx.Err(); err != nil {
				return err
			}
			rs, err := measurePubSub(ctx, ad, addr, name, o)
			if err != nil {
				return fmt.Errorf("pubsub %s: %w", name, err)
			}
			for _, r := range rs {
				r.Run = run
				fmt.Fprintf(os.Stderr, "run %d %-22s %-10s p50 %.3f ms p99 %.3f ms  %9.0f msg/s\n",
					run, name, r.Scenario, r.P50ms, r.P99ms, r.OpsPerS)
				if err := emit(r); err != nil {
					return err
				}
			}
		}
	}
	printSummary(os.Stdout, recs, o)
	return nil
}

// record is one JSON line.
type record struct {
	Scenario    string  `json:"scenario"` // evalsha | pubsub-latency | pubsub-throughput
	Mode        string  `json:"mode"`
	Conc        int     `json:"conc,omitempty"`
	Run         int     `json:"run"`
	Ops         int64   `json:"ops"`
	WallS       float64 `json:"wall_s"`
	OpsPerS     float64 `json:"ops_per_s"`
	ClientCPUus float64 `json:"client_cpu_us_per_op"`
	RedisCPUus  float64 `json:"redis_cpu_us_per_op"`
	RedisCalls  float64 `json:"redis_evalsha_per_op,omitempty"`
	P50ms       float64 `json:"p50_ms,omitempty"`
	P99ms       float64 `json:"p99_ms,omitempty"`
	GoVersion   string  `json:"go_version"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
}

// --- the private redis-server ----------------------------------------------

type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
}

func startRedis(port int) (*redisServer, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("something already listens on %s; choose another -port", addr)
	}
	dir, err := os.MkdirTemp("", "htq-redisclient-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &redisServer{addr: addr, cmd: cmd, dir: dir}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for i := 0; i < 100; i++ {
		if c.Ping(context.Background()).Err() == nil {
			fmt.Fprintf(os.Stderr, "redis-server pid %d on %s\n", cmd.Process.Pid, addr)
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("redis-server on %s did not answer PING", addr)
}

func (s *redisServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	os.RemoveAll(s.dir)
}

// --- CPU bookkeeping --------------------------------------------------------

type cpuSnap struct {
	self, redis float64 // seconds, user + sys
	at          time.Time
	evalsha     int64
}

func snap(ctx context.Context, ad *redis.Client) (cpuSnap, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuSnap{}, err
	}
	s := cpuSnap{at: time.Now()}
	s.self = float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	info, err := ad.Info(ctx, "cpu", "commandstats").Result()
	if err != nil {
		return cpuSnap{}, err
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "used_cpu_user", "used_cpu_sys":
			x, _ := strconv.ParseFloat(v, 64)
			s.redis += x
		case "cmdstat_evalsha":
			for _, kv := range strings.Split(v, ",") {
				if c, ok := strings.CutPrefix(kv, "calls="); ok {
					s.evalsha, _ = strconv.ParseInt(c, 10, 64)
				}
			}
		}
	}
	return s, nil
}
