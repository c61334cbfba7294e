package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrCorrupt marks a data file that cannot be read: damaged, truncated or
// not an htq file. The error names the file; see RecoverFile.
var ErrCorrupt = errors.New("htq: data file is corrupt or unreadable (`htq recover SRC DST` copies what can still be read into a new directory)")

// batch is the set of changes one commit writes: the records that changed
// since the last commit, the queue entries and scheduler claims that changed
// (nil value = delete in each), counter increments, and queues whose
// counters are to be deleted (before the increments).
type batch struct {
	tasks     map[uint64][]byte
	queues    map[string][]byte
	claims    map[string][]byte
	kv        map[string][]byte
	wf        map[string][]byte // workflow records (nil value = delete)
	wfSpecs   map[string][]byte // workflow specs (nil value = delete)
	stats     map[statKey]uint64
	dropStats map[string]bool
	done      *ticket
	// arena holds the task records of the batch one after another
	// (putRecord): reused with the batch, so that a record costs no
	// allocation of its own once the batch has been used before. A record
	// is only read until the checkpoint that writes it ends, and a batch
	// is emptied for reuse only after that.
	arena []byte
	// waiters counts the calls that took done to wait on (the
	// committer's estimate of the callers a commit wakes).
	waiters int
}

// batchRecycleMax is the number of records above which a written batch's
// maps are dropped instead of cleared for reuse: clearing a map costs its
// capacity, and one large EnqueueBatch should not make every later batch
// pay for it.
const batchRecycleMax = 1024

// arenaMin is the smallest arena a batch allocates, arenaMax the largest
// one it keeps when emptied for reuse.
const (
	arenaMin = 1 << 10
	arenaMax = 64 << 10
)

// putRecord records the task record of t, encoded into the arena.
func (b *batch) putRecord(t *task) {
	n := recordSize(t)
	if cap(b.arena)-len(b.arena) < n {
		// A new arena: the records in the old one stay where they are.
		b.arena = make([]byte, 0, max(arenaMin, 2*cap(b.arena), n))
	}
	start := len(b.arena)
	// Should the record outgrow n, append moves the arena: the records
	// before this one stay in the old one, which they keep alive.
	b.arena = appendTask(b.arena, t)
	end := len(b.arena)
	b.tasks[t.seq] = b.arena[start:end:end]
}

func newBatch() *batch {
	b := emptyBatch(0)
	b.done = &ticket{done: make(chan struct{})}
	return b
}

// emptyBatch returns a batch with no changes, room for n task records and
// no ticket (a batch read back from the log, or made to be written
// without callers).
func emptyBatch(n int) *batch {
	return &batch{
		tasks:     make(map[uint64][]byte, n),
		queues:    make(map[string][]byte),
		claims:    make(map[string][]byte),
		kv:        make(map[string][]byte),
		wf:        make(map[string][]byte),
		wfSpecs:   make(map[string][]byte),
		stats:     make(map[statKey]uint64),
		dropStats: make(map[string]bool),
	}
}

// recycle empties b for reuse as a later batch, with a new ticket, and
// reports whether it did: a batch grown past batchRecycleMax records is not
// worth keeping. Only a batch whose ticket is closed may be recycled.
func (b *batch) recycle() bool {
	if len(b.tasks) > batchRecycleMax || len(b.stats) > batchRecycleMax {
		return false
	}
	clear(b.tasks)
	clear(b.queues)
	clear(b.claims)
	clear(b.kv)
	clear(b.wf)
	clear(b.wfSpecs)
	clear(b.stats)
	clear(b.dropStats)
	if cap(b.arena) > arenaMax {
		b.arena = nil
	}
	b.arena = b.arena[:0]
	b.waiters = 0
	b.done = &ticket{done: make(chan struct{})}
	return true
}

func (b *batch) empty() bool {
	return len(b.tasks) == 0 && len(b.queues) == 0 && len(b.claims) == 0 && len(b.kv) == 0 && len(b.wf) == 0 && len(b.wfSpecs) == 0 &&
		len(b.stats) == 0 && len(b.dropStats) == 0
}

