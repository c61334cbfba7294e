package embedded

import (
	"fmt"
	"time"
)

// How often the committer hands the logged batches to the checkpointer:
// once checkpointInterval has passed since the last job, or as soon as
// checkpointBatches batches wait. A store that goes idle sooner is woken
// when the interval has passed (ckptWake), so that an idle store's log is
// checkpointed within checkpointInterval of its last write. (Until
// 2026-12-02 an idle moment sent a job at once: under a steady stream of
// single writes, whose committer finds no batch waiting between most of
// them, the checkpointer then ran back to back, a bbolt transaction and
// two fdatasyncs every few milliseconds, ~9 % of htq serve's CPU.) A
// failed checkpoint is retried after checkpointRetry.
const (
	checkpointInterval = 50 * time.Millisecond
	checkpointBatches  = 512
	checkpointRetry    = time.Second
	// maxSpares caps the emptied batches kept for reuse: about as many
	// as the commits of a checkpoint interval under single writes (htq
	// serve's requests: a few tasks a commit, a few hundred commits in 50
	// ms), so that a commit takes a spare instead of allocating a batch
	// and its eight maps. (4 until 2026-12-02: most commits then made a
	// new batch.) The spares hold no more memory than the batches of one
	// checkpoint did.
	maxSpares = 256
)

// ckptJob is one checkpoint: the logged batches to write into the file, in
// order, and the number of the last log record they hold; err is how it
// went.
type ckptJob struct {
	batches []*batch
	seq     uint64
	err     error
}

// checkpointLoop is the checkpointer: it writes each job it is sent into
// the file as one synced transaction and answers on ckptDone. It runs
// until ckptJobs is closed.
func (b *Broker) checkpointLoop() {
	defer close(b.ckptStopped)
	for job := range b.ckptJobs {
		job.err = b.store.checkpoint(job.batches, job.seq, nil)
		if job.err == nil && b.afterCkpt != nil {
			b.afterCkpt()
		}
		b.ckptDone <- job
		// Wake the committer from another goroutine: the committer (or
		// CheckInvariants) may hold b.mu while it waits for the answer
		// to the next job, which this goroutine must be free to write.
		go func() {
			b.mu.Lock()
			b.ckptReady = true
			b.work.Signal()
			b.mu.Unlock()
		}()
	}
}

// collectCheckpoint takes the checkpointer's answer when there is one
// (waiting for it when block is set and a job is out). A finished job's
// batches are reused; a failed one's go back to the front of ckptQ, to be
// written with the next. The caller holds b.mu.
func (b *Broker) collectCheckpoint(block bool) {
	b.ckptReady = false
	if !b.ckptBusy {
		return
	}
	var job ckptJob
	if block {
		job = <-b.ckptDone
	} else {
		select {
		case job = <-b.ckptDone:
		default:
			return
		}
	}
	b.ckptBusy = false
	if job.err != nil {
		b.log.Error("htq: checkpoint of the log into the data file failed; the log keeps the changes, retrying", "err", job.err)
		b.ckptQ = append(job.batches, b.ckptQ...)
		b.ckptRetry = b.clock.Now().Add(checkpointRetry)
		return
	}
	b.ckptSeq = job.seq
	for _, bt := range job.batches {
		if len(b.spares) >= maxSpares {
			break
		}
		if bt.recycle() {
			b.spares = append(b.spares, bt)
		}
	}
}

// maybeCheckpoint sends the logged batches to the checkpointer when it is
// free and they are due, then moves the log to its other file if a
// finished checkpoint holds all that file has. When they are not yet due
// and the store is idle (no batch waits to be written), it arms the
// wake-up that calls it again when they are. The committer calls it,
// holding b.mu.
func (b *Broker) maybeCheckpoint(idle bool) {
	if b.wal == nil {
		return
	}
	b.collectCheckpoint(false)
	if b.ckptBusy || len(b.ckptQ) == 0 || b.ckptHold {
		return
	}
	now := b.clock.Now()
	if now.Before(b.ckptRetry) {
		return
	}
	if wait := checkpointInterval - now.Sub(b.ckptAt); wait > 0 && len(b.ckptQ) < checkpointBatches {
		if idle && b.ckptWake == nil {
			b.ckptWake = b.clock.AfterFunc(wait, b.wakeForCheckpoint)
		}
		return
	}
	b.ckptJobs <- ckptJob{batches: b.ckptQ, seq: b.wal.seq}
	b.ckptQ, b.ckptBusy, b.ckptAt = nil, true, now
	b.wal.rotate(b.ckptSeq)
}

// wakeForCheckpoint is the wake-up maybeCheckpoint arms: it has the
// committer look at the checkpoint again.
func (b *Broker) wakeForCheckpoint() {
	b.mu.Lock()
	b.ckptWake = nil
	b.ckptReady = true
	b.work.Signal()
	b.mu.Unlock()
}

// checkpointLocked writes every logged batch into the file now, after the
// checkpointer's job in flight. The caller holds b.mu and no batch is
// being written.
func (b *Broker) checkpointLocked() error {
	if b.wal == nil {
		return nil
	}
	b.collectCheckpoint(true)
	if len(b.ckptQ) == 0 {
		return nil
	}
	if err := b.store.checkpoint(b.ckptQ, b.wal.seq, nil); err != nil {
		return fmt.Errorf("htq: checkpoint into %s: %w", b.store.file, err)
	}
	b.ckptQ, b.ckptSeq = nil, b.wal.seq
	return nil
}

// closeCheckpoints ends the checkpointer and writes what it had not, with
// the record of a clean close (log session salt 0), so that the next Open
// has no log to read. A failure is logged: the log still holds the
// changes, and the data file still names its session. The committer calls
// it as it stops, holding b.mu.
func (b *Broker) closeCheckpoints() {
	if b.wal == nil {
		return
	}
	if b.ckptWake != nil {
		b.ckptWake.Stop()
		b.ckptWake = nil
	}
	b.collectCheckpoint(true)
	var err error
	if b.broken == nil {
		err = b.store.checkpoint(b.ckptQ, b.wal.seq, &walSession{})
		if err == nil {
			b.ckptQ, b.ckptSeq = nil, b.wal.seq
		}
	}
	close(b.ckptJobs)
	if err != nil {
		b.log.Warn("htq: final checkpoint failed; the next open replays the log", "err", fmt.Errorf("htq: checkpoint into %s: %w", b.store.file, err))
	}
}
