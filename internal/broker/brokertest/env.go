package brokertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// leaseFor is the lease every helper fetch asks for.
const leaseFor = 30 * time.Second

// env is what a leaf subtest works with: its own broker, the fake clock the
// broker reads, and helpers that fail the test on an unexpected outcome.
type env struct {
	*testing.T
	b     broker.Broker
	clock *clockwork.FakeClock
	ctx   context.Context
	seq   atomic.Int64
	// closed is set by tests that close the broker themselves, so that the
	// invariant check after the test is skipped.
	closed bool
	cfg    runConfig
}

// second returns another handle on the storage under test (see
// WithSecond), or the broker under test when there is none.
func (e *env) second() broker.Broker {
	e.Helper()
	if e.cfg.second == nil {
		return e.b
	}
	b := e.cfg.second(e.T, e.clock, e.b)
	if b == nil {
		e.Fatal("brokertest: the second factory returned a nil broker")
	}
	return b
}

func newEnv(t *testing.T, newBroker Factory) *env {
	t.Helper()
	clock := clockwork.NewFakeClockAt(Epoch)
	b := newBroker(t, clock)
	if b == nil {
		t.Fatal("brokertest: the factory returned a nil broker")
	}
	e := &env{T: t, b: b, clock: clock, ctx: t.Context()}
	// Registered after the factory's own cleanup, so it runs before the
	// broker is closed. It runs even when the test failed, so that a
	// failure also shows whether the storage was left inconsistent.
	t.Cleanup(e.checkInvariants)
	return e
}

func (e *env) checkInvariants() {
	if e.closed {
		return
	}
	ic, ok := e.b.(InvariantChecker)
	if !ok {
		return
	}
	// t.Context is already cancelled when cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ic.CheckInvariants(ctx); err != nil {
		e.Errorf("storage invariants broken after the test: %v", err)
	}
}

// now is the fake clock's time.
func (e *env) now() time.Time { return e.clock.Now() }

// advance moves the fake clock forward.
func (e *env) advance(d time.Duration) { e.clock.Advance(d) }

// uniqueQueue returns a queue name no other run of the suite uses, for the
// tests of Subscribe: Redis delivers published messages to subscribers of
// every database, so names must not collide between concurrent runs.
func uniqueQueue(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
}

// newMsg returns a valid message for queue with an ID unique in the test.
func (e *env) newMsg(queue string) *base.TaskMessage {
	n := e.seq.Add(1)
	return &base.TaskMessage{
		ID:       fmt.Sprintf("task-%04d", n),
		Type:     "test:work",
		Payload:  fmt.Appendf(nil, `{"n":%d}`, n),
		Queue:    queue,
		MaxRetry: 5,
		Timeout:  time.Minute,
	}
}

// enqueueAt stores m with the given ProcessAt and fails the test on error.
func (e *env) enqueueAt(m *base.TaskMessage, at time.Time) {
	e.Helper()
	if err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m, ProcessAt: at}); err != nil {
		e.Fatalf("Enqueue %s/%s: %v", m.Queue, m.ID, err)
	}
}

// enqueue stores m as a pending task and fails the test on error.
func (e *env) enqueue(m *base.TaskMessage) {
	e.Helper()
	e.enqueueAt(m, time.Time{})
}

// add enqueues a new pending task into queue.
func (e *env) add(queue string) *base.TaskMessage {
	e.Helper()
	m := e.newMsg(queue)
	e.enqueue(m)
	return m
}

// schedule enqueues a new task into queue that is due in d.
func (e *env) schedule(queue string, d time.Duration) *base.TaskMessage {
	e.Helper()
	m := e.newMsg(queue)
	e.enqueueAt(m, e.now().Add(d))
	return m
}

// fetchN fetches up to max tasks of queue with a lease of leaseFor.
func (e *env) fetchN(queue string, max int) []*broker.Lease {
	e.Helper()
	ls, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: queue, Max: max, LeaseDuration: leaseFor, ServerID: "server-1"})
	if err != nil {
		e.Fatalf("Fetch %s max %d: %v", queue, max, err)
	}
	if len(ls) > max {
		e.Fatalf("Fetch %s max %d returned %d leases", queue, max, len(ls))
	}
	for _, l := range ls {
		if l == nil || l.Msg == nil {
			e.Fatalf("Fetch %s returned a nil lease or message", queue)
		}
		if l.Token == "" {
			e.Fatalf("Fetch %s returned task %s with an empty token", queue, l.Msg.ID)
		}
	}
	return ls
}