// ticket tells the operations of one batch how its commit went.
type ticket struct {
	done chan struct{}
	err  error
}

// boltStore is the thin layer over bbolt: open with the schema, read every
// record, write one batch per transaction.
type boltStore struct {
	db   *bolt.DB
	file string
	// seqs is commit's scratch list of task keys (only the committer
	// calls commit).
	seqs []uint64
}

// openBolt opens or creates the bbolt file and brings its schema to
// schemaVersion. readOnly opens an existing file without writing to it.
//
// The free-page list is not stored (NoFreelistSync, as etcd does): bbolt
// rebuilds it at open by walking the file, instead of writing the whole list
// at every commit, which after a large drain would be most of each commit.
// That walk runs in a goroutine of bbolt's that cannot turn a damaged page
// into an error, so Open first reads the whole file read-only (see
// Broker.Open), which can.
func openBolt(file string, readOnly bool, lockTimeout time.Duration) (*boltStore, error) {
	if lockTimeout <= 0 {
		lockTimeout = 50 * time.Millisecond
	}
	opts := &bolt.Options{
		Timeout:        lockTimeout,
		FreelistType:   bolt.FreelistMapType,
		NoFreelistSync: true,
		ReadOnly:       readOnly,
	}
	db, err := openBoltSafe(file, opts)
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("%w: %s is locked by another process", ErrLocked, file)
		}
		var pe *os.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("htq: opening %s: %w", file, err)
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, file, err)
	}
	s := &boltStore{db: db, file: file}
	if readOnly {
		return s, nil
	}
	if err := s.migrate(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// openBoltSafe opens the file, turning a panic or memory fault inside bbolt
// (a damaged file can cause either) into an error.
func openBoltSafe(file string, opts *bolt.Options) (db *bolt.DB, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the file failed: %v", r)
		}
	}()
	return bolt.Open(file, 0o600, opts)
}

func (s *boltStore) migrate() error {
	return s.guard(func() error {
		return s.db.Update(func(tx *bolt.Tx) error {
			meta, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			v := meta.Get(keyVersion)
			var have uint64
			if v != nil {
				var n int
				have, n = binary.Uvarint(v)
				if n <= 0 {
					return fmt.Errorf("%w: %s: bad schema version", ErrCorrupt, s.file)
				}
			}
			if have > schemaVersion {
				return fmt.Errorf("htq: %s has schema version %d, written by a newer htq; this one reads up to %d", s.file, have, schemaVersion)
			}
			for _, name := range [][]byte{bucketTasks, bucketQueues, bucketStats, bucketClaims, bucketKV, bucketWorkflows, bucketWorkflowSpecs} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return err
				}
			}
			// Migrations from older versions go here, one step per version.
			if have != schemaVersion {
				return meta.Put(keyVersion, binary.AppendUvarint(nil, schemaVersion))
			}
			return nil
		})
	})
}

// guard runs f, turning a panic or memory fault in bbolt into an error that
// names the file. bbolt panics on some kinds of damage instead of failing.
func (s *boltStore) guard(f func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %s: %v", ErrCorrupt, s.file, r)
		}
	}()
	return f()
}

// loaded is what load reads besides the task records.
type loaded struct {
	queues map[string][]byte // queue name → entry
	stats  map[statKey]uint64
	claims map[string][]byte
	kv     map[string][]byte
	wf     map[string][]byte // the workflows bucket
	specs  map[string][]byte // the wfspecs bucket
}

