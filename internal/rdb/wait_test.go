package rdb

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokertest"
	"github.com/htqueue/htq/internal/redistest"
)

// nodeClient returns a plain rueidis client to one Redis node, closed at
// the end of the test.
func nodeClient(t testing.TB, addr string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// info returns field of INFO section of the node c ("" when absent).
func info(t testing.TB, c rueidis.Client, section, field string) string {
	t.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	return infoField(s, field)
}

// waitCalls returns how many WAIT commands the node has run.
func waitCalls(t testing.TB, c rueidis.Client) int64 {
	t.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	v := infoField(s, "cmdstat_wait") // calls=N,usec=…
	calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
	n, _ := strconv.ParseInt(calls, 10, 64)
	return n
}

// startMonitor runs redis-cli MONITOR on addr; the function it returns
// stops it and returns the lines seen.
func startMonitor(t *testing.T, addr string) func() []string {
	t.Helper()
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-cli", "-h", host, "-p", port, "monitor")
	out := &syncBuffer{}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-cli monitor (redis-cli comes with redis-server): %v", err)
	}
	// MONITOR answers OK once it is on; wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(out.String(), "OK") {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatal("redis-cli monitor did not start")
		}
		time.Sleep(10 * time.Millisecond) // polling an external process
	}
	stopped := false
	stop := func() []string {
		if !stopped {
			stopped = true
			time.Sleep(100 * time.Millisecond) // let the last lines arrive
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return strings.Split(out.String(), "\n")
	}
	t.Cleanup(func() { stop() })
	return stop
}

// syncBuffer is a strings.Builder safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// checkWaitFollowsWrite checks in MONITOR lines that there are want WAIT
// commands and that each one came from the connection that sent the write
// just before it: WAIT covers only its own connection's writes.
func checkWaitFollowsWrite(t *testing.T, lines []string, want int) {
	t.Helper()
	last := map[string]string{} // client address -> its last command
	waits := 0
	for _, line := range lines {
		// 1796135670.619409 [0 127.0.0.1:46552] "WAIT" "1" "100"
		_, rest, ok := strings.Cut(line, "[")
		if !ok {
			continue
		}
		who, rest, ok := strings.Cut(rest, "] ")
		if !ok {
			continue
		}
		_, addr, _ := strings.Cut(who, " ")
		if addr == "lua" {
			continue // a command run by a script
		}
		name, _, _ := strings.Cut(rest, " ")
		name = strings.ToUpper(strings.Trim(name, `"`))
		if name == "WAIT" {
			waits++
			switch last[addr] {
			case "EVALSHA", "EVAL", "HSET", "HSETNX", "HDEL":
			default:
				t.Errorf("WAIT from %s follows %q on that connection, not the write it must cover", addr, last[addr])
			}
		}
		last[addr] = name
	}
	if waits != want {
		t.Errorf("MONITOR saw %d WAIT commands, want %d", waits, want)
	}
}

