package brokertest

import (
	"bytes"
	"fmt"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// same returns a copy of m that shares no memory with it: the message a
// caller sends again when it retries an Enqueue.
func same(m *base.TaskMessage) *base.TaskMessage {
	c := *m
	if m.Payload != nil {
		c.Payload = bytes.Clone(m.Payload)
	}
	return &c
}

// repeatTests check that Enqueue is idempotent: a task sent again with its
// ID and the same content (a retry whose first attempt was stored) is a
// success that changes nothing, in every state; other content under that
// ID is still ErrTaskIDConflict.
func repeatTests() []testCase {
	var cases []testCase
	for _, s := range allStates {
		cases = append(cases, testCase{"SameContentWhen" + capitalize(s.String()), func(e *env) { testRepeat(e, s) }})
	}
	return append(cases,
		testCase{"OtherContentConflicts", testRepeatOtherContent},
		testCase{"UniqueRepeatIsNotDuplicate", func(e *env) {
			first := e.uniqueMsg("default", "k", 10*time.Second)
			e.enqueue(first)
			wantNoErr(e, "Enqueue of the same unique task again", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: same(first)}))
			e.wantDuplicate("default", "k") // the lock is still first's
			e.advance(11 * time.Second)
			// The lock has expired; the repeat finds its ID first and
			// takes the lock again no more than it stores a second task.
			wantNoErr(e, "Enqueue of the same unique task after its lock expired", e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: same(first)}))
			second := e.wantUnlocked("default", "k")
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(first, second))
		}},
		testCase{"AfterDeletionStoresAgain", func(e *env) {
			// A task deleted when it completed is not remembered: the
			// same Enqueue stores it anew (documented in broker.Broker).
			m := e.add("default")
			e.complete(e.fetchID("default", m.ID).Ref())
			e.wantGone("default", m.ID)
			e.enqueue(same(m))
			e.wantState("default", m.ID, base.StatePending)
		}},
		testCase{"Batch", func(e *env) {
			a := e.add("default")
			b := e.newMsg("default")
			c := e.uniqueMsg("default", "k", time.Hour)
			otherA := same(a)
			otherA.Payload = []byte("other")
			ps := []broker.EnqueueParams{
				{Msg: same(a)}, // stored before the batch: success
				{Msg: otherA},  // other content under a's ID
				{Msg: b},       // new
				{Msg: same(b)}, // stored earlier in the batch
				{Msg: c},       // new, takes k
				{Msg: same(c)}, // stored earlier in the batch: not a duplicate of itself
				{Msg: same(a), ProcessAt: e.now().Add(time.Hour)}, // the due time is not compared
			}
			wantBatchErrs(e, e.b.EnqueueBatch(e.ctx, ps), nil, base.ErrTaskIDConflict, nil, nil, nil, nil, nil)
			wantSameMsg(e, "task a", e.info("default", a.ID).Message, a)
			e.wantDuplicate("default", "k")
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(a, b, c))
		}},
		testCase{"ConcurrentSameContentAllSucceed", func(e *env) {
			const n = 20
			m := &base.TaskMessage{ID: "the-id", Type: "t", Payload: []byte("p"), Queue: "default", UniqueKey: "k", UniqueTTL: time.Hour}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				msg := same(m)
				wg.Go(func() { errs[i] = e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: msg}) })
			}
			wg.Wait()
			for i, err := range errs {
				wantNoErr(e, fmt.Sprintf("enqueue %d of the same task", i), err)
			}
			wantIDs(e, "pending tasks", e.drain("default"), []string{"the-id"})
		}},
	)
}