// load reads the queue entries, counters and claims, then calls tasks once
// with every task record in sequence order. The record bytes are valid only
// during the call (they are bbolt's memory map).
func (s *boltStore) load(tasks func(seqs []uint64, recs [][]byte) error) (*loaded, error) {
	out := &loaded{queues: make(map[string][]byte), stats: make(map[statKey]uint64), claims: make(map[string][]byte),
		kv: make(map[string][]byte), wf: make(map[string][]byte), specs: make(map[string][]byte)}
	err := s.guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			if meta := tx.Bucket(bucketMeta); meta != nil {
				if v, n := binary.Uvarint(meta.Get(keyVersion)); n > 0 && v > schemaVersion {
					return fmt.Errorf("htq: %s has schema version %d, written by a newer htq; this one reads up to %d", s.file, v, schemaVersion)
				}
			}
			if tx.Bucket(bucketQueues) == nil || tx.Bucket(bucketTasks) == nil {
				return tasks(nil, nil) // a file whose schema was never written
			}
			if st := tx.Bucket(bucketStats); st != nil {
				if err := st.ForEach(func(k, v []byte) error {
					if key, ok := parseStatKey(k); ok && len(v) == 8 {
						out.stats[key] = binary.BigEndian.Uint64(v)
					}
					return nil
				}); err != nil {
					return err
				}
			}
			if cl := tx.Bucket(bucketClaims); cl != nil {
				if err := cl.ForEach(func(k, v []byte) error {
					out.claims[string(k)] = append([]byte(nil), v...)
					return nil
				}); err != nil {
					return err
				}
			}
			if kv := tx.Bucket(bucketKV); kv != nil {
				if err := kv.ForEach(func(k, v []byte) error {
					out.kv[string(k)] = append([]byte(nil), v...)
					return nil
				}); err != nil {
					return err
				}
			}
			for name, into := range map[string]map[string][]byte{string(bucketWorkflows): out.wf, string(bucketWorkflowSpecs): out.specs} {
				if bk := tx.Bucket([]byte(name)); bk != nil {
					if err := bk.ForEach(func(k, v []byte) error {
						into[string(k)] = append([]byte(nil), v...)
						return nil
					}); err != nil {
						return err
					}
				}
			}
			if err := tx.Bucket(bucketQueues).ForEach(func(k, v []byte) error {
				out.queues[string(k)] = append([]byte(nil), v...)
				return nil
			}); err != nil {
				return err
			}
			var seqs []uint64
			var recs [][]byte
			if err := tx.Bucket(bucketTasks).ForEach(func(k, v []byte) error {
				if len(k) != 8 {
					return fmt.Errorf("%w: %s: task key of %d bytes", ErrCorrupt, s.file, len(k))
				}
				seqs = append(seqs, binary.BigEndian.Uint64(k))
				recs = append(recs, v)
				return nil
			}); err != nil {
				return err
			}
			return tasks(seqs, recs)
		})
	})
	return out, err
}

// apply makes the changes of the logged batch b to what load read of the
// file besides the tasks (overlayTasks does those), as a checkpoint of b
// would in the file.
func (l *loaded) apply(b *batch) {
	for _, m := range []struct{ from, into map[string][]byte }{
		{b.queues, l.queues}, {b.claims, l.claims}, {b.kv, l.kv}, {b.wf, l.wf}, {b.wfSpecs, l.specs},
	} {
		for k, v := range m.from {
			if v == nil {
				delete(m.into, k)
			} else {
				m.into[k] = v
			}
		}
	}
	for q := range b.dropStats {
		for k := range l.stats {
			if k.queue == q {
				delete(l.stats, k)
			}
		}
	}
	for k, n := range b.stats {
		l.stats[k] += n
	}
}

// overlayTasks returns the task records of the file (seqs and recs, in
// sequence order) with the task changes of the logged batches made on
// top, in order: a record a batch writes replaces the file's, a nil one
// deletes it. The result is in sequence order too.
func overlayTasks(seqs []uint64, recs [][]byte, logged []*batch) ([]uint64, [][]byte) {
	over := make(map[uint64][]byte)
	for _, b := range logged {
		for seq, v := range b.tasks {
			over[seq] = v
		}
	}
	if len(over) == 0 {
		return seqs, recs
	}
	keys := make([]uint64, 0, len(over))
	for seq := range over {
		keys = append(keys, seq)
	}
	slices.Sort(keys)
	outS := make([]uint64, 0, len(seqs)+len(keys))
	outR := make([][]byte, 0, len(seqs)+len(keys))
	i := 0
	for _, k := range keys {
		for ; i < len(seqs) && seqs[i] < k; i++ {
			outS, outR = append(outS, seqs[i]), append(outR, recs[i])
		}
		if i < len(seqs) && seqs[i] == k {
			i++
		}
		if v := over[k]; v != nil {
			outS, outR = append(outS, k), append(outR, v)
		}
	}
	outS, outR = append(outS, seqs[i:]...), append(outR, recs[i:]...)
	return outS, outR
}

