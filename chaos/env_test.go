package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/storage"
)

// full reports whether the full versions run (HTQ_CHAOS=full, `make
// chaos`); otherwise each suite runs its short version, sized for CI.
func full() bool { return os.Getenv("HTQ_CHAOS") == "full" }

// pick returns short or, in a full run, long.
func pick[T any](short, long T) T {
	if full() {
		return long
	}
	return short
}

// skipShort skips a suite under -short (make min-go): every suite starts
// processes and runs for seconds.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a reliability suite: starts processes and runs for seconds")
	}
}

// A run is one suite's history directory, the test process's own history
// (producer and faults) and the random source of its fault schedule.
type run struct {
	t    *testing.T
	dir  string
	log  *chaostest.Log
	rng  *rand.Rand
	seed uint64

	mu    sync.Mutex
	procs []*chaostest.Proc
}

// newRun starts a run. Its seed comes from HTQ_CHAOS_SEED when set.
func newRun(t *testing.T) *run {
	t.Helper()
	skipShort(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("HTQ_CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HTQ_CHAOS_SEED: %v", err)
		}
		seed = n
	}
	t.Logf("seed %d (HTQ_CHAOS_SEED=%d replays this fault schedule)", seed, seed)
	// The histories and the workers' logs are kept when the test fails.
	dir, err := os.MkdirTemp("", "htq-chaos-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("histories and worker logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	log, err := chaostest.OpenLog(filepath.Join(dir, "test.log"), "")
	if err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, dir: dir, log: log, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range r.procs {
			_ = p.Kill()
			if p.Panicked() {
				t.Errorf("worker %s panicked or raced:\n%s", p.Name, p.Stderr())
			}
		}
		_ = log.Close()
	})
	return r
}

// record appends e to the test's own history.
func (r *run) record(e chaostest.Event) {
	r.t.Helper()
	if err := r.log.Record(e); err != nil {
		r.t.Fatal(err)
	}
}

// worker starts an incarnation of the chaos worker named name, appending
// to its own history file, with the given flags.
func (r *run) worker(name string, args ...string) *chaostest.Proc {
	r.t.Helper()
	args = append([]string{"-history", filepath.Join(r.dir, name+".log")}, args...)
	p, err := chaostest.StartProc(buildWorker(r.t), r.dir, name, args...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	return p
}

// events reads the whole history of the run.
func (r *run) events() []chaostest.Event {
	r.t.Helper()
	evs, err := chaostest.ReadDir(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	return evs
}

// eventsOf reads the history of one incarnation.
func (r *run) eventsOf(name string) []chaostest.Event {
	r.t.Helper()
	evs, err := chaostest.ReadFile(filepath.Join(r.dir, name+".log"))
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	return evs
}

// between returns a random duration in [lo, hi].
func (r *run) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)+1))
}

// killAndRecord kills p with SIGKILL and records the fault; it returns
// when p is gone, with the time it was gone: every event p recorded is
// older (the fault's own time, when the signal was sent, may be a hair
// younger than p's last events).
func (r *run) killAndRecord(p *chaostest.Proc) time.Time {
	r.t.Helper()
	r.record(chaostest.Event{Kind: chaostest.Fault, ID: "kill", Worker: p.Name})
	if err := p.Kill(); err != nil {
		r.t.Fatal(err)
	}
	if p.Panicked() {
		r.t.Errorf("worker %s panicked or raced before it was killed:\n%s", p.Name, p.Stderr())
	}
	return time.Now()
}

// recordInFlight asks the storage which tasks the incarnation name
// started and the storage has not recorded as completed, and records each
// as in flight at the fault at time at.
func (r *run) recordInFlight(st *htq.Storage, queue, name string, at time.Time) int {
	r.t.Helper()
	insp := htq.NewInspector(st)
	seen := map[string]bool{}
	n := 0
	for _, e := range r.eventsOf(name) {
		if e.Kind != chaostest.Start || seen[e.ID] {
			continue
		}
		seen[e.ID] = true
		ti, err := insp.GetTaskInfo(queue, e.ID)
		switch {
		case errors.Is(err, htq.ErrTaskNotFound):
			// No task starts before its enqueue is durable (the embedded
			// store's Fetch waits for it), so none that ran can vanish.
			r.t.Errorf("task %s, started by %s, is gone after the fault: it started before its enqueue was durable", e.ID, name)
		case err != nil:
			r.t.Fatalf("GetTaskInfo %s after the fault on %s: %v", e.ID, name, err)
		case ti.State != htq.TaskStateCompleted:
			r.record(chaostest.Event{At: at, Kind: chaostest.InFlight, ID: e.ID, Worker: name, Note: ti.State.String()})
			n++
		}
	}
	return n
}