// fetchOne fetches one task of queue and fails unless there is one.
func (e *env) fetchOne(queue string) *broker.Lease {
	e.Helper()
	ls := e.fetchN(queue, 1)
	if len(ls) != 1 {
		e.Fatalf("Fetch %s: got %d tasks, want 1", queue, len(ls))
	}
	return ls[0]
}

// fetchID fetches one task of queue and fails unless it is id.
func (e *env) fetchID(queue, id string) *broker.Lease {
	e.Helper()
	l := e.fetchOne(queue)
	if l.Msg.ID != id {
		e.Fatalf("Fetch %s: got task %s, want %s", queue, l.Msg.ID, id)
	}
	return l
}

// fetchNone fails unless queue has nothing to fetch.
func (e *env) fetchNone(queue string) {
	e.Helper()
	if ls := e.fetchN(queue, 100); len(ls) != 0 {
		e.Fatalf("Fetch %s: got %v, want no task", queue, leaseIDs(ls))
	}
}

// drain fetches every pending task of queue and returns their IDs in
// fetch order.
func (e *env) drain(queue string) []string {
	e.Helper()
	var ids []string
	for {
		ls := e.fetchN(queue, 50)
		if len(ls) == 0 {
			return ids
		}
		ids = append(ids, leaseIDs(ls)...)
	}
}

func leaseIDs(ls []*broker.Lease) []string {
	ids := make([]string, len(ls))
	for i, l := range ls {
		ids[i] = l.Msg.ID
	}
	return ids
}

func msgIDs(ms ...*base.TaskMessage) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// info returns GetTaskInfo of a task that must exist.
func (e *env) info(queue, id string) *base.TaskInfo {
	e.Helper()
	ti, err := e.b.GetTaskInfo(e.ctx, queue, id)
	if err != nil {
		e.Fatalf("GetTaskInfo %s/%s: %v", queue, id, err)
	}
	if ti == nil || ti.Message == nil {
		e.Fatalf("GetTaskInfo %s/%s returned no message", queue, id)
	}
	if ti.Message.ID != id || ti.Message.Queue != queue {
		e.Fatalf("GetTaskInfo %s/%s returned task %s/%s", queue, id, ti.Message.Queue, ti.Message.ID)
	}
	return ti
}

// wantState fails unless the task is in state; it returns its info.
func (e *env) wantState(queue, id string, state base.TaskState) *base.TaskInfo {
	e.Helper()
	ti := e.info(queue, id)
	if ti.State != state {
		e.Fatalf("task %s/%s is %v, want %v", queue, id, ti.State, state)
	}
	return ti
}

// wantGone fails unless GetTaskInfo reports base.ErrTaskNotFound.
func (e *env) wantGone(queue, id string) {
	e.Helper()
	ti, err := e.b.GetTaskInfo(e.ctx, queue, id)
	if !errors.Is(err, base.ErrTaskNotFound) {
		state := "?"
		if ti != nil {
			state = ti.State.String()
		}
		e.Fatalf("GetTaskInfo %s/%s: got (state %s, error %v), want an error wrapping ErrTaskNotFound", queue, id, state, err)
	}
}

// complete completes one lease and fails the test on error.
func (e *env) complete(l broker.LeaseRef) {
	e.Helper()
	errs := e.b.Complete(e.ctx, []broker.LeaseRef{l})
	if len(errs) != 1 {
		e.Fatalf("Complete of 1 lease returned %d results", len(errs))
	}
	if errs[0] != nil {
		e.Fatalf("Complete %s: %v", l.ID, errs[0])
	}
}

// completeErr completes one lease and returns its error.
func (e *env) completeErr(l broker.LeaseRef) error {
	e.Helper()
	errs := e.b.Complete(e.ctx, []broker.LeaseRef{l})
	if len(errs) != 1 {
		e.Fatalf("Complete of 1 lease returned %d results", len(errs))
	}
	return errs[0]
}

// retry sends an active task to retry and fails the test on error.
func (e *env) retry(l broker.LeaseRef, delay time.Duration, msg string) {
	e.Helper()
	if err := e.b.Retry(e.ctx, broker.RetryParams{Lease: l, Delay: delay, ErrMsg: msg, IsFailure: true}); err != nil {
		e.Fatalf("Retry %s: %v", l.ID, err)
	}
}