// commit writes b in one transaction and syncs it to disk.
func (s *boltStore) commit(b *batch) error {
	return s.guard(func() error {
		return s.db.Update(func(tx *bolt.Tx) error { return s.apply(tx, b) })
	})
}

// checkpoint writes the logged batches bs, in order, in one transaction
// with the number of the last log record they hold (meta "checkpoint"),
// and syncs it to disk. A non-nil sess is written too (meta "wal"): the
// log session that the file's next records will come from.
func (s *boltStore) checkpoint(bs []*batch, seq uint64, sess *walSession) error {
	if len(bs) > 1 {
		bs = []*batch{mergeBatches(bs)}
	}
	return s.guard(func() error {
		return s.db.Update(func(tx *bolt.Tx) error {
			for _, b := range bs {
				if err := s.apply(tx, b); err != nil {
					return err
				}
			}
			meta := tx.Bucket(bucketMeta)
			if sess != nil {
				if err := meta.Put(keyWAL, sess.bytes()); err != nil {
					return err
				}
			}
			return meta.Put(keyCheckpoint, binary.BigEndian.AppendUint64(nil, seq))
		})
	})
}

// mergeBatches returns one batch (with no ticket) whose writing has the
// effect of writing bs one after another: a record that several of them
// write (a task enqueued, fetched and completed within one checkpoint
// interval) is written once, in its last form, or deleted; a counter that
// several increment is incremented once by their sum, after the drops of
// its queue's counters that came before them. The values are bs's own.
func mergeBatches(bs []*batch) *batch {
	n := 0
	for _, b := range bs {
		n += len(b.tasks)
	}
	m := emptyBatch(n)
	for _, b := range bs {
		for seq, v := range b.tasks {
			m.tasks[seq] = v
		}
		for _, p := range [...]struct{ from, into map[string][]byte }{
			{b.queues, m.queues}, {b.claims, m.claims}, {b.kv, m.kv}, {b.wf, m.wf}, {b.wfSpecs, m.wfSpecs},
		} {
			for k, v := range p.from {
				p.into[k] = v
			}
		}
		for q := range b.dropStats {
			for k := range m.stats {
				if k.queue == q {
					delete(m.stats, k)
				}
			}
			m.dropStats[q] = true
		}
		for k, v := range b.stats {
			m.stats[k] += v
		}
	}
	return m
}

// checkpointSeq returns the number of the last log record the file holds
// (0 for a file written before the log, or new), the log session whose
// records may follow it, and whether the file has a checkpoint but no
// session record (written by the log's first format, which had no salt).
func (s *boltStore) checkpointSeq() (seq uint64, sess walSession, legacy bool, err error) {
	err = s.guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if meta == nil {
				return nil
			}
			ck := meta.Get(keyCheckpoint)
			switch len(ck) {
			case 0:
			case 8:
				seq = binary.BigEndian.Uint64(ck)
			default:
				return fmt.Errorf("%w: %s: bad checkpoint record", ErrCorrupt, s.file)
			}
			v := meta.Get(keyWAL)
			switch {
			case v == nil:
				legacy = ck != nil
			case len(v) == 16:
				sess = walSession{salt: binary.BigEndian.Uint64(v[:8]), size: int64(binary.BigEndian.Uint64(v[8:]))}
			default:
				return fmt.Errorf("%w: %s: bad log session record", ErrCorrupt, s.file)
			}
			return nil
		})
	})
	return seq, sess, legacy, err
}

