package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	bolt "go.etcd.io/bbolt"

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

// TestCheckpointMerge: a checkpoint of many logged batches, written as one
// merged batch, leaves the data file as writing them one after another
// does: a task written by several batches in its last form or deleted, a
// counter with the sum of its increments after its queue's drop, the last
// value of every other record.
func TestCheckpointMerge(t *testing.T) {
	mk := func(f func(b *batch)) *batch {
		b := newBatch()
		f(b)
		return b
	}
	day := statKey{"q", statProcessed, 7}
	bs := []*batch{
		mk(func(b *batch) {
			b.tasks[1], b.tasks[2], b.tasks[3] = []byte("t1 enqueued"), []byte("t2 enqueued"), []byte("t3 enqueued")
			b.queues["q"], b.kv["k"] = []byte{flagListed}, []byte("v1")
			b.stats[day], b.stats[statKey{"other", statFailed, 7}] = 2, 1
		}),
		mk(func(b *batch) {
			b.tasks[1], b.tasks[2] = []byte("t1 active"), nil // t2 deleted
			b.dropStats["q"] = true                           // q's counters, the 2 above, gone
			b.stats[day] = 5
			b.claims["c"] = []byte("claim")
		}),
		mk(func(b *batch) {
			b.tasks[1], b.tasks[4] = []byte("t1 completed"), []byte("t4")
			b.stats[day] = 1
			b.kv["k"], b.claims["c"] = []byte("v2"), nil
			b.wf["w"], b.wfSpecs["s"] = []byte("wf"), []byte("spec")
		}),
	}
	dump := func(each bool) map[string]string {
		dir := t.TempDir()
		s, err := openBolt(filepath.Join(dir, DataFileName), false, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		if each {
			for i, b := range bs {
				if err := s.checkpoint([]*batch{b}, uint64(i+1), nil); err != nil {
					t.Fatal(err)
				}
			}
		} else if err := s.checkpoint(bs, uint64(len(bs)), nil); err != nil {
			t.Fatal(err)
		}
		out := make(map[string]string)
		if err := s.db.View(func(tx *bolt.Tx) error {
			return tx.ForEach(func(name []byte, bk *bolt.Bucket) error {
				return bk.ForEach(func(k, v []byte) error {
					out[fmt.Sprintf("%s/%x", name, k)] = string(v)
					return nil
				})
			})
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	one, merged := dump(true), dump(false)
	if !reflect.DeepEqual(one, merged) {
		t.Fatalf("merged checkpoint wrote\n%v\none batch at a time\n%v", merged, one)
	}
	if got := merged[fmt.Sprintf("%s/%x", bucketStats, day.bytes())]; got != string(binary.BigEndian.AppendUint64(nil, 6)) {
		t.Fatalf("counter %q after a drop and increments 5 and 1: %x, want 6", day.queue, got)
	}
	if _, ok := merged[fmt.Sprintf("%s/%x", bucketTasks, binary.BigEndian.AppendUint64(nil, 2))]; ok {
		t.Fatal("task 2, enqueued then deleted, is in the file")
	}
}
