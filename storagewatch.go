package htq

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// A storageWatch remembers when this server last failed to reach the
// storage (a fetch, a lease renewal or a completion that failed for a
// reason other than the task's own state). The recoverer asks it whether
// an expired lease may have run out because the storage was unreachable:
// such a task is retried without counting a failure, since its handler
// did nothing wrong.
type storageWatch struct {
	clock clockwork.Clock
	last  atomic.Int64 // Unix ns of the local clock; 0: never
}

func newStorageWatch(clock clockwork.Clock) *storageWatch { return &storageWatch{clock: clock} }

// failed records err if it says the storage could not be reached or did
// not answer (not a refusal about a task's state).
// It is called for every task's completion: a nil err returns before
// anything escapes to the heap (see unreachable).
func (w *storageWatch) failed(err error) {
	if err != nil && unreachable(err) {
		w.last.Store(w.clock.Now().UnixNano())
	}
}

// unreachable reports whether err, not nil, says the storage could not
// be reached or did not answer.
func unreachable(err error) bool {
	var throttled *broker.ThrottledError
	return !errors.Is(err, ErrLeaseLost) && !errors.Is(err, ErrTaskNotFound) &&
		!errors.Is(err, ErrInvalidArgument) && !errors.As(err, &throttled)
}

// unreachableWithin reports whether the storage failed to answer within
// the last d.
func (w *storageWatch) unreachableWithin(d time.Duration) bool {
	last := w.last.Load()
	return last != 0 && w.clock.Now().Add(-d).UnixNano() <= last
}