// testRepeat enqueues a task in state, then the same task again with a
// different due time, and checks that the second call succeeds and
// changes nothing.
func testRepeat(e *env, state base.TaskState) {
	const q = "default"
	first, lease := e.inState(q, state)
	before := e.info(q, first.ID)

	err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: same(first), ProcessAt: e.now().Add(2 * time.Hour)})
	wantNoErr(e, "Enqueue again of a task that is "+state.String(), err)

	after := e.info(q, first.ID)
	if after.State != before.State {
		e.Fatalf("the task went from %v to %v", before.State, after.State)
	}
	wantSameMsg(e, "the task after the repeat", after.Message, first)
	wantBookkeeping(e, "the task after the repeat", after.Message, before.Message.Retried, before.Message.LastErr, before.Message.LastFailedAt)
	wantTime(e, "NextProcessAt after the repeat", after.NextProcessAt, before.NextProcessAt)
	wantTime(e, "LeaseDeadline after the repeat", after.LeaseDeadline, before.LeaseDeadline)
	wantTime(e, "CompletedAt after the repeat", after.CompletedAt, before.CompletedAt)
	if !bytes.Equal(after.Result, before.Result) {
		e.Fatalf("Result changed from %q to %q", before.Result, after.Result)
	}
	switch state {
	case base.StatePending:
		wantIDs(e, "pending tasks", e.drain(q), msgIDs(first))
	case base.StateActive:
		e.fetchNone(q)
		e.complete(lease.Ref()) // the lease still holds
	case base.StateScheduled, base.StateRetry:
		// Due in an hour (inState), not in the two hours the repeat asked.
		e.fetchNone(q)
		e.advance(time.Hour)
		e.wantForward(e.forward(q), 1, false, 0)
		wantIDs(e, "pending tasks", e.drain(q), msgIDs(first))
	default:
		e.fetchNone(q)
	}
}

// testRepeatOtherContent checks that each field a caller gives makes a
// task with a taken ID another task.
func testRepeatOtherContent(e *env) {
	const q = "default"
	first := e.newMsg(q)
	first.Payload = []byte{}
	first.UniqueKey, first.UniqueTTL = "k", time.Hour
	first.Deadline = e.now().Add(48 * time.Hour)
	first.Retention = time.Hour
	e.enqueue(first)
	for name, change := range map[string]func(m *base.TaskMessage){
		"Type":       func(m *base.TaskMessage) { m.Type = "other:type" },
		"Payload":    func(m *base.TaskMessage) { m.Payload = []byte("x") },
		"NilPayload": func(m *base.TaskMessage) { m.Payload = nil },
		"MaxRetry":   func(m *base.TaskMessage) { m.MaxRetry++ },
		"Timeout":    func(m *base.TaskMessage) { m.Timeout += time.Second },
		"Deadline":   func(m *base.TaskMessage) { m.Deadline = m.Deadline.Add(time.Nanosecond) },
		"NoDeadline": func(m *base.TaskMessage) { m.Deadline = time.Time{} },
		"UniqueKey":  func(m *base.TaskMessage) { m.UniqueKey = "k2" },
		"NoUnique":   func(m *base.TaskMessage) { m.UniqueKey, m.UniqueTTL = "", 0 },
		"UniqueTTL":  func(m *base.TaskMessage) { m.UniqueTTL += time.Second },
		"Retention":  func(m *base.TaskMessage) { m.Retention = 0 },
		"GroupKey":   func(m *base.TaskMessage) { m.GroupKey = "g" },
	} {
		m := same(first)
		change(m)
		wantErrIs(e, "Enqueue with the ID of a task and another "+name, e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}), base.ErrTaskIDConflict)
		errs := e.b.EnqueueBatch(e.ctx, []broker.EnqueueParams{{Msg: m}})
		if len(errs) != 1 {
			e.Fatalf("EnqueueBatch of 1 task returned %d results", len(errs))
		}
		wantErrIs(e, "EnqueueBatch with the ID of a task and another "+name, errs[0], base.ErrTaskIDConflict)
	}
	wantSameMsg(e, "the task after the conflicts", e.info(q, first.ID).Message, first)
	k2 := e.wantUnlocked(q, "k2") // no conflicting call took its key
	wantIDs(e, "pending tasks", e.drain(q), msgIDs(first, k2))
}
