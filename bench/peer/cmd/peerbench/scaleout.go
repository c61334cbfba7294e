package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The scale-out scenario runs the workers in -procs separate processes
// (this binary again, as -scenario worker) against one Redis or one Redis
// Cluster, so that what more processes add is measured, with the CPU of
// Redis (every node in -stat-addrs) and of each worker process per task.
//
//	scaleout  pre-enqueue N tasks (over the queues of -queue, comma list),
//	          then time -procs worker processes at -conc each until all ran
//	worker    (internal) one worker process of scaleout: serves -queue at
//	          -conc and writes its running count of handled tasks to stdout

// scenarioScaleout is the parent of the scale-out scenario.
func scenarioScaleout(ctx context.Context, c config, ad *admin) error {
	n, conc, procs := def(c.n, 100000), def(c.conc, 50), def(c.procs, 1)
	nodes := []*admin{ad}
	for _, a := range strings.Split(c.statAddrs, ",") {
		if a = strings.TrimSpace(a); a != "" && a != c.addr {
			nodes = append(nodes, newAdmin(a))
		}
	}
	for _, nd := range nodes {
		if err := nd.flushAll(ctx); err != nil {
			return err
		}
	}
	impl, err := newImpl(c.impl, c.addr, c.queue, c.implOpts)
	if err != nil {
		return err
	}
	defer impl.Close()
	pre := time.Now()
	if _, err := enqueueMany(ctx, impl, n, c.preloadConc, c.payload, false); err != nil {
		return err
	}
	preload := time.Since(pre)
	if p, err := impl.Pending(ctx); err != nil || p != int64(n) {
		return fmt.Errorf("pending after preload = %d (%v), want %d", p, err, n)
	}

	before := make([]snapshot, len(nodes))
	for i, nd := range nodes {
		if err := nd.resetStats(ctx); err != nil {
			return err
		}
		if before[i], err = nd.snap(ctx); err != nil {
			return err
		}
	}
	start := time.Now()
	workers := make([]*workerProc, procs)
	for i := range workers {
		if workers[i], err = startWorkerProc(c, conc); err != nil {
			return err
		}
		defer workers[i].kill()
	}
	deadline := time.Now().Add(c.timeout)
	total := int64(0)
	for total < int64(n) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the children report every 10 ms
		total = 0
		for _, w := range workers {
			total += w.handled.Load()
		}
	}
	wall := time.Since(start)
	var workerCPU float64
	for _, w := range workers {
		workerCPU += w.cpuSeconds()
	}
	var redisCPU, reads float64
	cs := map[string]cmdStat{}
	for i, nd := range nodes {
		after, err := nd.snap(ctx)
		if err != nil {
			return err
		}
		redisCPU += after.redisCPU - before[i].redisCPU
		reads += float64(after.redisReads - before[i].redisReads - 1)
		st, err := nd.commandStats(ctx)
		if err != nil {
			return err
		}
		for k, v := range st {
			s := cs[k]
			s.Calls += v.Calls
			s.Usec += v.Usec
			cs[k] = s
		}
	}
	for _, w := range workers {
		w.stop()
	}
	calls, usecs, allCalls, scriptCalls, scriptUsec := perTask(cs, n)
	f := map[string]any{
		"n": n, "conc": conc, "procs": procs, "queues": len(strings.Split(c.queue, ",")),
		"redis_nodes": len(nodes), "payload_bytes": c.payload,
		"processed":                  total,
		"timed_out":                  total < int64(n),
		"wall_s":                     round(wall.Seconds(), 4),
		"tasks_per_s":                round(float64(total)/wall.Seconds(), 1),
		"preload_s":                  round(preload.Seconds(), 3),
		"redis_cpu_s":                round(redisCPU, 3),
		"redis_cpu_us_per_task":      round(redisCPU*1e6/float64(n), 2),
		"worker_cpu_s":               round(workerCPU, 3),
		"worker_cpu_us_per_task":     round(workerCPU*1e6/float64(n), 2),
		"redis_cmds_per_task":        calls,
		"redis_cmd_usec_per_task":    usecs,
		"redis_calls_per_task":       round(allCalls, 3),
		"redis_reads_per_task":       round(reads/float64(n), 3),
		"redis_scripts_per_task":     round(scriptCalls, 3),
		"redis_script_usec_per_task": round(scriptUsec, 2),
	}
	emit(c, "scaleout", impl, f)
	if total < int64(n) {
		return fmt.Errorf("only %d of %d processed within %v", total, n, c.timeout)
	}
	return nil
}

// workerProc is one child worker process and its running count.
type workerProc struct {
	cmd     *exec.Cmd
	handled atomic.Int64
	done    chan struct{}
	once    sync.Once
}

// startWorkerProc starts this binary as -scenario worker with the same
// adapter, address, queues and options, and reads its counts.
func startWorkerProc(c config, conc int) (*workerProc, error) {
	args := []string{"-scenario", "worker", "-impl", c.impl, "-addr", c.addr, "-queue", c.queue, "-conc", strconv.Itoa(conc)}
	for k, v := range c.implOpts {
		args = append(args, "-impl-opt", k+"="+v)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker process: %w", err)
	}
	w := &workerProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, err := strconv.ParseInt(sc.Text(), 10, 64); err == nil {
				w.handled.Store(v)
			}
		}
	}()
	return w, nil
}

// cpuSeconds reads the child's user + system CPU from /proc (it is still
// running, so its rusage is not available yet).
func (w *workerProc) cpuSeconds() float64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(w.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ") ".
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	fields := strings.Fields(s[i+1:])
	if len(fields) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(fields[11], 64) // utime, field 14 of stat
	st, _ := strconv.ParseFloat(fields[12], 64) // stime, field 15
	return (ut + st) / 100                      // USER_HZ is 100 on Linux
}

// stop ends the child with SIGTERM and waits for it.
func (w *workerProc) stop() {
	w.once.Do(func() {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
		<-w.done
		_ = w.cmd.Wait()
	})
}

// kill ends the child at once (on the error paths).
func (w *workerProc) kill() {
	w.once.Do(func() {
		_ = w.cmd.Process.Kill()
		<-w.done
		_ = w.cmd.Wait()
	})
}

// scenarioWorker is one worker process of the scale-out scenario: it runs
// the adapter's workers until SIGTERM and writes its handled count to
// stdout every 10 ms.
func scenarioWorker(ctx context.Context, c config) error {
	impl, err := newImpl(c.impl, c.addr, c.queue, c.implOpts)
	if err != nil {
		return err
	}
	defer impl.Close()
	var count atomic.Int64
	stop, err := impl.StartWorkers(def(c.conc, 50), func([]byte) { count.Add(1) })
	if err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	last := int64(-1)
	for {
		select {
		case <-term:
			stop()
			fmt.Fprintln(os.Stdout, count.Load())
			return nil
		case <-tick.C:
			if v := count.Load(); v != last {
				fmt.Fprintln(os.Stdout, v)
				last = v
			}
		}
	}
}