// archive archives an active task and fails the test on error.
func (e *env) archive(l broker.LeaseRef, msg string) {
	e.Helper()
	if err := e.b.Archive(e.ctx, broker.ArchiveParams{Lease: l, ErrMsg: msg}); err != nil {
		e.Fatalf("Archive %s: %v", l.ID, err)
	}
}

// forward runs Forward with a limit of 100.
func (e *env) forward(queue string) broker.ForwardResult {
	e.Helper()
	return e.forwardN(queue, 100)
}

func (e *env) forwardN(queue string, limit int) broker.ForwardResult {
	e.Helper()
	r, err := e.b.Forward(e.ctx, queue, limit)
	if err != nil {
		e.Fatalf("Forward %s: %v", queue, err)
	}
	return r
}

// wantForward fails unless r is what Forward should have reported.
func (e *env) wantForward(r broker.ForwardResult, moved int, hasNext bool, nextIn time.Duration) {
	e.Helper()
	if r.Moved != moved || r.HasNext != hasNext || (hasNext && r.NextIn != nextIn) {
		want := fmt.Sprintf("Moved %d, HasNext %v", moved, hasNext)
		if hasNext {
			want += fmt.Sprintf(", NextIn %v", nextIn)
		}
		e.Fatalf("Forward: got Moved %d, HasNext %v, NextIn %v; want %s", r.Moved, r.HasNext, r.NextIn, want)
	}
}

// queues returns Queues and fails the test on error.
func (e *env) queues() []string {
	e.Helper()
	qs, err := e.b.Queues(e.ctx)
	if err != nil {
		e.Fatalf("Queues: %v", err)
	}
	return qs
}

// expired returns ExpiredLeases of queue with a limit of 100.
func (e *env) expired(queue string) []*broker.Lease {
	e.Helper()
	ls, err := e.b.ExpiredLeases(e.ctx, queue, 100)
	if err != nil {
		e.Fatalf("ExpiredLeases %s: %v", queue, err)
	}
	return ls
}

// recoverAll retries every expired lease of queue the way the Recoverer
// does, and returns the IDs it recovered.
func (e *env) recoverAll(queue string, delay time.Duration) []string {
	e.Helper()
	var ids []string
	for _, l := range e.expired(queue) {
		err := e.b.Retry(e.ctx, broker.RetryParams{Lease: l.Ref(), Delay: delay, ErrMsg: "lease expired", IsFailure: true, RequireExpired: true})
		if err != nil {
			e.Fatalf("Retry (RequireExpired) of expired lease %s: %v", l.Msg.ID, err)
		}
		ids = append(ids, l.Msg.ID)
	}
	return ids
}

// inState creates a task of queue in state and returns its message and,
// for an active task, its lease. queue must have no pending task. Retry
// tasks are due in an hour, scheduled tasks too, completed tasks are kept
// for an hour and aggregating tasks are in group "g1".
func (e *env) inState(queue string, state base.TaskState) (*base.TaskMessage, *broker.Lease) {
	e.Helper()
	m := e.newMsg(queue)
	switch state {
	case base.StatePending:
		e.enqueue(m)
		return m, nil
	case base.StateScheduled:
		e.enqueueAt(m, e.now().Add(time.Hour))
		return m, nil
	case base.StateAggregating:
		m.GroupKey = "g1"
		e.enqueue(m)
		return m, nil
	case base.StateCompleted:
		m.Retention = time.Hour
	}
	e.enqueue(m)
	l := e.fetchID(queue, m.ID)
	switch state {
	case base.StateActive:
		return m, l
	case base.StateRetry:
		e.retry(l.Ref(), time.Hour, "failed")
	case base.StateArchived:
		e.archive(l.Ref(), "failed for good")
	case base.StateCompleted:
		e.complete(l.Ref())
	default:
		e.Fatalf("inState: unknown state %v", state)
	}
	return m, nil
}

// allStates lists every task state.
var allStates = []base.TaskState{
	base.StateActive, base.StatePending, base.StateScheduled, base.StateRetry,
	base.StateArchived, base.StateCompleted, base.StateAggregating,
}

// wantErrIs fails unless errors.Is(err, target).
func wantErrIs(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want an error wrapping %q", what, err, target)
	}
}