// TestWaitReplicas runs acknowledged writes against a real primary and
// replica: with the replica up each write sends one WAIT, on the write's
// own connection, and succeeds; with the replica frozen (SIGSTOP) each
// write is made on the primary but fails with ErrReplicationTimeout after
// wait_timeout; without the option nothing waits and no WAIT is sent.
func TestWaitReplicas(t *testing.T) {
	primary, replica := redistest.StartReplicated(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const timeout = 300 * time.Millisecond
	b, err := Open(ctx, "redis://"+primary.Addr+"/0?wait_replicas=1&wait_timeout=300ms", Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer b.Close()
	plain, err := Open(ctx, "redis://"+primary.Addr+"/0", Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer plain.Close()
	pc := nodeClient(t, primary.Addr)

	// Replica up: the writes succeed, one WAIT each (Fetch sends none),
	// each on the connection of the write it covers (MONITOR shows it).
	mon := startMonitor(t, primary.Addr)
	w0 := waitCalls(t, pc)
	mustEnqueue(t, b, msg("q", "a1"), time.Time{})
	for i, err := range b.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: msg("q", "a2")}, {Msg: msg("q", "a3")}, {Msg: msg("r", "a4")}}) {
		if err != nil {
			t.Fatalf("EnqueueBatch[%d]: %v", i, err)
		}
	}
	ls := mustFetch(t, b, "q", 3)
	if errs := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
		t.Fatalf("Complete: %v", errs[0])
	}
	if err := b.Retry(ctx, broker.RetryParams{Lease: ls[1].Ref(), Delay: time.Hour, ErrMsg: "x", IsFailure: true}); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	if err := b.Archive(ctx, broker.ArchiveParams{Lease: ls[2].Ref(), ErrMsg: "x"}); err != nil {
		t.Fatalf("Archive: %v", err)
	}
	if err := b.PutMeta(ctx, "k", []byte("v")); err != nil {
		t.Fatalf("PutMeta: %v", err)
	}
	if got := waitCalls(t, pc) - w0; got != 6 {
		t.Errorf("%d WAIT commands for 6 acknowledged writes, want 6", got)
	}
	checkWaitFollowsWrite(t, mon(), 6)

	// Without the option: no WAIT at all.
	w0 = waitCalls(t, pc)
	mustEnqueue(t, plain, msg("q", "p1"), time.Time{})
	plain.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: msg("q", "p2")}})
	pl := mustFetch(t, plain, "q", 2)
	plain.Complete(ctx, []broker.LeaseRef{pl[0].Ref(), pl[1].Ref()})
	if got := waitCalls(t, pc) - w0; got != 0 {
		t.Errorf("%d WAIT commands without wait_replicas, want 0", got)
	}

	if err := replica.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozen := true
	defer func() {
		if frozen {
			_ = replica.Thaw()
		}
	}()

	expectTimeout := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, base.ErrReplicationTimeout) {
			t.Fatalf("%s with the replica frozen: %v, want ErrReplicationTimeout", what, err)
		}
		if !strings.Contains(err.Error(), "written on the primary") || !strings.Contains(err.Error(), "0 of the 1 replicas") {
			t.Errorf("%s: error %q does not say the write was made and how many replicas confirmed it", what, err)
		}
	}
	start := time.Now()
	expectTimeout("Enqueue", b.Enqueue(ctx, broker.EnqueueParams{Msg: msg("q", "b1")}))
	if d := time.Since(start); d < timeout {
		t.Errorf("Enqueue failed after %v, before wait_timeout %v", d, timeout)
	}
	// The write happened.
	if ti, err := plain.GetTaskInfo(ctx, "q", "b1"); err != nil || ti.State != base.StatePending {
		t.Fatalf("task b1 after the timeout: %+v, %v; want it pending on the primary", ti, err)
	}
	// A batch: every stored task gets the error, b1 again too (found
	// stored, it waits as a new write would); a refused one keeps its own.
	otherB1 := msg("q", "b1")
	otherB1.Payload = []byte("other")
	errs := b.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: msg("q", "b2")}, {Msg: otherB1}, {Msg: msg("r", "b3")}, {Msg: msg("q", "b4")}, {Msg: msg("q", "b1")}})
	expectTimeout("EnqueueBatch[0]", errs[0])
	if !errors.Is(errs[1], base.ErrTaskIDConflict) {
		t.Errorf("EnqueueBatch[1] (ID taken): %v, want ErrTaskIDConflict", errs[1])
	}
	expectTimeout("EnqueueBatch[2]", errs[2])
	expectTimeout("EnqueueBatch[3]", errs[3])
	expectTimeout("EnqueueBatch[4] (b1 again)", errs[4])

	// Fetch does not wait; the outcomes do.
	fstart := time.Now()
	ls = mustFetch(t, b, "q", 3)
	if d := time.Since(fstart); d >= timeout {
		t.Errorf("Fetch took %v: it must not wait for replicas", d)
	}
	expectTimeout("Complete", b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0])
	expectTimeout("Retry", b.Retry(ctx, broker.RetryParams{Lease: ls[1].Ref(), Delay: time.Hour, ErrMsg: "x", IsFailure: true}))
	expectTimeout("Archive", b.Archive(ctx, broker.ArchiveParams{Lease: ls[2].Ref(), ErrMsg: "x"}))
	if ti, err := plain.GetTaskInfo(ctx, "q", ls[2].Msg.ID); err != nil || ti.State != base.StateArchived {
		t.Fatalf("archived task after the timeout: %+v, %v; want it archived on the primary", ti, err)
	}
	expectTimeout("PutMeta", b.PutMeta(ctx, "k2", []byte("v")))
	expectTimeout("DeleteTask", b.DeleteTask(ctx, "q", ls[2].Msg.ID))
	// A write that changed nothing is not waited for.
	if err := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0]; !errors.Is(err, base.ErrLeaseLost) {
		t.Errorf("second Complete: %v, want ErrLeaseLost", err)
	}

	// Thawed, the replica catches up and the writes succeed again.
	if err := replica.Thaw(); err != nil {
		t.Fatal(err)
	}
	frozen = false
	mustEnqueue(t, b, msg("q", "c1"), time.Time{})
	mustEnqueue(t, b, msg("q", "b1"), time.Time{}) // the retry of the first timeout: confirmed now
	checkInvariants(t, b)
}