// checkInvariants runs the storage's invariant checker (every task in
// exactly one state, every active task with a lease, no dangling index
// entry); the suites call it after every fault and at the end.
func checkInvariants(t *testing.T, st *htq.Storage, when string) {
	t.Helper()
	ic, ok := storage.BrokerOf(st).(interface {
		CheckInvariants(ctx context.Context) error
	})
	if !ok {
		t.Fatalf("the storage %s has no invariant checker", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ic.CheckInvariants(ctx); err != nil {
		t.Fatalf("invariants %s: %v", when, err)
	}
}

// doneAll reports whether every acknowledged task of evs has a done
// event, and how many acknowledged tasks there are.
func doneAll(evs []chaostest.Event) (bool, int) {
	acked, done := map[string]bool{}, map[string]bool{}
	for _, e := range evs {
		switch e.Kind {
		case chaostest.Ack:
			acked[e.ID] = true
		case chaostest.Done:
			done[e.ID] = true
		}
	}
	for id := range acked {
		if !done[id] {
			return false, len(acked)
		}
	}
	return true, len(acked)
}

// checkStorage reads the final state of every task the history
// acknowledged and reports those the storage does not hold as completed,
// and the counts of the queue's states.
func checkStorage(t *testing.T, st *htq.Storage, queue string, evs []chaostest.Event) {
	t.Helper()
	insp := htq.NewInspector(st)
	acked := map[string]bool{}
	for _, e := range evs {
		if e.Kind == chaostest.Ack {
			acked[e.ID] = true
		}
	}
	var notDone []string
	for id := range acked {
		ti, err := insp.GetTaskInfo(queue, id)
		if err != nil || ti.State != htq.TaskStateCompleted {
			state := "missing"
			if err == nil {
				state = ti.State.String()
			}
			notDone = append(notDone, id+" ("+state+")")
		}
	}
	if len(notDone) > 0 {
		t.Errorf("%d acknowledged tasks are not completed in the storage: %s", len(notDone), strings.Join(notDone[:min(10, len(notDone))], ", "))
	}
	qi, err := insp.GetQueueInfo(queue)
	if err != nil {
		t.Fatal(err)
	}
	if qi.Pending+qi.Active+qi.Scheduled+qi.Retry+qi.Archived != 0 {
		t.Errorf("queue %s at the end: %d pending, %d active, %d scheduled, %d retry, %d archived; want all completed",
			queue, qi.Pending, qi.Active, qi.Scheduled, qi.Retry, qi.Archived)
	}
}

// figure logs one line of figures for docs/reliability.md.
func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("FIGURE %s: %s", t.Name(), fmt.Sprintf(format, args...))
}

// quietLogger is the logger of servers the tests run in their own
// process: the outages they cause make them log errors by design.
// HTQ_CHAOS_LOG=1 shows them.
func quietLogger() *slog.Logger {
	if os.Getenv("HTQ_CHAOS_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

// explain lists, for the first tasks of ids, their events, the faults,
// and the warnings of the workers that ran them, for a failure message.
func explain(evs []chaostest.Event, ids []string) string {
	want, workers := map[string]bool{}, map[string]bool{}
	for _, id := range ids[:min(5, len(ids))] {
		want[id] = true
	}
	for _, e := range evs {
		if want[e.ID] && e.Kind == chaostest.Start {
			workers[e.Worker] = true
		}
	}
	var b strings.Builder
	for _, e := range evs {
		if want[e.ID] || e.Kind == chaostest.Fault || e.Kind == chaostest.Heal || e.Kind == chaostest.Warned && workers[e.Worker] {
			fmt.Fprintf(&b, "\n  %s %-8s %-10s %-6s %d %s", e.At.Format("15:04:05.000"), e.Kind, e.ID, e.Worker, e.Attempt, e.Note)
		}
	}
	return b.String()
}

// A producer is a chaostest.Produce running in the background.
type producer struct {
	cancel context.CancelFunc
	done   chan error
	err    error
	ended  bool
}

// startProducer starts enqueuing p's tasks through st, recording in the
// run's history.
func (r *run) startProducer(st *htq.Storage, p chaostest.ProduceParams) *producer {
	ctx, cancel := context.WithCancel(context.Background())
	pr := &producer{cancel: cancel, done: make(chan error, 1)}
	go func() { pr.done <- chaostest.Produce(ctx, htq.NewClient(st), r.log, p) }()
	return pr
}

// finished reports, without waiting, whether the producer has enqueued
// everything, and its error.
func (p *producer) finished() (bool, error) {
	if !p.ended {
		select {
		case p.err = <-p.done:
			p.ended = true
			p.cancel()
		default:
		}
	}
	return p.ended, p.err
}

// wait waits until the producer has enqueued everything.
func (p *producer) wait() error {
	if !p.ended {
		p.err, p.ended = <-p.done, true
		p.cancel()
	}
	return p.err
}

// stop stops the producer (its Enqueue calls in flight fail with
// context.Canceled, indeterminate) and waits for it.
func (p *producer) stop() error {
	p.cancel()
	return p.wait()
}

// termAll stops every worker with SIGTERM, each given 30 s to drain.
func termAll(t *testing.T, procs ...*chaostest.Proc) {
	t.Helper()
	for _, p := range procs {
		if err := p.Term(30 * time.Second); err != nil {
			t.Error(err)
		}
	}
}

// startRedis starts a private redis-server with args and opens database
// 0 of it; the storage is closed and the server stopped at the end of the
// test.
func startRedis(t *testing.T, args ...string) (*redistest.Server, string, *htq.Storage) {
	t.Helper()
	rs := redistest.Start(t, args...)
	url := fmt.Sprintf("redis://%s/0", rs.Addr)
	st := openStorage(t, url)
	t.Cleanup(func() { st.Close() })
	return rs, url, st
}

// waitSettled waits (at most d, polling every 100 ms) until queue holds no
// task pending, active, scheduled or retrying: the tasks the history does
// not wait for (enqueues that failed but were stored, outcomes a fault
// undid) are done too before the workers stop.
func waitSettled(t *testing.T, st *htq.Storage, queue string, d time.Duration) {
	t.Helper()
	insp := htq.NewInspector(st)
	deadline := time.Now().Add(d)
	for {
		qi, err := insp.GetQueueInfo(queue)
		if err == nil && qi.Pending+qi.Active+qi.Scheduled+qi.Retry == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("queue %s not settled after %v: %+v, %v", queue, d, qi, err)
			return
		}
		time.Sleep(100 * time.Millisecond) // the storage has no event for "settled"
	}
}
