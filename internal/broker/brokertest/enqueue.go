package brokertest

import (
	"bytes"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func enqueueTests() []testCase {
	cases := []testCase{
		{"Pending", func(e *env) {
			m := e.add("default")
			ti := e.wantState("default", m.ID, base.StatePending)
			wantSameMsg(e, "GetTaskInfo", ti.Message, m)
			wantBookkeeping(e, "new task", ti.Message, 0, "", time.Time{})
			wantTime(e, "NextProcessAt of a pending task", ti.NextProcessAt, e.now())
			wantTime(e, "LeaseDeadline of a pending task", ti.LeaseDeadline, time.Time{})
			wantTime(e, "CompletedAt of a pending task", ti.CompletedAt, time.Time{})
			l := e.fetchID("default", m.ID)
			wantSameMsg(e, "fetched message", l.Msg, m)
		}},
		{"ProcessAtPastIsPending", func(e *env) {
			m := e.newMsg("default")
			e.enqueueAt(m, e.now().Add(-time.Hour))
			e.wantState("default", m.ID, base.StatePending)
			e.fetchID("default", m.ID)
		}},
		{"ProcessAtNowIsPending", func(e *env) {
			m := e.newMsg("default")
			e.enqueueAt(m, e.now())
			e.wantState("default", m.ID, base.StatePending)
			e.fetchID("default", m.ID)
		}},
		{"Scheduled", func(e *env) {
			m := e.newMsg("default")
			at := e.now().Add(90 * time.Second)
			e.enqueueAt(m, at)
			ti := e.wantState("default", m.ID, base.StateScheduled)
			wantSameMsg(e, "GetTaskInfo", ti.Message, m)
			wantTime(e, "NextProcessAt of a scheduled task", ti.NextProcessAt, at)
			wantTime(e, "LeaseDeadline of a scheduled task", ti.LeaseDeadline, time.Time{})
			e.fetchNone("default")
			if qs := e.queues(); len(qs) != 1 || qs[0] != "default" {
				e.Fatalf("Queues after a scheduled enqueue = %v, want [default]", qs)
			}
		}},
		{"Aggregating", func(e *env) {
			m := e.newMsg("default")
			m.GroupKey = "batch-1"
			e.enqueue(m)
			ti := e.wantState("default", m.ID, base.StateAggregating)
			wantSameMsg(e, "GetTaskInfo", ti.Message, m)
			wantTime(e, "NextProcessAt of an aggregating task", ti.NextProcessAt, time.Time{})
			e.fetchNone("default")
			e.advance(24 * time.Hour)
			e.wantForward(e.forward("default"), 0, false, 0)
			e.wantState("default", m.ID, base.StateAggregating)
		}},
		{"AggregatingIgnoresProcessAt", func(e *env) {
			m := e.newMsg("default")
			m.GroupKey = "batch-1"
			e.enqueueAt(m, e.now().Add(time.Hour))
			e.wantState("default", m.ID, base.StateAggregating)
			e.advance(2 * time.Hour)
			e.wantForward(e.forward("default"), 0, false, 0)
			e.fetchNone("default")
		}},
		{"FieldsRoundTrip", func(e *env) {
			payload := make([]byte, 1000)
			for i := range payload {
				payload[i] = byte(i * 7) // every byte value, NULs included
			}
			m := &base.TaskMessage{
				ID:        "round-trip-ünïcode",
				Type:      "email:send/✉",
				Payload:   payload,
				Queue:     "critical",
				MaxRetry:  25,
				Timeout:   90 * time.Second,
				Deadline:  Epoch.Add(48 * time.Hour),
				UniqueKey: "user:42/welcome",
				UniqueTTL: time.Hour,
				Retention: 3 * time.Hour,
			}
			e.enqueue(m)
			wantSameMsg(e, "GetTaskInfo", e.info("critical", m.ID).Message, m)
			l := e.fetchID("critical", m.ID)
			wantSameMsg(e, "fetched message", l.Msg, m)
		}},
		{"HeadersRoundTrip", func(e *env) {
			// Propagated headers stay with the task through every state.
			m := e.newMsg("default")
			m.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "k=v", "x": ""}
			e.enqueueAt(m, e.now().Add(time.Minute))
			wantSameMsg(e, "scheduled task", e.info("default", m.ID).Message, m)
			e.advance(time.Minute)
			e.forward("default")
			l := e.fetchID("default", m.ID)
			wantSameMsg(e, "fetched message", l.Msg, m)
			e.retry(l.Ref(), time.Second, "boom")
			wantSameMsg(e, "task in retry", e.info("default", m.ID).Message, m)
			e.advance(time.Second)
			e.forward("default")
			l = e.fetchID("default", m.ID)
			wantSameMsg(e, "fetched again", l.Msg, m)
			e.archive(l.Ref(), "boom")
			wantSameMsg(e, "archived task", e.info("default", m.ID).Message, m)

			plain := e.add("default")
			if got := e.fetchID("default", plain.ID).Msg.Headers; got != nil {
				e.Fatalf("a task enqueued without headers is fetched with Headers %#v, want nil", got)
			}
		}},
		{"HeadersAreNotContent", func(e *env) {
			// An enqueue repeated from another trace is the same task.
			m := e.newMsg("default")
			m.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			e.enqueue(m)
			again := *m
			again.Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
			e.enqueue(&again)
			noHeaders := *m
			noHeaders.Headers = nil
			e.enqueue(&noHeaders)
			wantSameMsg(e, "task after the repeats", e.info("default", m.ID).Message, m)
			ps := []broker.EnqueueParams{{Msg: &again}}
			wantBatchErrs(e, e.b.EnqueueBatch(e.ctx, ps), nil)
			wantSameMsg(e, "task after a repeat in a batch", e.info("default", m.ID).Message, m)
		}},
		{"HeadersInBatch", func(e *env) {
			with, without := e.newMsg("default"), e.newMsg("default")
			with.Headers = map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
			wantBatchErrs(e, e.b.EnqueueBatch(e.ctx, []broker.EnqueueParams{{Msg: with}, {Msg: without}}), nil, nil)
			wantSameMsg(e, "fetched message with headers", e.fetchID("default", with.ID).Msg, with)
			wantSameMsg(e, "fetched message without", e.fetchID("default", without.ID).Msg, without)
		}},
		{"EmptyPayload", func(e *env) {
			m := e.newMsg("default")
			m.Payload = nil
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			if len(l.Msg.Payload) != 0 {
				e.Fatalf("payload of a task enqueued without one = %q, want empty", l.Msg.Payload)
			}
		}},
		{"RegistersQueue", func(e *env) {
			e.add("emails")
			if qs := e.queues(); len(qs) != 1 || qs[0] != "emails" {
				e.Fatalf("Queues = %v, want [emails]", qs)
			}
		}},
		{"SameIDInOtherQueue", func(e *env) {
			a := e.newMsg("a")
			b := *a
			b.Queue = "b"
			b.Payload = []byte("other")
			e.enqueue(a)
			e.enqueue(&b)
			wantSameMsg(e, "task in queue a", e.info("a", a.ID).Message, a)
			wantSameMsg(e, "task in queue b", e.info("b", b.ID).Message, &b)
		}},
		{"DuplicateWritesNothing", func(e *env) {
			first := e.newMsg("default")
			first.UniqueKey = "report:7"
			first.UniqueTTL = time.Hour
			e.enqueue(first)
			before := e.info("default", first.ID)

			second := e.newMsg("default")
			second.UniqueKey = "report:7"
			second.UniqueTTL = time.Hour
			err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: second, ProcessAt: e.now().Add(time.Minute)})
			wantErrIs(e, "Enqueue with a locked unique key", err, base.ErrDuplicateTask)

			e.wantGone("default", second.ID)
			after := e.info("default", first.ID)
			wantSameMsg(e, "first task after the duplicate", after.Message, first)
			if after.State != before.State {
				e.Fatalf("first task went from %v to %v", before.State, after.State)
			}
			e.advance(2 * time.Minute)
			e.wantForward(e.forward("default"), 0, false, 0)
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(first))
		}},
	}
	for _, s := range allStates {
		cases = append(cases, testCase{"IDConflictWith" + capitalize(s.String()), func(e *env) { testIDConflict(e, s) }})
	}
	return cases
}