// apply writes b's changes in tx.
func (s *boltStore) apply(tx *bolt.Tx, b *batch) error {
	if err := s.putTasks(tx, b.tasks); err != nil {
		return err
	}
	if err := putAll(tx, bucketQueues, b.queues); err != nil {
		return err
	}
	if err := putAll(tx, bucketClaims, b.claims); err != nil {
		return err
	}
	if err := putAll(tx, bucketKV, b.kv); err != nil {
		return err
	}
	if err := putAll(tx, bucketWorkflows, b.wf); err != nil {
		return err
	}
	if err := putAll(tx, bucketWorkflowSpecs, b.wfSpecs); err != nil {
		return err
	}
	if len(b.dropStats) == 0 && len(b.stats) == 0 {
		return nil
	}
	stats := tx.Bucket(bucketStats)
	for queue := range b.dropStats {
		prefix := append([]byte(queue), 0)
		c := stats.Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	for k, n := range b.stats {
		key := k.bytes()
		var have uint64
		if v := stats.Get(key); len(v) == 8 {
			have = binary.BigEndian.Uint64(v)
		}
		if err := stats.Put(key, binary.BigEndian.AppendUint64(nil, have+n)); err != nil {
			return err
		}
	}
	return nil
}

// putTasks writes the task records of a batch (nil = delete) in key
// order, so that each put lands at or after the previous one instead of
// anywhere in the leaf.
func (s *boltStore) putTasks(tx *bolt.Tx, recs map[uint64][]byte) error {
	if len(recs) == 0 {
		return nil
	}
	tasks := tx.Bucket(bucketTasks)
	// Keys are sequence numbers, so new records go to the right end of
	// the tree: fill pages nearly full instead of half.
	tasks.FillPercent = 0.9
	s.seqs = s.seqs[:0]
	for seq := range recs {
		s.seqs = append(s.seqs, seq)
	}
	slices.Sort(s.seqs)
	var key [8]byte
	// Deletes go through one cursor, positioned anew for each (Bucket.Delete
	// would make a cursor and grow its stack each time: three allocations
	// per completed task).
	var cur *bolt.Cursor
	for _, seq := range s.seqs {
		binary.BigEndian.PutUint64(key[:], seq)
		rec := recs[seq]
		if rec != nil {
			if err := tasks.Put(key[:], rec); err != nil {
				return err
			}
			continue
		}
		if cur == nil {
			cur = tasks.Cursor()
		}
		if k, _ := cur.Seek(key[:]); bytes.Equal(k, key[:]) {
			if err := cur.Delete(); err != nil {
				return err
			}
		}
	}
	return nil
}

// putAll writes kv into the bucket called name, deleting the keys whose
// value is nil. It does not open the bucket when kv is empty: opening one
// costs a search of the root page, and most batches change tasks only.
func putAll(tx *bolt.Tx, name []byte, kv map[string][]byte) error {
	if len(kv) == 0 {
		return nil
	}
	bk := tx.Bucket(name)
	for k, v := range kv {
		var err error
		if v == nil {
			err = bk.Delete([]byte(k))
		} else {
			err = bk.Put([]byte(k), v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// records returns every stored task record by sequence number (for
// CheckInvariants).
func (s *boltStore) records() (map[uint64][]byte, error) {
	out := make(map[uint64][]byte)
	err := s.guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketTasks).ForEach(func(k, v []byte) error {
				out[binary.BigEndian.Uint64(k)] = append([]byte(nil), v...)
				return nil
			})
		})
	})
	return out, err
}

// workflowRecords returns every record of the workflows and wfspecs
// buckets (for CheckInvariants).
func (s *boltStore) workflowRecords() (recs, specs map[string][]byte, err error) {
	recs, specs = make(map[string][]byte), make(map[string][]byte)
	err = s.guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			for _, b := range []struct {
				name []byte
				into map[string][]byte
			}{{bucketWorkflows, recs}, {bucketWorkflowSpecs, specs}} {
				if err := tx.Bucket(b.name).ForEach(func(k, v []byte) error {
					b.into[string(k)] = append([]byte(nil), v...)
					return nil
				}); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return recs, specs, err
}

func (s *boltStore) close() error { return s.db.Close() }