// TestWaitAOFLocal asks for WAITAOF's local fsync: on Redis 7.2 and later
// with appendonly yes the writes succeed, one WAITAOF each; an older
// server (or one without appendonly) is refused at Open, naming the
// parameter, rather than acknowledging writes it cannot confirm.
func TestWaitAOFLocal(t *testing.T) {
	s := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "everysec")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sc := nodeClient(t, s.Addr)
	version := info(t, sc, "server", "redis_version")
	b, err := Open(ctx, "redis://"+s.Addr+"/0?wait_aof_local=1&wait_timeout=2s", Options{})
	if !versionAtLeast(version, 7, 2) {
		if err == nil {
			b.Close()
			t.Fatalf("Open with wait_aof_local on Redis %s succeeded; WAITAOF needs 7.2", version)
		}
		if !errors.Is(err, base.ErrInvalidArgument) || !strings.Contains(err.Error(), "wait_aof_local") || !strings.Contains(err.Error(), version) {
			t.Fatalf("Open with wait_aof_local on Redis %s: %v; want an invalid-argument error naming wait_aof_local and the version", version, err)
		}
		t.Logf("Redis %s has no WAITAOF: Open refused wait_aof_local as it should (%v)", version, err)
		return
	}
	if err != nil {
		t.Fatalf("Open with wait_aof_local on Redis %s: %v", version, err)
	}
	defer b.Close()
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	ls := mustFetch(t, b, "q", 1)
	if err := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0]; err != nil {
		t.Fatalf("Complete: %v", err)
	}
	noAOF := redistest.Start(t)
	if b2, err := Open(ctx, "redis://"+noAOF.Addr+"/0?wait_aof_local=1", Options{}); err == nil {
		b2.Close()
		t.Fatal("Open with wait_aof_local on a server with appendonly no succeeded")
	} else if !strings.Contains(err.Error(), "appendonly") {
		t.Fatalf("Open with wait_aof_local, appendonly no: %v; want it to name appendonly", err)
	}
}

// TestConformanceWait runs the conformance suite with every acknowledged
// write waiting for a real replica: waiting must change no behaviour.
func TestConformanceWait(t *testing.T) {
	primary, _ := redistest.StartReplicated(t)
	url := "redis://" + primary.Addr + "/1?wait_replicas=1&wait_timeout=5s"
	brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := primary.FlushDB(1); err != nil {
			t.Fatalf("flush: %v", err)
		}
		b, err := Open(ctx, url, Options{Clock: clock})
		if err != nil {
			t.Fatalf("Open %s: %v", url, err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}
