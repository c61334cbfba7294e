package brokertest

import (
	"fmt"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// badMsg is a message that Enqueue must refuse.
type badMsg struct {
	name   string
	mutate func(m *base.TaskMessage)
	want   error
	// badKey is set when the queue name or ID itself is invalid, so that
	// the test does not look the task up by them.
	badKey bool
}

var badMsgs = []badMsg{
	{"EmptyType", func(m *base.TaskMessage) { m.Type = "" }, base.ErrInvalidArgument, false},
	{"TypeWithControlChar", func(m *base.TaskMessage) { m.Type = "send\nmail" }, base.ErrInvalidArgument, false},
	{"TypeTooLong", func(m *base.TaskMessage) { m.Type = strings.Repeat("t", base.MaxTypeLen+1) }, base.ErrInvalidArgument, false},
	{"EmptyID", func(m *base.TaskMessage) { m.ID = "" }, base.ErrInvalidArgument, true},
	{"IDWithControlChar", func(m *base.TaskMessage) { m.ID = "id\x00x" }, base.ErrInvalidArgument, true},
	{"IDTooLong", func(m *base.TaskMessage) { m.ID = strings.Repeat("i", base.MaxIDLen+1) }, base.ErrInvalidArgument, true},
	{"EmptyQueue", func(m *base.TaskMessage) { m.Queue = "" }, base.ErrInvalidArgument, true},
	{"QueueWithOpenBrace", func(m *base.TaskMessage) { m.Queue = "a{b" }, base.ErrInvalidArgument, true},
	{"QueueWithCloseBrace", func(m *base.TaskMessage) { m.Queue = "a}b" }, base.ErrInvalidArgument, true},
	{"QueueWithColon", func(m *base.TaskMessage) { m.Queue = "a:b" }, base.ErrInvalidArgument, true},
	{"QueueWithNewline", func(m *base.TaskMessage) { m.Queue = "a\nb" }, base.ErrInvalidArgument, true},
	{"QueueWithNUL", func(m *base.TaskMessage) { m.Queue = "a\x00b" }, base.ErrInvalidArgument, true},
	{"QueueWithDEL", func(m *base.TaskMessage) { m.Queue = "a\x7fb" }, base.ErrInvalidArgument, true},
	{"QueueNotUTF8", func(m *base.TaskMessage) { m.Queue = "a\xffb" }, base.ErrInvalidArgument, true},
	{"QueueTooLong", func(m *base.TaskMessage) { m.Queue = strings.Repeat("q", base.MaxQueueNameLen+1) }, base.ErrInvalidArgument, true},
	{"NegativeMaxRetry", func(m *base.TaskMessage) { m.MaxRetry = -1 }, base.ErrInvalidArgument, false},
	{"NegativeTimeout", func(m *base.TaskMessage) { m.Timeout = -time.Second }, base.ErrInvalidArgument, false},
	{"NegativeRetention", func(m *base.TaskMessage) { m.Retention = -time.Second }, base.ErrInvalidArgument, false},
	{"UniqueTTLZero", func(m *base.TaskMessage) { m.UniqueKey = "k"; m.UniqueTTL = 0 }, base.ErrInvalidArgument, false},
	{"UniqueTTLUnderOneSecond", func(m *base.TaskMessage) { m.UniqueKey = "k"; m.UniqueTTL = 999 * time.Millisecond }, base.ErrInvalidArgument, false},
	{"GroupKeyWithColon", func(m *base.TaskMessage) { m.GroupKey = "g:1" }, base.ErrInvalidArgument, false},
	{"GroupKeyTooLong", func(m *base.TaskMessage) { m.GroupKey = strings.Repeat("g", base.MaxQueueNameLen+1) }, base.ErrInvalidArgument, false},
	{"PayloadTooLarge", func(m *base.TaskMessage) { m.Payload = make([]byte, base.MaxPayloadSize+1) }, base.ErrPayloadTooLarge, false},
}

func validationTests() []testCase {
	var cases []testCase
	for _, bm := range badMsgs {
		cases = append(cases, testCase{"Enqueue" + bm.name, func(e *env) { testBadEnqueue(e, bm) }})
	}
	cases = append(cases,
		testCase{"EnqueueNilMessage", func(e *env) {
			err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: nil})
			wantErrIs(e, "Enqueue of a nil message", err, base.ErrInvalidArgument)
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues = %v, want none", qs)
			}
		}},
		testCase{"EnqueueBatchBadEntries", func(e *env) {
			ps := make([]broker.EnqueueParams, 0, len(badMsgs)+1)
			for _, bm := range badMsgs {
				m := e.newMsg("valid")
				bm.mutate(m)
				ps = append(ps, broker.EnqueueParams{Msg: m})
			}
			ps = append(ps, broker.EnqueueParams{Msg: nil})
			errs := e.b.EnqueueBatch(e.ctx, ps)
			if len(errs) != len(ps) {
				e.Fatalf("EnqueueBatch of %d tasks returned %d results", len(ps), len(errs))
			}
			for i, bm := range badMsgs {
				wantErrIs(e, "EnqueueBatch entry "+bm.name, errs[i], bm.want)
			}
			wantErrIs(e, "EnqueueBatch entry with a nil message", errs[len(ps)-1], base.ErrInvalidArgument)
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues after a batch of invalid tasks = %v, want none", qs)
			}
			e.fetchNone("valid")
		}},
		testCase{"QueueNameAtLimit", func(e *env) {
			q := strings.Repeat("q", base.MaxQueueNameLen)
			m := e.add(q)
			e.fetchID(q, m.ID)
		}},
		testCase{"QueueNameUnicode", func(e *env) {
			const q = "очередь-日本-é/x.y"
			m := e.add(q)
			e.fetchID(q, m.ID)
			if qs := e.queues(); len(qs) != 1 || qs[0] != q {
				e.Fatalf("Queues = %q, want [%q]", qs, q)
			}
		}},
		testCase{"PayloadAtLimit", func(e *env) {
			m := e.newMsg("default")
			m.Payload = make([]byte, base.MaxPayloadSize)
			m.Payload[0], m.Payload[len(m.Payload)-1] = 1, 2
			e.enqueue(m)
			l := e.fetchID("default", m.ID)
			if len(l.Msg.Payload) != base.MaxPayloadSize || l.Msg.Payload[0] != 1 || l.Msg.Payload[base.MaxPayloadSize-1] != 2 {
				e.Fatalf("payload of %d bytes came back as %d bytes or altered", base.MaxPayloadSize, len(l.Msg.Payload))
			}
		}},
		testCase{"FetchMaxZero", func(e *env) {
			m := e.add("default")
			_, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: 0, LeaseDuration: leaseFor})
			wantErrIs(e, "Fetch with Max 0", err, base.ErrInvalidArgument)
			e.wantState("default", m.ID, base.StatePending)
		}},
		testCase{"FetchNegativeMax", func(e *env) {
			m := e.add("default")
			_, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: -1, LeaseDuration: leaseFor})
			wantErrIs(e, "Fetch with Max -1", err, base.ErrInvalidArgument)
			e.wantState("default", m.ID, base.StatePending)
		}},
		testCase{"FetchNoLeaseDuration", func(e *env) {
			m := e.add("default")
			_, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: "default", Max: 1})
			wantErrIs(e, "Fetch with LeaseDuration 0", err, base.ErrInvalidArgument)
			e.wantState("default", m.ID, base.StatePending)
		}},
		testCase{"BadQueueName", func(e *env) {
			// Every method that takes a queue name refuses an invalid one.
			for _, q := range []string{"", "a:b", "{a}", "a\nb", strings.Repeat("q", base.MaxQueueNameLen+1)} {
				calls := map[string]func() error{
					"Fetch": func() error {
						_, err := e.b.Fetch(e.ctx, broker.FetchParams{Queue: q, Max: 1, LeaseDuration: leaseFor})
						return err
					},
					"ExtendLeases": func() error {
						_, err := e.b.ExtendLeases(e.ctx, q, []broker.LeaseRef{{Queue: q, ID: "x", Token: "t"}}, leaseFor)
						return err
					},
					"ExpiredLeases": func() error { _, err := e.b.ExpiredLeases(e.ctx, q, 10); return err },
					"Forward":       func() error { _, err := e.b.Forward(e.ctx, q, 10); return err },
					"DeleteExpiredCompleted": func() error {
						_, err := e.b.DeleteExpiredCompleted(e.ctx, q, 10)
						return err
					},
					"GetTaskInfo": func() error { _, err := e.b.GetTaskInfo(e.ctx, q, "x"); return err },
					"DeleteTask":  func() error { return e.b.DeleteTask(e.ctx, q, "x") },
				}
				for name, call := range calls {
					wantErrIs(e, fmt.Sprintf("%s of queue %q", name, q), call(), base.ErrInvalidArgument)
				}
			}
			if qs := e.queues(); len(qs) != 0 {
				e.Fatalf("Queues = %q, want none", qs)
			}
		}},
		testCase{"LimitsBelowOne", func(e *env) {
			e.add("default")
			for _, limit := range []int{0, -1} {
				_, err := e.b.Forward(e.ctx, "default", limit)
				wantErrIs(e, fmt.Sprintf("Forward limit %d", limit), err, base.ErrInvalidArgument)
				_, err = e.b.ExpiredLeases(e.ctx, "default", limit)
				wantErrIs(e, fmt.Sprintf("ExpiredLeases limit %d", limit), err, base.ErrInvalidArgument)
				_, err = e.b.DeleteExpiredCompleted(e.ctx, "default", limit)
				wantErrIs(e, fmt.Sprintf("DeleteExpiredCompleted limit %d", limit), err, base.ErrInvalidArgument)
			}
		}},
		testCase{"ExtendNonPositive", func(e *env) {
			m := e.add("default")
			l := e.fetchID("default", m.ID)
			for _, d := range []time.Duration{0, -time.Second} {
				_, err := e.b.ExtendLeases(e.ctx, "default", []broker.LeaseRef{l.Ref()}, d)
				wantErrIs(e, fmt.Sprintf("ExtendLeases by %v", d), err, base.ErrInvalidArgument)
			}
			wantTime(e, "LeaseDeadline", e.wantState("default", m.ID, base.StateActive).LeaseDeadline, l.Deadline)
		}},
		testCase{"BadServerState", func(e *env) {
			good := &base.ServerInfo{ID: "s1", Host: "h", PID: 1, Concurrency: 1, Started: e.now()}
			err := e.b.WriteServerState(e.ctx, nil, time.Minute)
			wantErrIs(e, "WriteServerState of nil", err, base.ErrInvalidArgument)
			err = e.b.WriteServerState(e.ctx, &base.ServerInfo{Host: "h"}, time.Minute)
			wantErrIs(e, "WriteServerState without an ID", err, base.ErrInvalidArgument)
			err = e.b.WriteServerState(e.ctx, good, 0)
			wantErrIs(e, "WriteServerState with ttl 0", err, base.ErrInvalidArgument)
			wantNoErr(e, "WriteServerState", e.b.WriteServerState(e.ctx, good, time.Minute))
		}},
	)
	return cases
}

// testBadEnqueue enqueues a message made invalid by bm and checks that the
// error is the expected one and that nothing was written.
func testBadEnqueue(e *env, bm badMsg) {
	m := e.newMsg("valid")
	bm.mutate(m)
	err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m})
	wantErrIs(e, "Enqueue", err, bm.want)
	// Also refused when scheduled or in a batch.
	err = e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m, ProcessAt: e.now().Add(time.Hour)})
	wantErrIs(e, "Enqueue with ProcessAt", err, bm.want)

	if qs := e.queues(); len(qs) != 0 {
		e.Fatalf("Queues after a refused enqueue = %q, want none", qs)
	}
	if !bm.badKey {
		e.wantGone(m.Queue, m.ID)
		e.fetchNone(m.Queue)
		e.advance(2 * time.Hour)
		e.wantForward(e.forward(m.Queue), 0, false, 0)
	}
	if m.UniqueKey != "" {
		// The refused message must not have taken its uniqueness lock.
		ok := e.newMsg("valid")
		ok.UniqueKey, ok.UniqueTTL = m.UniqueKey, time.Hour
		e.enqueue(ok)
	}
}
