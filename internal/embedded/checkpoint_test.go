package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// TestCheckpointPacing checks when the committer hands the log to the
// checkpointer: a stream of single writes, each followed by an idle
// moment, sends no job before checkpointInterval has passed on the
// storage clock (it once sent one at every idle moment), and a store that
// stays idle is checkpointed when the interval has passed, every write
// in one job.
func TestCheckpointPacing(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC))
	jobs := make(chan struct{}, 100)
	b, err := Open(t.Context(), t.TempDir(), Options{Clock: clock, Logger: discardLogger(),
		afterCheckpoint: func() { jobs <- struct{}{} }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	const n = 50
	for i := range n {
		m := &base.TaskMessage{ID: fmt.Sprintf("t%d", i), Type: "x", Queue: "q"}
		if err := b.Enqueue(t.Context(), broker.EnqueueParams{Msg: m}); err != nil {
			t.Fatal(err)
		}
	}
	// The first write found no checkpoint ever made: one job at once.
	waitJob := func(what string) {
		t.Helper()
		select {
		case <-jobs:
		case <-time.After(10 * time.Second):
			t.Fatalf("no checkpoint %s", what)
		}
	}
	waitJob("after the first write")
	// The store is idle now; its wake-up is armed on the storage clock
	// (at once if the first job ended before the last write, else when
	// the checkpointer answers). Advancing the clock by the interval wakes
	// the committer, which sends the rest in one job.
	armed, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(armed, 1); err != nil {
		t.Fatalf("no wake-up armed for the idle store's checkpoint: %v", err)
	}
	clock.Advance(checkpointInterval)
	waitJob("of an idle store once the interval has passed")
	b.mu.Lock()
	b.collectCheckpoint(true)
	lag := b.wal.seq - b.ckptSeq
	b.mu.Unlock()
	if lag != 0 {
		t.Errorf("%d log records not checkpointed after the idle store's job", lag)
	}
	if extra := len(jobs); extra != 0 {
		t.Errorf("%d checkpoint jobs more than the 2 expected for %d single writes within one interval", extra, n)
	}
}
