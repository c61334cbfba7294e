package brokertest

import (
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// uniqueMsg returns a new message of queue holding the uniqueness key for ttl.
func (e *env) uniqueMsg(queue, key string, ttl time.Duration) *base.TaskMessage {
	m := e.newMsg(queue)
	m.UniqueKey, m.UniqueTTL = key, ttl
	return m
}

// wantDuplicate fails unless a new task with key is refused with
// ErrDuplicateTask and not stored.
func (e *env) wantDuplicate(queue, key string) {
	e.Helper()
	m := e.uniqueMsg(queue, key, time.Hour)
	err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m})
	wantErrIs(e, "Enqueue with the locked unique key "+key, err, base.ErrDuplicateTask)
	e.wantGone(queue, m.ID)
}

// wantUnlocked fails unless a new task with key can be enqueued; it
// returns that task.
func (e *env) wantUnlocked(queue, key string) *base.TaskMessage {
	e.Helper()
	m := e.uniqueMsg(queue, key, time.Hour)
	if err := e.b.Enqueue(e.ctx, broker.EnqueueParams{Msg: m}); err != nil {
		e.Fatalf("Enqueue with the unique key %s, which should be free: %v", key, err)
	}
	return m
}

func uniqueTests() []testCase {
	return []testCase{
		{"DuplicateWithinTTL", func(e *env) {
			first := e.uniqueMsg("default", "k", time.Minute)
			e.enqueue(first)
			e.wantDuplicate("default", "k")
			e.advance(59 * time.Second)
			e.wantDuplicate("default", "k")
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(first))
		}},
		{"DuplicateOfScheduled", func(e *env) {
			first := e.uniqueMsg("default", "k", time.Hour)
			e.enqueueAt(first, e.now().Add(time.Minute))
			e.wantDuplicate("default", "k")
		}},
		{"ExpiresAfterTTL", func(e *env) {
			first := e.uniqueMsg("default", "k", 10*time.Second)
			e.enqueue(first)
			e.advance(9 * time.Second)
			e.wantDuplicate("default", "k")
			e.advance(2 * time.Second)
			second := e.wantUnlocked("default", "k")
			wantIDs(e, "pending tasks", e.drain("default"), msgIDs(first, second))
		}},
		{"FreeAtExactTTL", func(e *env) {
			e.enqueue(e.uniqueMsg("default", "k", 10*time.Second))
			e.advance(10*time.Second - time.Millisecond)
			e.wantDuplicate("default", "k")
			e.advance(time.Millisecond)
			e.wantUnlocked("default", "k")
		}},
		{"ReleasedOnComplete", func(e *env) {
			first := e.uniqueMsg("default", "k", time.Hour)
			e.enqueue(first)
			l := e.fetchID("default", first.ID)
			e.wantDuplicate("default", "k") // active tasks keep the lock
			e.complete(l.Ref())
			e.wantUnlocked("default", "k")
		}},
		{"ReleasedOnCompleteWithRetention", func(e *env) {
			first := e.uniqueMsg("default", "k", time.Hour)
			first.Retention = time.Hour
			e.enqueue(first)
			e.complete(e.fetchID("default", first.ID).Ref())
			e.wantState("default", first.ID, base.StateCompleted)
			e.wantUnlocked("default", "k")
		}},
		{"ReleasedOnDelete", func(e *env) {
			for _, s := range []base.TaskState{base.StatePending, base.StateScheduled, base.StateRetry, base.StateArchived, base.StateAggregating} {
				q := s.String()
				m := e.uniqueMsg(q, "k", time.Hour)
				switch s {
				case base.StatePending:
					e.enqueue(m)
				case base.StateScheduled:
					e.enqueueAt(m, e.now().Add(time.Hour))
				case base.StateAggregating:
					m.GroupKey = "g"
					e.enqueue(m)
				case base.StateRetry:
					e.enqueue(m)
					e.retry(e.fetchID(q, m.ID).Ref(), time.Hour, "x")
				case base.StateArchived:
					e.enqueue(m)
					e.archive(e.fetchID(q, m.ID).Ref(), "x")
				}
				e.wantState(q, m.ID, s)
				e.wantDuplicate(q, "k")
				wantNoErr(e, "DeleteTask of a "+q+" task", e.b.DeleteTask(e.ctx, q, m.ID))
				e.wantUnlocked(q, "k")
			}
		}},
		{"RetryKeepsLock", func(e *env) {
			first := e.uniqueMsg("default", "k", time.Hour)
			e.enqueue(first)
			e.retry(e.fetchID("default", first.ID).Ref(), time.Minute, "x")
			e.wantDuplicate("default", "k")
			e.advance(time.Minute)
			e.forward("default")
			e.wantDuplicate("default", "k")
		}},
		{"RequeueKeepsLock", func(e *env) {
			first := e.uniqueMsg("default", "k", time.Hour)
			e.enqueue(first)
			wantNoErr(e, "Requeue", e.b.Requeue(e.ctx, e.fetchID("default", first.ID).Ref()))
			e.wantDuplicate("default", "k")
		}},
		{"ArchivedKeepsLockUntilTTL", func(e *env) {
			first := e.uniqueMsg("default", "k", time.Hour)
			e.enqueue(first)
			e.archive(e.fetchID("default", first.ID).Ref(), "fatal")
			e.wantDuplicate("default", "k")
			e.advance(59 * time.Minute)
			e.wantDuplicate("default", "k")
			e.advance(2 * time.Minute)
			e.wantUnlocked("default", "k")
			e.wantState("default", first.ID, base.StateArchived)
		}},
		{"OnlyOwnerReleases", func(e *env) {
			// first's lock expires and second takes the key; completing or
			// deleting first must not release second's lock.
			first := e.uniqueMsg("default", "k", 10*time.Second)
			e.enqueue(first)
			other := e.uniqueMsg("default", "k2", 10*time.Second)
			e.enqueue(other)
			e.advance(11 * time.Second)
			e.wantUnlocked("default", "k")
			e.wantUnlocked("default", "k2")
			e.complete(e.fetchID("default", first.ID).Ref())
			e.wantDuplicate("default", "k")
			wantNoErr(e, "DeleteTask", e.b.DeleteTask(e.ctx, "default", other.ID))
			e.wantDuplicate("default", "k2")
		}},
		{"KeysArePerQueue", func(e *env) {
			e.enqueue(e.uniqueMsg("a", "k", time.Hour))
			e.wantUnlocked("b", "k")
			e.wantDuplicate("a", "k")
			e.wantDuplicate("b", "k")
		}},
		{"DifferentKeys", func(e *env) {
			e.enqueue(e.uniqueMsg("default", "k1", time.Hour))
			e.wantUnlocked("default", "k2")
		}},
	}
}
