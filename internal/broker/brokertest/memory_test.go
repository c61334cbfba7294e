package brokertest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokertest"
)

// TestMemory runs the suite against memBroker, a straightforward
// in-memory reading of the broker.Broker doc comments. It proves the suite
// itself: a test that fails here is a bug of the suite (or of the
// reference), not of a backend.
func TestMemory(t *testing.T) {
	brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
		b := newMemBroker(clock)
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}

type memTask struct {
	msg         *base.TaskMessage
	state       base.TaskState
	due         time.Time // scheduled, retry
	deadline    time.Time // active
	token       string
	result      []byte
	completedAt time.Time
	memAdminTask
}

type memLock struct {
	id      string
	expires time.Time
}

type memQueue struct {
	tasks   map[string]*memTask
	pending []string // in the order they became pending (see memory_lanes_test.go)
	locks   map[string]memLock
	fair    memFair
	memAdminQueue
}

type memBroker struct {
	clock  clockwork.Clock
	mu     sync.Mutex
	closed bool
	queues map[string]*memQueue
	subs   map[chan broker.Event]struct{}
	meta   map[string][]byte
	memAdminBroker
	memLogs
	workflows map[string]*memWorkflow
}

var _ broker.Broker = (*memBroker)(nil)
var _ brokertest.InvariantChecker = (*memBroker)(nil)

func newMemBroker(clock clockwork.Clock) *memBroker {
	return &memBroker{clock: clock, queues: map[string]*memQueue{}, subs: map[chan broker.Event]struct{}{},
		memAdminBroker: newMemAdminBroker(), memLogs: newMemLogs(), workflows: map[string]*memWorkflow{}}
}

func cloneMsg(m *base.TaskMessage) *base.TaskMessage {
	c := *m
	c.Payload = slices.Clone(m.Payload)
	c.Headers = maps.Clone(m.Headers)
	return &c
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lock takes mu and fails when closed.
func (b *memBroker) lock() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return base.ErrStorageClosed
	}
	return nil
}

func (b *memBroker) queue(name string) *memQueue {
	q := b.queues[name]
	if q == nil {
		q = &memQueue{tasks: map[string]*memTask{}, locks: map[string]memLock{}, memAdminQueue: newMemAdminQueue()}
		b.queues[name] = q
	}
	return q
}

func (b *memBroker) publish(kind broker.EventKind, queue string) {
	b.publishEvent(broker.Event{Kind: kind, Queue: queue})
}

func (b *memBroker) publishEvent(ev broker.Event) {
	for ch := range b.subs {
		select {
		case ch <- ev:
		default:
		}
	}
}

func (b *memBroker) Ping(context.Context) error {
	if err := b.lock(); err != nil {
		return err
	}
	b.mu.Unlock()
	return nil
}

func (b *memBroker) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return base.ErrStorageClosed
	}
	b.closed = true
	return nil
}

func (b *memBroker) Now(context.Context) (time.Time, error) {
	if err := b.lock(); err != nil {
		return time.Time{}, err
	}
	defer b.mu.Unlock()
	return b.clock.Now(), nil
}

func (b *memBroker) Enqueue(_ context.Context, p broker.EnqueueParams) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	return b.enqueueLocked(p)
}

func (b *memBroker) enqueueLocked(p broker.EnqueueParams) error {
	if p.Msg == nil {
		return fmt.Errorf("%w: nil message", base.ErrInvalidArgument)
	}
	if err := p.Msg.Validate(); err != nil {
		return err
	}
	if err := refuseWorkflowMsg(p.Msg); err != nil {
		return err
	}
	now := b.clock.Now()
	if q := b.queues[p.Msg.Queue]; q != nil {
		if t, ok := q.tasks[p.Msg.ID]; ok {
			if t.msg.SameEnqueue(p.Msg) {
				return nil // stored by an earlier attempt
			}
			return base.ErrTaskIDConflict
		}
		if p.Msg.UniqueKey != "" {
			if l, ok := q.locks[p.Msg.UniqueKey]; ok && now.Before(l.expires) {
				return base.ErrDuplicateTask
			}
		}
	}
	q := b.queue(p.Msg.Queue)
	t := &memTask{msg: cloneMsg(p.Msg)}
	t.since, t.seq = now, b.nextSeq()
	switch {
	case p.Msg.GroupKey != "":
		t.state = base.StateAggregating
	case p.ProcessAt.After(now):
		t.state, t.due = base.StateScheduled, p.ProcessAt
		b.publish(broker.EventScheduled, p.Msg.Queue)
	default:
		t.state = base.StatePending
	}
	q.tasks[p.Msg.ID] = t
	if t.state == base.StatePending {
		b.pushPending(q, p.Msg.Queue, t, false)
	}
	if p.Msg.UniqueKey != "" {
		q.locks[p.Msg.UniqueKey] = memLock{id: p.Msg.ID, expires: now.Add(p.Msg.UniqueTTL)}
	}
	b.logEvent(p.Msg.Queue, broker.LogEnqueued, p.Msg.ID, t.state, "")
	return nil
}

