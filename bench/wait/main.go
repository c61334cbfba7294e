// Command wait measures what wait_replicas costs: enqueue latency and
// throughput through htq's public API against a real Redis primary and
// one replica on loopback, with and without wait_replicas=1, in
// alternating runs; it prints the median of each figure over the runs.
//
//	cd bench/wait && go run .                          # 5 runs of each mode
//	cd bench/wait && go run . -runs 3 -json results-latest.jsonl
//
// It starts both redis-server processes itself (from PATH, persistence
// off, free loopback ports, private directories) and stops them at the
// end. docs/operations.md quotes its output; the raw lines of that run are
// in results/.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/htqueue/htq"
)

func main() {
	runs := flag.Int("runs", 5, "runs of each mode (alternating)")
	seq := flag.Int("seq", 2000, "tasks enqueued one by one by one producer (latency)")
	conc := flag.Int("concurrency", 32, "producers of the throughput figure")
	total := flag.Int("n", 20000, "tasks enqueued by the producers (throughput)")
	batch := flag.Int("batch", 100, "tasks per EnqueueBatch call")
	batches := flag.Int("batches", 100, "EnqueueBatch calls (one producer)")
	jsonOut := flag.String("json", "", "also append one JSON line per run to this file")
	flag.Parse()
	if err := run(*runs, *seq, *conc, *total, *batch, *batches, *jsonOut); err != nil {
		fmt.Fprintln(os.Stderr, "wait:", err)
		os.Exit(1)
	}
}

// result is one run of one mode.
type result struct {
	Mode        string  `json:"mode"`
	Run         int     `json:"run"`
	P50us       float64 `json:"enqueue_p50_us"`
	P99us       float64 `json:"enqueue_p99_us"`
	SeqPerSec   float64 `json:"enqueue_seq_per_s"`
	ConcPerSec  float64 `json:"enqueue_conc_per_s"`
	Concurrency int     `json:"concurrency"`
	BatchPerSec float64 `json:"batch_tasks_per_s"`
	BatchSize   int     `json:"batch_size"`
}

