package rdb

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokertest"
	"github.com/htqueue/htq/internal/redistest"
)

// startCluster starts a 3-primary Redis Cluster on loopback ports and
// returns its redis-cluster:// URL. It fails (never skips) when
// redis-server or redis-cli is missing.
func startCluster(t *testing.T) string {
	t.Helper()
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli not found on PATH (it comes with redis-server: apt-get install redis-server): %v", err)
	}
	var addrs []string
	for range 3 {
		// A node whose port+10000 (the cluster bus) is out of range or
		// taken exits at once; StartProcess then tries another port.
		s := redistest.Start(t, "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
			"--cluster-config-file", "nodes.conf")
		addrs = append(addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Wait until every node agrees that the cluster is up.
	deadline := time.Now().Add(20 * time.Second)
	for _, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		for {
			info, err := exec.Command(cli, "-h", host, "-p", port, "cluster", "info").Output()
			if err == nil && strings.Contains(string(info), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node %s not ready: %v\n%s", a, err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling an external process
		}
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// TestCluster runs the main paths through a redis-cluster:// URL, with
// queues spread over the nodes: every script must touch one slot, batches
// over several queues must reach several nodes, and events must cross
// nodes.
func TestCluster(t *testing.T) {
	url := startCluster(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	b, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatalf("Open %s: %v", url, err)
	}
	defer b.Close()
	if mode := b.c.Mode(); mode != "cluster" {
		t.Fatalf("client mode = %v, want cluster", mode)
	}

	// Six queues spread over the three nodes (checked at the end).
	queues := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}

	events, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}

	// One EnqueueBatch over every queue (several slots in one pipeline),
	// with a unique task and a scheduled task each.
	now, err := b.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ps []broker.EnqueueParams
	for _, q := range queues {
		u := msg(q, "unique")
		u.UniqueKey, u.UniqueTTL = "u", time.Hour
		ps = append(ps, broker.EnqueueParams{Msg: msg(q, "a")}, broker.EnqueueParams{Msg: u},
			broker.EnqueueParams{Msg: msg(q, "later"), ProcessAt: now.Add(200 * time.Millisecond)})
	}
	for i, err := range b.EnqueueBatch(ctx, ps) {
		if err != nil {
			t.Fatalf("EnqueueBatch[%d]: %v", i, err)
		}
	}
	dup := msg("beta", "dup")
	dup.UniqueKey, dup.UniqueTTL = "u", time.Hour
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: dup}); err == nil {
		t.Fatal("duplicate unique task accepted")
	}

	// Every queue's ready event arrives, whichever node published it.
	ready := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for len(ready) < len(queues) {
		select {
		case e := <-events:
			if e.Kind == broker.EventReady {
				ready[e.Queue] = true
			}
		case <-timeout:
			t.Fatalf("ready events for %v only", ready)
		}
	}

	// Fetch from every queue, then complete everything in one call (one
	// script per queue, one round trip over several nodes).
	var refs []broker.LeaseRef
	for _, q := range queues {
		ls, err := b.Fetch(ctx, broker.FetchParams{Queue: q, Max: 10, LeaseDuration: time.Minute, ServerID: "s"})
		if err != nil {
			t.Fatalf("Fetch %s: %v", q, err)
		}
		if len(ls) != 2 {
			t.Fatalf("Fetch %s: %d tasks, want 2", q, len(ls))
		}
		for _, l := range ls {
			refs = append(refs, l.Ref())
		}
	}
	lost, err := b.ExtendLeases(ctx, "gamma", refs[4:6], time.Minute)
	if err != nil || len(lost) != 0 {
		t.Fatalf("ExtendLeases: %v, %v", lost, err)
	}
	for i, err := range b.Complete(ctx, refs) {
		if err != nil {
			t.Fatalf("Complete[%d] %s: %v", i, refs[i].ID, err)
		}
	}
	// The unique lock was released on every node.
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: dup}); err != nil {
		t.Fatalf("unique task after completion: %v", err)
	}

	// Forward the scheduled tasks once due (Redis TIME decides).
	time.Sleep(250 * time.Millisecond) // the tasks are due 200ms after enqueue on Redis's clock
	for _, q := range queues {
		fr, err := b.Forward(ctx, q, 10)
		if err != nil {
			t.Fatalf("Forward %s: %v", q, err)
		}
		if fr.Moved != 1 {
			t.Fatalf("Forward %s moved %d, want 1", q, fr.Moved)
		}
		ls, err := b.Fetch(ctx, broker.FetchParams{Queue: q, Max: 10, LeaseDuration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		wantN := 1
		if q == "beta" {
			wantN = 2 // and dup
		}
		if len(ls) != wantN {
			t.Fatalf("Fetch %s after Forward: %d tasks, want %d", q, len(ls), wantN)
		}
		if err := b.Retry(ctx, broker.RetryParams{Lease: ls[0].Ref(), Delay: time.Hour, ErrMsg: "x", IsFailure: true}); err != nil {
			t.Fatalf("Retry %s: %v", q, err)
		}
		for _, l := range ls[1:] {
			if err := b.Archive(ctx, broker.ArchiveParams{Lease: l.Ref(), ErrMsg: "x"}); err != nil {
				t.Fatalf("Archive %s: %v", q, err)
			}
		}
		ti, err := b.GetTaskInfo(ctx, q, ls[0].Msg.ID)
		if err != nil || ti.State != base.StateRetry {
			t.Fatalf("GetTaskInfo %s: %+v, %v", q, ti, err)
		}
	}
	qs, err := b.Queues(ctx)
	if err != nil || len(qs) != len(queues) {
		t.Fatalf("Queues = %v, %v", qs, err)
	}
	if err := b.WriteServerState(ctx, &base.ServerInfo{ID: "srv"}, time.Minute); err != nil {
		t.Fatalf("WriteServerState: %v", err)
	}
	if err := b.ClearServerState(ctx, "srv"); err != nil {
		t.Fatalf("ClearServerState: %v", err)
	}
	if err := b.CheckInvariants(ctx); err != nil {
		t.Fatalf("invariants: %v", err)
	}
	for addr, n := range b.c.Nodes() {
		size, err := n.Do(ctx, n.B().Dbsize().Build()).AsInt64()
		if err != nil || size == 0 {
			t.Errorf("node %s holds %d keys (%v): the queues did not spread over the nodes", addr, size, err)
		}
	}

	// wait_replicas on a cluster without replicas: a batch over every
	// queue (several slots and nodes, plus the queue registry's slot) is
	// sent one slot at a time, each with its WAIT, and every task is
	// stored but fails with ErrReplicationTimeout.
	wb, err := Open(ctx, url+"?wait_replicas=1&wait_timeout=50ms", Options{})
	if err != nil {
		t.Fatalf("Open with wait_replicas: %v", err)
	}
	defer wb.Close()
	ps = ps[:0]
	for _, q := range queues {
		ps = append(ps, broker.EnqueueParams{Msg: msg(q, "w")})
	}
	for i, err := range wb.EnqueueBatch(ctx, ps) {
		if !errors.Is(err, base.ErrReplicationTimeout) {
			t.Fatalf("EnqueueBatch[%d] with wait_replicas and no replica: %v, want ErrReplicationTimeout", i, err)
		}
		if _, err := b.GetTaskInfo(ctx, ps[i].Msg.Queue, "w"); err != nil {
			t.Fatalf("task %s/w not stored: %v", ps[i].Msg.Queue, err)
		}
	}
	refs = refs[:0]
	for _, q := range queues {
		ls, err := wb.Fetch(ctx, broker.FetchParams{Queue: q, Max: 10, LeaseDuration: time.Minute, ServerID: "s"})
		if err != nil || len(ls) != 1 {
			t.Fatalf("Fetch %s: %d tasks, %v; want 1", q, len(ls), err)
		}
		refs = append(refs, ls[0].Ref())
	}
	for i, err := range wb.Complete(ctx, refs) {
		if !errors.Is(err, base.ErrReplicationTimeout) {
			t.Fatalf("Complete[%d] with wait_replicas and no replica: %v, want ErrReplicationTimeout", i, err)
		}
	}
	if err := b.CheckInvariants(ctx); err != nil {
		t.Fatalf("invariants: %v", err)
	}

	// A workflow whose queues are in different slots is refused, naming
	// a task of each; nothing is written.
	wmsg := func(q, id string) *base.TaskMessage {
		m := msg(q, "wf-"+id)
		m.Workflow, m.WorkflowTask = "slots", id
		return m
	}
	w := &base.Workflow{ID: "slots", Tasks: []*base.WorkflowTask{
		{ID: "a", Msg: wmsg("alpha", "a")},
		{ID: "b", Msg: wmsg("beta", "b"), DependsOn: []base.Dependency{{Task: "a"}}},
	}}
	err = b.EnqueueWorkflow(ctx, w)
	var we *base.WorkflowError
	if !errors.Is(err, base.ErrInvalidArgument) || !errors.As(err, &we) || !slices.Equal(we.Tasks, []string{"a", "b"}) {
		t.Fatalf("EnqueueWorkflow across slots: %v, want an ErrInvalidArgument naming a and b", err)
	}
	if _, err := b.GetTaskInfo(ctx, "alpha", "wf-a"); !errors.Is(err, base.ErrTaskNotFound) {
		t.Fatalf("task of the refused workflow: %v", err)
	}
}

// TestConformanceCluster runs the whole conformance suite on a 3-primary
// Redis Cluster, flushing every node before each subtest.
func TestConformanceCluster(t *testing.T) {
	url := startCluster(t)
	brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b, err := Open(ctx, url, Options{Clock: clock})
		if err != nil {
			t.Fatalf("Open %s: %v", url, err)
		}
		t.Cleanup(func() { _ = b.Close() })
		for addr, n := range b.c.Nodes() {
			if err := n.Do(ctx, n.B().Flushall().Build()).Error(); err != nil {
				t.Fatalf("FLUSHALL %s: %v", addr, err)
			}
		}
		return b
	})
}