func (b *memBroker) pushPending(q *memQueue, name string, t *memTask, head bool) {
	if len(q.pending) == 0 {
		b.publish(broker.EventReady, name)
	}
	if head {
		q.pending = append([]string{t.msg.ID}, q.pending...)
	} else {
		q.pending = append(q.pending, t.msg.ID)
	}
	q.pushed(t)
}

func (b *memBroker) EnqueueBatch(_ context.Context, ps []broker.EnqueueParams) []error {
	errs := make([]error, len(ps))
	if err := b.lock(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer b.mu.Unlock()
	for i, p := range ps {
		errs[i] = b.enqueueLocked(p)
	}
	return errs
}

func (b *memBroker) Fetch(_ context.Context, p broker.FetchParams) ([]*broker.Lease, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := base.ValidateQueueName(p.Queue); err != nil {
		return nil, err
	}
	if p.Max < 1 || p.LeaseDuration <= 0 {
		return nil, fmt.Errorf("%w: Max %d, LeaseDuration %v", base.ErrInvalidArgument, p.Max, p.LeaseDuration)
	}
	q := b.queues[p.Queue]
	if q == nil || q.paused {
		return nil, nil
	}
	max, lease, err := b.allowed(q, p)
	if err != nil {
		return nil, err
	}
	var out []*broker.Lease
	var wait time.Duration
	deadline := b.clock.Now().Add(lease)
	for len(out) < max {
		id, ok, w := q.takeNext(b.clock.Now())
		if !ok {
			wait = w
			break
		}
		t := q.tasks[id]
		t.state, t.deadline, t.token = base.StateActive, deadline, p.ServerID+"/"+newToken()
		out = append(out, &broker.Lease{Msg: cloneMsg(t.msg), Token: t.token, Deadline: deadline, Duration: lease})
		b.logEvent(p.Queue, broker.LogStarted, id, base.StateActive, "")
	}
	b.spend(q, len(out))
	if len(out) == 0 && wait > 0 {
		return nil, &broker.ThrottledError{Queue: p.Queue, RetryIn: wait}
	}
	return out, nil
}

// held returns the active task l holds, or ErrLeaseLost.
func (b *memBroker) held(l broker.LeaseRef) (*memQueue, *memTask, error) {
	q := b.queues[l.Queue]
	if q == nil {
		return nil, nil, base.ErrLeaseLost
	}
	t := q.tasks[l.ID]
	if t == nil || t.state != base.StateActive || t.token != l.Token {
		return nil, nil, base.ErrLeaseLost
	}
	return q, t, nil
}

func (q *memQueue) unlock(t *memTask) {
	if k := t.msg.UniqueKey; k != "" && q.locks[k].id == t.msg.ID {
		delete(q.locks, k)
	}
}

func (b *memBroker) Complete(_ context.Context, ls []broker.LeaseRef) []error {
	errs := make([]error, len(ls))
	if err := b.lock(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer b.mu.Unlock()
	now := b.clock.Now()
	var done []*memTask
	defer func() {
		// After every completion of the call is logged.
		for _, t := range done {
			b.wfFinish(t, base.OutcomeSucceeded, "", t.result)
		}
	}()
	for i, l := range ls {
		q, t, err := b.held(l)
		if err != nil {
			errs[i] = err
			continue
		}
		q.unlock(t)
		q.count(now, false)
		b.release(q, l.Queue, t)
		done = append(done, t)
		t.keep = t.msg.Retention
		if t.watched {
			b.publishEvent(broker.Event{Kind: broker.EventDone, Queue: l.Queue, TaskID: l.ID})
			if t.keep == 0 {
				t.keep = broker.WatchGrace
			}
		}
		if t.keep > 0 {
			t.state, t.completedAt, t.token, t.deadline = base.StateCompleted, now, "", time.Time{}
			b.logEvent(l.Queue, broker.LogSucceeded, l.ID, base.StateCompleted, "")
		} else {
			delete(q.tasks, l.ID)
			b.logEvent(l.Queue, broker.LogSucceeded, l.ID, 0, "")
		}
	}
	return errs
}

func (b *memBroker) fail(l broker.LeaseRef, requireExpired bool, errMsg string, retried int) (*memTask, error) {
	q, t, err := b.held(l)
	if err != nil {
		return nil, err
	}
	now := b.clock.Now()
	if requireExpired && now.Before(t.deadline) {
		return nil, base.ErrLeaseLost
	}
	b.release(q, l.Queue, t)
	t.msg.Retried += retried
	t.msg.LastErr, t.msg.LastFailedAt = errMsg, now
	t.token, t.deadline = "", time.Time{}
	return t, nil
}

func (b *memBroker) Retry(_ context.Context, p broker.RetryParams) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if _, t, err := b.held(p.Lease); err == nil {
		if w := b.workflows[t.msg.Workflow]; t.msg.Workflow != "" && w != nil && w.canceled {
			return b.archiveLocked(broker.ArchiveParams{Lease: p.Lease, ErrMsg: p.ErrMsg, RequireExpired: p.RequireExpired})
		}
	}
	retried := 0
	if p.IsFailure {
		retried = 1
	}
	t, err := b.fail(p.Lease, p.RequireExpired, p.ErrMsg, retried)
	if err != nil {
		return err
	}
	b.queues[p.Lease.Queue].count(b.clock.Now(), p.IsFailure)
	t.state, t.due = base.StateRetry, b.clock.Now().Add(p.Delay)
	b.publish(broker.EventScheduled, p.Lease.Queue)
	b.logEvent(p.Lease.Queue, broker.LogFailed, p.Lease.ID, base.StateRetry, p.ErrMsg)
	return nil
}

func (b *memBroker) Archive(_ context.Context, p broker.ArchiveParams) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	return b.archiveLocked(p)
}