// testIDConflict enqueues a task with the ID of a task in state and checks
// that it fails with ErrTaskIDConflict and writes nothing: not the message,
// not a schedule entry, not its uniqueness lock.
func testIDConflict(e *env, state base.TaskState) {
	const q = "default"
	first, _ := e.inState(q, state)
	before := e.info(q, first.ID)

	second := &base.TaskMessage{
		ID:        first.ID,
		Type:      "other:type",
		Payload:   []byte("second payload"),
		Queue:     q,
		UniqueKey: "conflict-key",
		UniqueTTL: time.Hour,
	}
	err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: second, ProcessAt: e.now().Add(time.Minute)})
	wantErrIs(e, "Enqueue with the ID of a "+state.String()+" task", err, base.ErrTaskIDConflict)

	after := e.info(q, first.ID)
	if after.State != before.State {
		e.Fatalf("the first task went from %v to %v", before.State, after.State)
	}
	wantSameMsg(e, "the first task after the conflict", after.Message, first)
	wantTime(e, "NextProcessAt after the conflict", after.NextProcessAt, before.NextProcessAt)
	wantTime(e, "LeaseDeadline after the conflict", after.LeaseDeadline, before.LeaseDeadline)
	if !bytes.Equal(after.Result, before.Result) {
		e.Fatalf("Result changed from %q to %q", before.Result, after.Result)
	}

	// The conflicting enqueue must not have taken the uniqueness lock.
	third := e.newMsg(q)
	third.UniqueKey = "conflict-key"
	third.UniqueTTL = time.Hour
	third.GroupKey = "g-third" // keeps it out of the pending list
	e.enqueue(third)

	// Nor added a schedule entry: in two minutes nothing is due (retry and
	// scheduled tasks of inState are due in an hour).
	e.advance(2 * time.Minute)
	r := e.forward(q)
	if r.Moved != 0 {
		e.Fatalf("Forward moved %d tasks, want 0: the failed enqueue left a schedule entry", r.Moved)
	}
	e.wantState(q, first.ID, before.State)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