// wantNoErr fails on err.
func wantNoErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantTime fails unless got and want are the same instant.
func wantTime(t testing.TB, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s: got %v, want %v", what, fmtTime(got), fmtTime(want))
	}
}

func fmtTime(tm time.Time) string {
	if tm.IsZero() {
		return "zero time"
	}
	return tm.UTC().Format(time.RFC3339Nano)
}

// wantIDs fails unless got equals want, order included.
func wantIDs(t testing.TB, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// wantSameMsg fails unless got carries every caller-given field of want.
func wantSameMsg(t testing.TB, what string, got, want *base.TaskMessage) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: message is nil", what)
	}
	var diffs []string
	diff := func(field string, g, w any) {
		diffs = append(diffs, fmt.Sprintf("%s = %v, want %v", field, g, w))
	}
	if got.ID != want.ID {
		diff("ID", got.ID, want.ID)
	}
	if got.Type != want.Type {
		diff("Type", got.Type, want.Type)
	}
	if !bytes.Equal(got.Payload, want.Payload) {
		diff("Payload", fmt.Sprintf("%q", got.Payload), fmt.Sprintf("%q", want.Payload))
	}
	if got.Queue != want.Queue {
		diff("Queue", got.Queue, want.Queue)
	}
	if got.MaxRetry != want.MaxRetry {
		diff("MaxRetry", got.MaxRetry, want.MaxRetry)
	}
	if got.Timeout != want.Timeout {
		diff("Timeout", got.Timeout, want.Timeout)
	}
	if !got.Deadline.Equal(want.Deadline) {
		diff("Deadline", fmtTime(got.Deadline), fmtTime(want.Deadline))
	}
	if got.UniqueKey != want.UniqueKey {
		diff("UniqueKey", got.UniqueKey, want.UniqueKey)
	}
	if got.UniqueTTL != want.UniqueTTL {
		diff("UniqueTTL", got.UniqueTTL, want.UniqueTTL)
	}
	if got.Retention != want.Retention {
		diff("Retention", got.Retention, want.Retention)
	}
	if got.GroupKey != want.GroupKey {
		diff("GroupKey", got.GroupKey, want.GroupKey)
	}
	if got.Priority != want.Priority {
		diff("Priority", got.Priority, want.Priority)
	}
	if got.Key != want.Key {
		diff("Key", got.Key, want.Key)
	}
	if !maps.Equal(got.Headers, want.Headers) || (got.Headers == nil) != (want.Headers == nil) {
		diff("Headers", got.Headers, want.Headers)
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: message differs from the one enqueued: %v", what, diffs)
	}
}

// wantBookkeeping fails unless the fields a backend maintains are as given.
func wantBookkeeping(t testing.TB, what string, got *base.TaskMessage, retried int, lastErr string, lastFailedAt time.Time) {
	t.Helper()
	if got.Retried != retried {
		t.Fatalf("%s: Retried = %d, want %d", what, got.Retried, retried)
	}
	if got.LastErr != lastErr {
		t.Fatalf("%s: LastErr = %q, want %q", what, got.LastErr, lastErr)
	}
	wantTime(t, what+": LastFailedAt", got.LastFailedAt, lastFailedAt)
}

// subscribe subscribes for the rest of the test.
func (e *env) subscribe() <-chan broker.Event {
	e.Helper()
	ch, err := e.b.Subscribe(e.ctx)
	if err != nil {
		e.Fatalf("Subscribe: %v", err)
	}
	if ch == nil {
		e.Fatal("Subscribe returned a nil channel")
	}
	return ch
}

// waitEvent waits in real time for an event of kind for queue, skipping
// other events (of other queues, or resyncs).
func (e *env) waitEvent(ch <-chan broker.Event, kind broker.EventKind, queue string) {
	e.Helper()
	timer := time.NewTimer(eventTimeout)
	defer timer.Stop()
	var seen []broker.Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				e.Fatalf("event channel closed while waiting for event kind %d of queue %q (seen %v)", kind, queue, seen)
			}
			if ev.Kind == kind && ev.Queue == queue {
				return
			}
			seen = append(seen, ev)
		case <-timer.C:
			e.Fatalf("no event kind %d for queue %q within %v (seen %v)", kind, queue, eventTimeout, seen)
		}
	}
}