func (b *memBroker) archiveLocked(p broker.ArchiveParams) error {
	t, err := b.fail(p.Lease, p.RequireExpired, p.ErrMsg, 0)
	if err != nil {
		return err
	}
	b.queues[p.Lease.Queue].count(b.clock.Now(), true)
	t.state, t.archivedAt = base.StateArchived, b.clock.Now()
	b.logEvent(p.Lease.Queue, broker.LogFailed, p.Lease.ID, base.StateArchived, p.ErrMsg)
	if t.watched {
		b.publishEvent(broker.Event{Kind: broker.EventDone, Queue: p.Lease.Queue, TaskID: p.Lease.ID})
	}
	b.wfFinish(t, base.OutcomeFailed, p.ErrMsg, nil)
	return nil
}

func (b *memBroker) Requeue(_ context.Context, l broker.LeaseRef) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	q, t, err := b.held(l)
	if err != nil {
		return err
	}
	t.state, t.token, t.deadline, t.since = base.StatePending, "", time.Time{}, b.clock.Now()
	b.pushPending(q, l.Queue, t, true)
	b.release(q, l.Queue, t)
	b.logEvent(l.Queue, broker.LogRetried, l.ID, base.StatePending, "")
	return nil
}

func (b *memBroker) ExtendLeases(_ context.Context, queue string, ls []broker.LeaseRef, d time.Duration) ([]string, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := checkArgs(queue, 1); err != nil {
		return nil, err
	}
	if d <= 0 {
		return nil, base.ErrInvalidArgument
	}
	var lost []string
	for _, l := range ls {
		l.Queue = queue
		_, t, err := b.held(l)
		if err != nil || !b.clock.Now().Before(t.deadline) {
			lost = append(lost, l.ID)
			continue
		}
		t.deadline = b.clock.Now().Add(d)
	}
	return lost, nil
}

func (b *memBroker) ExpiredLeases(_ context.Context, queue string, limit int) ([]*broker.Lease, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := checkArgs(queue, limit); err != nil {
		return nil, err
	}
	q := b.queues[queue]
	if q == nil {
		return nil, nil
	}
	now := b.clock.Now()
	var out []*broker.Lease
	for _, t := range q.tasks {
		if len(out) >= limit {
			break
		}
		if t.state == base.StateActive && !now.Before(t.deadline) {
			out = append(out, &broker.Lease{Msg: cloneMsg(t.msg), Token: t.token, Deadline: t.deadline})
		}
	}
	return out, nil
}

func (b *memBroker) WriteResult(_ context.Context, l broker.LeaseRef, data []byte) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	_, t, err := b.held(l)
	if err != nil {
		return err
	}
	t.result = slices.Clone(data)
	return nil
}

func (b *memBroker) Forward(_ context.Context, queue string, limit int) (broker.ForwardResult, error) {
	if err := b.lock(); err != nil {
		return broker.ForwardResult{}, err
	}
	defer b.mu.Unlock()
	if err := checkArgs(queue, limit); err != nil {
		return broker.ForwardResult{}, err
	}
	q := b.queues[queue]
	if q == nil {
		return broker.ForwardResult{}, nil
	}
	var waiting []*memTask
	for _, t := range q.tasks {
		if t.state == base.StateScheduled || t.state == base.StateRetry {
			waiting = append(waiting, t)
		}
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].due.Before(waiting[j].due) })
	now := b.clock.Now()
	var r broker.ForwardResult
	for _, t := range waiting {
		if t.due.After(now) {
			r.HasNext, r.NextIn = true, t.due.Sub(now)
			break
		}
		if r.Moved == limit {
			r.HasNext, r.NextIn = true, 0
			break
		}
		if t.state == base.StateRetry {
			b.logEvent(queue, broker.LogRetried, t.msg.ID, base.StatePending, "")
		}
		t.state, t.due, t.since = base.StatePending, time.Time{}, now
		b.pushPending(q, queue, t, false)
		r.Moved++
	}
	return r, nil
}

