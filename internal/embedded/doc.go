// Package embedded is htq's on-disk backend (storage URL "file:PATH") and its
// in-memory twin ("mem:"): the broker.Broker a single process uses when it
// needs nothing installed.
//
// How it works, in one paragraph: every task is one record in a bbolt file
// (PATH/htq.db), keyed by a sequence number and holding the message and all
// of its state. At open the records are read once and the indexes a queue
// needs (the pending list, the lease, due-time and retention indexes, the
// uniqueness locks) are rebuilt in memory; from then on every operation runs
// against memory under one mutex and appends the records it changed to a
// write batch. One committer goroutine appends each batch as one record to a
// write-ahead log (PATH/htq.wal.0 and .1, one write and one fdatasync), so
// every operation waiting at that moment shares it: that is the group
// commit. A checkpointer goroutine writes the logged batches into the bbolt
// file in the background, and Open replays the log after the last
// checkpoint. Operations whose loss in a crash is
// harmless (a fetch, a lease extension) do not wait for their batch to reach
// the disk; operations whose loss would lose or resurrect work (an enqueue, a
// completion, a deletion) return only once it has, and a fetch hands out a
// task only once its enqueue is on disk. Batches are written in order, so a
// durable operation makes every earlier one durable too.
//
// The reasons for this design and the figures that chose bbolt are in
// docs/adr/0002-embedded-store.md.
package embedded