func run(runs, seq, conc, total, batch, batches int, jsonOut string) error {
	primary, err := startRedis("--repl-diskless-sync-delay", "0")
	if err != nil {
		return err
	}
	defer primary.stop()
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica, err := startRedis("--replicaof", host, port)
	if err != nil {
		return err
	}
	defer replica.stop()
	if err := waitOnline(primary.Addr); err != nil {
		return err
	}
	// Warm-up: after a diskless sync the primary streams to the replica
	// only once it has acknowledged (it does every second), so the first
	// WAIT may take up to a second; measure after it.
	if _, err := measure("redis://"+primary.Addr+"/0?wait_replicas=1&wait_timeout=5s", 1, 1, 1, 1, 1); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	modes := []struct{ name, query string }{
		{"off", ""},
		{"wait_replicas=1", "?wait_replicas=1&wait_timeout=1s"},
	}
	var all []result
	for r := 1; r <= runs; r++ {
		for _, m := range modes {
			if err := flushAll(primary.Addr); err != nil {
				return err
			}
			res, err := measure("redis://"+primary.Addr+"/0"+m.query, seq, conc, total, batch, batches)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", m.name, r, err)
			}
			res.Mode, res.Run = m.name, r
			all = append(all, res)
			fmt.Fprintf(os.Stderr, "%-16s run %d: p50 %.0fµs p99 %.0fµs, 1 producer %.0f/s, %d producers %.0f/s, batches of %d %.0f tasks/s\n",
				m.name, r, res.P50us, res.P99us, res.SeqPerSec, conc, res.ConcPerSec, batch, res.BatchPerSec)
		}
	}
	if jsonOut != "" {
		f, err := os.OpenFile(jsonOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(f)
		for _, r := range all {
			if err := enc.Encode(r); err != nil {
				f.Close()
				return err
			}
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Printf("medians of %d runs (primary + 1 replica on loopback, %s):\n\n", runs, redisVersion(primary.Addr))
	fmt.Printf("| mode | enqueue p50 | enqueue p99 | 1 producer | %d producers | EnqueueBatch of %d |\n|---|---|---|---|---|---|\n", conc, batch)
	for _, m := range modes {
		var rs []result
		for _, r := range all {
			if r.Mode == m.name {
				rs = append(rs, r)
			}
		}
		med := func(f func(result) float64) float64 {
			v := make([]float64, len(rs))
			for i, r := range rs {
				v[i] = f(r)
			}
			slices.Sort(v)
			return v[len(v)/2]
		}
		fmt.Printf("| %s | %.0f µs | %.0f µs | %.0f tasks/s | %.0f tasks/s | %.0f tasks/s |\n", m.name,
			med(func(r result) float64 { return r.P50us }), med(func(r result) float64 { return r.P99us }),
			med(func(r result) float64 { return r.SeqPerSec }), med(func(r result) float64 { return r.ConcPerSec }),
			med(func(r result) float64 { return r.BatchPerSec }))
	}
	return nil
}

// measure opens url and takes the figures of one run.
func measure(url string, seq, conc, total, batch, batches int) (result, error) {
	ctx := context.Background()
	st, err := htq.OpenWithOptions(ctx, url, htq.OpenOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return result{}, err
	}
	defer st.Close()
	c := htq.NewClient(st)
	payload := []byte(`{"user":12345,"template":"welcome"}`)
	res := result{Concurrency: conc, BatchSize: batch}

	// Latency: one producer, one call at a time.
	lat := make([]time.Duration, seq)
	start := time.Now()
	for i := range lat {
		t0 := time.Now()
		if _, err := c.EnqueueContext(ctx, htq.NewTask("email", payload), htq.Queue("seq")); err != nil {
			return result{}, err
		}
		lat[i] = time.Since(t0)
	}
	res.SeqPerSec = float64(seq) / time.Since(start).Seconds()
	slices.Sort(lat)
	res.P50us = float64(lat[len(lat)/2].Microseconds())
	res.P99us = float64(lat[len(lat)*99/100].Microseconds())

	// Throughput: conc producers share total tasks.
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	start = time.Now()
	for p := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < total; i += conc {
				if _, err := c.EnqueueContext(ctx, htq.NewTask("email", payload), htq.Queue("conc")); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	res.ConcPerSec = float64(total) / time.Since(start).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return result{}, err
	}

	// Batches: one producer, EnqueueBatch calls.
	start = time.Now()
	for range batches {
		tasks := make([]*htq.Task, batch)
		for i := range tasks {
			tasks[i] = htq.NewTask("email", payload)
		}
		if _, err := c.EnqueueBatch(ctx, tasks, htq.Queue("batch")); err != nil {
			return result{}, err
		}
	}
	res.BatchPerSec = float64(batch*batches) / time.Since(start).Seconds()
	return res, nil
}

// waitOnline waits until the primary counts its replica online (WAIT
// counts no replica before).
func waitOnline(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		if strings.Contains(infoLine(addr, "replication"), "state=online") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica of %s not online after 10s", addr)
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
}

func redisVersion(addr string) string {
	for _, l := range strings.Split(infoLine(addr, "server"), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return "Redis " + v
		}
	}
	return "Redis ?"
}

// infoLine returns INFO section of addr ("" on error).
func infoLine(addr, section string) string { return command(addr, "INFO", section) }

// command sends one command in RESP2 on a new connection and returns the
// reply's text: a bulk string's body, or the raw line ("" on error).
func command(addr string, args ...string) string {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	req := fmt.Sprintf("*%d\r\n", len(args))
	for _, a := range args {
		req += fmt.Sprintf("$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		return ""
	}
	buf := make([]byte, 64<<10)
	n, _ := io.ReadAtLeast(conn, buf, 1)
	s := string(buf[:n])
	// $<len>\r\n<body>
	if i := strings.Index(s, "\r\n"); i > 0 && s[0] == '$' {
		if size, err := strconv.Atoi(s[1:i]); err == nil {
			body := s[i+2:]
			for len(body) < size {
				m, err := conn.Read(buf)
				if err != nil {
					break
				}
				body += string(buf[:m])
			}
			return body
		}
	}
	return s
}

// redisServer is a redis-server process started by startRedis.
type redisServer struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
}

// startRedis starts redis-server from PATH on a free loopback port with
// persistence off and extra arguments, and waits until it answers.
func startRedis(extra ...string) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "htq-bench-wait-")
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--loglevel", "warning"}, extra...)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server (is it on PATH?): %w", err)
	}
	s := &redisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(command(s.Addr, "PING"), "PONG") {
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer", s.Addr)
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
	return s, nil
}

func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
}

// flushAll empties the server (the replica follows).
func flushAll(addr string) error {
	if r := command(addr, "FLUSHALL"); !strings.Contains(r, "OK") {
		return fmt.Errorf("FLUSHALL on %s: %q", addr, r)
	}
	return nil
}