func (b *memBroker) DeleteExpiredCompleted(_ context.Context, queue string, limit int) (int, error) {
	if err := b.lock(); err != nil {
		return 0, err
	}
	defer b.mu.Unlock()
	if err := checkArgs(queue, limit); err != nil {
		return 0, err
	}
	q := b.queues[queue]
	if q == nil {
		return 0, nil
	}
	now := b.clock.Now()
	n := 0
	for id, t := range q.tasks {
		if n == limit {
			break
		}
		if t.state == base.StateCompleted && !now.Before(t.completedAt.Add(t.keep)) {
			delete(q.tasks, id)
			n++
		}
	}
	return n, nil
}

func (b *memBroker) GetTaskInfo(_ context.Context, queue, id string) (*base.TaskInfo, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	if err := checkArgs(queue, 1); err != nil {
		return nil, err
	}
	q := b.queues[queue]
	if q == nil || q.tasks[id] == nil {
		return nil, base.ErrTaskNotFound
	}
	t := q.tasks[id]
	ti := &base.TaskInfo{Message: cloneMsg(t.msg), State: t.state, Result: slices.Clone(t.result)}
	switch t.state {
	case base.StatePending:
		ti.NextProcessAt = b.clock.Now()
	case base.StateScheduled, base.StateRetry:
		ti.NextProcessAt = t.due
	case base.StateActive:
		ti.LeaseDeadline = t.deadline
	case base.StateCompleted:
		ti.CompletedAt = t.completedAt
	}
	return ti, nil
}

func (b *memBroker) DeleteTask(_ context.Context, queue, id string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if err := checkArgs(queue, 1); err != nil {
		return err
	}
	q := b.queues[queue]
	if q == nil || q.tasks[id] == nil {
		return base.ErrTaskNotFound
	}
	t := q.tasks[id]
	if t.state == base.StateActive {
		return base.ErrWrongState
	}
	if t.state == base.StatePending {
		q.removePending(id)
	}
	q.unlock(t)
	delete(q.tasks, id)
	b.logEvent(queue, broker.LogDeleted, id, 0, "")
	b.wfFinish(t, base.OutcomeDeleted, "", nil)
	return nil
}

func (b *memBroker) Queues(context.Context) ([]string, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	qs := make([]string, 0, len(b.queues))
	for name := range b.queues {
		qs = append(qs, name)
	}
	sort.Strings(qs)
	return qs, nil
}

func (b *memBroker) Subscribe(ctx context.Context) (<-chan broker.Event, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	ch := make(chan broker.Event, 64)
	b.subs[ch] = struct{}{}
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		delete(b.subs, ch)
		close(ch)
		b.mu.Unlock()
	}()
	return ch, nil
}

func (b *memBroker) WriteServerState(_ context.Context, info *base.ServerInfo, ttl time.Duration) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	if info == nil || info.ID == "" || ttl <= 0 {
		return base.ErrInvalidArgument
	}
	b.servers[info.ID] = memRecord[*base.ServerInfo]{v: cloneServer(info), expires: b.clock.Now().Add(ttl)}
	return nil
}

func checkArgs(queue string, limit int) error {
	if err := base.ValidateQueueName(queue); err != nil {
		return err
	}
	if limit < 1 {
		return base.ErrInvalidArgument
	}
	return nil
}

func (b *memBroker) ClearServerState(_ context.Context, id string) error {
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	delete(b.servers, id)
	return nil
}

// CheckInvariants checks that the pending list and the task states agree
// and that exactly the active tasks have a lease.
func (b *memBroker) CheckInvariants(context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, q := range b.queues {
		inList := map[string]bool{}
		for _, id := range q.pending {
			if inList[id] {
				return fmt.Errorf("queue %s: %s twice in the pending list", name, id)
			}
			inList[id] = true
			if t := q.tasks[id]; t == nil || t.state != base.StatePending {
				return fmt.Errorf("queue %s: %s in the pending list but not pending", name, id)
			}
		}
		for id, t := range q.tasks {
			if (t.state == base.StatePending) != inList[id] {
				return fmt.Errorf("queue %s: pending task %s not in the pending list", name, id)
			}
			if (t.state == base.StateActive) != (t.token != "") {
				return errors.New("a lease without an active task, or an active task without a lease")
			}
		}
	}
	return nil
}
