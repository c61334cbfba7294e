package embedded

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

var _ broker.Broker = (*Broker)(nil)

// DataFileName is the bbolt file inside a data directory.
const DataFileName = "htq.db"

// Broker is the embedded backend: every queue in one process's memory,
// backed by a bbolt file (Open) or by nothing (OpenMemory).
//
// All state lives under mu. Operations change memory and add the records
// they changed to buf; the committer goroutine writes buf to the file (see
// the package doc).
type Broker struct {
	clock clockwork.Clock
	log   *slog.Logger
	dir   string     // data directory; "" in memory
	lock  *dirLock   // nil in memory
	store *boltStore // nil in memory
	wal   *walLog    // nil in memory; only the committer writes it

	mu   sync.Mutex
	work *sync.Cond // signalled when buf gains changes or the broker closes
	// tokens makes lease and aggregation-set tokens (newToken): a
	// cryptographically strong generator seeded from crypto/rand, without
	// a system call per token.
	tokens  *mathrand.ChaCha8
	queues  map[string]*queue
	nextSeq uint64
	// durableSeq: every task whose record number is below it is on disk
	// as enqueued (Fetch hands out no other); inflightSeq is what it
	// becomes when the batch being written is.
	durableSeq, inflightSeq uint64
	buf                     *batch // changes not yet handed to the committer
	// inflight is the ticket of the batch being written, nil when none.
	inflight *ticket
	closed   bool
	// broken is set when a write failed and memory could not be rebuilt
	// from the file; every operation then fails with it.
	broken  error
	subs    map[*subscriber]struct{}
	servers records[*base.ServerInfo]
	// schedulers holds the entries of live schedulers (memory only, like
	// servers); claims the ticks schedulers claimed, by entry and tick, with
	// their expiry (persisted: a restart must not enqueue a tick twice).
	schedulers records[[]*base.SchedulerEntry]
	claims     map[string]time.Time
	// kv holds the MetaStore records.
	kv map[string][]byte
	// workflows holds every stored workflow by ID; doneWorkflows those
	// whose tasks have all finished, by home queue (workflow.go).
	workflows     map[string]*workflow
	doneWorkflows map[string]map[string]*workflow

	// logs holds each queue's event log (eventlog.go), of logSize events
	// each (0: off); logMS and logN are the last event ID's numbers;
	// logged is closed and replaced at each event while logWaiters
	// readers wait, to wake them.
	logs       map[string]*eventRing
	logSize    int
	logMS      uint64
	logN       uint64
	logged     chan struct{}
	logWaiters int

	committerDone chan struct{}

	// commitFn writes a batch; tests replace it to make writes fail.
	commitFn func(*batch) error

	// The checkpoint (guarded by mu): ckptQ holds the batches in the log
	// that no checkpoint holds yet, oldest first; ckptSeq is the last log
	// record the file holds; ckptBusy is set while the checkpointer
	// writes a job (sent on ckptJobs, answered on ckptDone), ckptReady
	// when it has answered; ckptAt is when the last job was sent, and no
	// job is sent before ckptRetry (after a failed one); ckptWake, when
	// not nil, is the wake-up armed for an idle store's next job. spares
	// are written batches emptied for reuse.
	ckptQ       []*batch
	ckptSeq     uint64
	ckptBusy    bool
	ckptReady   bool
	ckptAt      time.Time
	ckptRetry   time.Time
	ckptWake    clockwork.Timer
	ckptJobs    chan ckptJob
	ckptDone    chan ckptJob
	ckptStopped chan struct{}
	ckptHold    bool // tests: send the checkpointer nothing
	spares      []*batch
	// afterCkpt is Options.afterCheckpoint.
	afterCkpt func()

	// commits and commitTime count the committer's log appends and the
	// time they took (guarded by mu), for CommitStats.
	commits    int64
	commitTime time.Duration
}

// CommitStats reports how many batches the committer has written (each one
// log record: one write and one fdatasync) and the time they took in all.
// Dividing the operations of a benchmark by commits gives the group-commit
// batch size. The background checkpoints into bbolt are not counted.
func (b *Broker) CommitStats() (commits int64, total time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.commits, b.commitTime
}

// Open opens the data directory dir, creating it (mode 0700) when missing,
// and takes its lock: while this Broker is open, another Open of dir, from
// this process or another, fails with an error wrapping ErrLocked that names
// the PID holding it. The tasks are read from dir/htq.db; tasks found active
// are orphans of a process that died, so their leases are expired at once
// and the Recoverer retries or archives them on its first pass. A file that
// cannot be read fails with an error wrapping ErrCorrupt that names it, and
// so does a write-ahead log that cannot give back every record the last
// process wrote after its checkpoint (a damaged record that others follow,
// a log file deleted or cut short after a crash): Open refuses before
// writing anything rather than open without acknowledged changes.
//
// Every task is held in memory (about 570 bytes of Go heap for a task with
// a 100-byte payload). While Open reads a file of 64 MiB or more, the
// garbage collector of the whole process is paused (debug.SetGCPercent),
// which halves the time a large reopen takes.
func Open(ctx context.Context, dir string, opts Options) (*Broker, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("htq: open %s: %w", dir, err)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: empty data directory path", base.ErrInvalidArgument)
	}
	opts = opts.withDefaults()
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is a file; file:PATH names a directory that holds %s", base.ErrInvalidArgument, dir, DataFileName)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("htq: creating data directory: %w", err)
	}
	lock, err := lockDir(dir, opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	file := filepath.Join(dir, DataFileName)
	b := newBroker(opts)
	b.dir, b.lock, b.afterCkpt = dir, lock, opts.afterCheckpoint
	// Read an existing file read-only first: every damaged page shows up
	// here as an error naming the file (see openBolt). The log's records
	// after its checkpoint are read with it, and memory is loaded once,
	// from both.
	var ckpt uint64
	var replay []walRecord
	var batches []*batch
	if fi, err := os.Stat(file); err == nil && fi.Size() > 0 {
		ro, err := openBolt(file, true, opts.LockTimeout)
		if err != nil {
			_ = lock.release()
			return nil, err
		}
		b.store = ro
		ckpt, replay, batches, err = readLog(dir, ro)
		if err == nil {
			err = loadPausingGC(b, fi.Size(), batches)
		}
		_ = ro.close()
		if err != nil {
			_ = lock.release()
			if errors.Is(err, ErrCorrupt) {
				err = fmt.Errorf("%w (Salvage copies the readable tasks to a new directory: docs/adr/0002-embedded-store.md, Recovery)", err)
			}
			return nil, err
		}
	}
	_, statErr := os.Stat(file)
	store, err := openBolt(file, false, opts.LockTimeout)
	if err != nil {
		_ = lock.release()
		return nil, err
	}
	if os.IsNotExist(statErr) {
		// A new file's directory entry is durable only once the directory
		// is synced; bbolt syncs the file, not its directory.
		if err := syncDir(dir); err != nil {
			_ = store.close()
			_ = lock.release()
			return nil, err
		}
	}
	b.store = store
	if err := b.startLog(dir, ckpt+uint64(len(replay)), batches, opts.walSize); err != nil {
		_ = store.close()
		_ = lock.release()
		return nil, err
	}
	replayed := len(replay)
	b.commitFn = b.wal.append
	n, orphans := b.expireOrphans()
	b.log.Info("htq: opened data directory", "dir", dir, "tasks", n, "orphaned_active", orphans, "log_records_replayed", replayed, "took", time.Since(start).Round(time.Millisecond))
	go b.checkpointLoop()
	go b.commitLoop()
	return b, nil
}

// readLog reads the checkpoint of the data file s and the log records of
// dir that follow it, decoded.
func readLog(dir string, s *boltStore) (ckpt uint64, recs []walRecord, batches []*batch, err error) {
	ckpt, sess, legacy, err := s.checkpointSeq()
	if err != nil {
		return 0, nil, nil, err
	}
	if legacy {
		return ckpt, nil, nil, checkLegacyWAL(dir, ckpt)
	}
	recs, err = readWAL(dir, sess, ckpt)
	if err != nil {
		return 0, nil, nil, err
	}
	batches = make([]*batch, len(recs))
	for i, r := range recs {
		if batches[i], err = decodeBatch(r.payload); err != nil {
			return 0, nil, nil, fmt.Errorf("%w: %s: log record %d: %v", ErrCorrupt, filepath.Join(dir, WALFileNames[0]), r.seq, err)
		}
	}
	return ckpt, recs, batches, nil
}

// startLog opens the log files of dir and begins a new log session: the
// replayed batches (up to record seq) go into the file as one checkpoint,
// in the transaction that records the session's salt, before the session
// writes anything. Both log files are then free: the next record goes to
// the start of the first.
func (b *Broker) startLog(dir string, seq uint64, replayed []*batch, walSize int64) error {
	salt := newSalt()
	w, err := openWAL(dir, salt, seq, walSize)
	if err != nil {
		return err
	}
	if err := b.store.checkpoint(replayed, seq, &walSession{salt: salt, size: walSize}); err != nil {
		_ = w.close()
		return fmt.Errorf("htq: starting the log of %s: %w", b.store.file, err)
	}
	b.wal, b.ckptSeq = w, seq
	b.ckptJobs, b.ckptDone, b.ckptStopped = make(chan ckptJob, 1), make(chan ckptJob, 1), make(chan struct{})
	return nil
}

// OpenMemory returns a Broker that keeps everything in memory and loses it at
// Close: the "mem:" backend, for tests and examples. It behaves like Open's
// in every other way.
func OpenMemory(opts Options) (*Broker, error) {
	b := newBroker(opts.withDefaults())
	close(b.committerDone)
	return b, nil
}

func newBroker(opts Options) *Broker {
	var seed [32]byte
	_, _ = cryptorand.Read(seed[:]) // never fails (crypto/rand's doc)
	b := &Broker{
		tokens:        mathrand.NewChaCha8(seed),
		clock:         opts.Clock,
		log:           opts.Logger,
		queues:        make(map[string]*queue),
		nextSeq:       1,
		buf:           newBatch(),
		subs:          make(map[*subscriber]struct{}),
		servers:       make(records[*base.ServerInfo]),
		schedulers:    make(records[[]*base.SchedulerEntry]),
		claims:        make(map[string]time.Time),
		kv:            make(map[string][]byte),
		logs:          make(map[string]*eventRing),
		logSize:       max(opts.EventLogSize, 0),
		logged:        make(chan struct{}),
		workflows:     make(map[string]*workflow),
		doneWorkflows: make(map[string]map[string]*workflow),
		committerDone: make(chan struct{}),
	}
	b.work = sync.NewCond(&b.mu)
	return b
}

// Dir returns the data directory, or "" for an in-memory Broker.
func (b *Broker) Dir() string { return b.dir }

// load rebuilds every in-memory index from the file and, on top of it, the
// logged batches (in order) that the file does not hold yet. The caller
// holds b.mu or has the Broker to itself.
func (b *Broker) load(logged []*batch) error {
	var all []*task
	meta, err := b.store.load(func(seqs []uint64, recs [][]byte) error {
		var err error
		seqs, recs = overlayTasks(seqs, recs, logged)
		all, err = decodeAll(seqs, recs)
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrCorrupt, b.store.file, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, bt := range logged {
		meta.apply(bt)
	}
	// Size every map once: growing maps of a million entries is most of
	// the cost of a reopen otherwise.
	counts := make(map[string]int)
	for _, t := range all {
		counts[t.msg.Queue]++
	}
	queues := make(map[string]*queue, len(meta.queues))
	for name, entry := range meta.queues {
		q := newQueue(name, counts[name])
		if err := q.setEntry(entry); err != nil {
			return fmt.Errorf("%w: %s: entry of queue %q: %v", ErrCorrupt, b.store.file, name, err)
		}
		queues[name] = q
	}
	for k, n := range meta.stats {
		if q := queues[k.queue]; q != nil && (k.kind == statProcessed || k.kind == statFailed) {
			kind := 0
			if k.kind == statFailed {
				kind = 1
			}
			q.count(k.day, kind, int64(n))
		}
	}
	b.kv = meta.kv
	b.claims = make(map[string]time.Time, len(meta.claims))
	for k, v := range meta.claims {
		if len(v) == 8 {
			b.claims[k] = time.UnixMilli(int64(binary.BigEndian.Uint64(v)))
		}
	}
	inPending := make(map[*queue][]*task)
	inTree := make(map[*taskTree][]*task)
	var maxSeq uint64
	for _, t := range all {
		q := queues[t.msg.Queue]
		if q == nil {
			// A record of a queue missing from the registry: register it.
			q = newQueue(t.msg.Queue, counts[t.msg.Queue])
			q.listed = true
			queues[q.name] = q
			b.buf.queues[q.name] = q.entry()
		}
		if q.tasks[t.msg.ID] != nil {
			return fmt.Errorf("%w: %s: task %q of queue %q stored twice", ErrCorrupt, b.store.file, t.msg.ID, q.name)
		}
		q.tasks[t.msg.ID] = t
		if t.state == base.StateActive && t.msg.Key != "" {
			q.pending.key(t.msg.Key).held++
		}
		switch t.state {
		case base.StatePending:
			inPending[q] = append(inPending[q], t)
		case base.StateAggregating:
			q.index(t)
		default:
			inTree[q.treeOf(t.state)] = append(inTree[q.treeOf(t.state)], t)
		}
		if !t.uniqueUntil.IsZero() {
			if old := q.unique[t.msg.UniqueKey]; old == nil || old.uniqueUntil.Before(t.uniqueUntil) {
				q.unique[t.msg.UniqueKey] = t
			}
		}
		maxSeq = max(maxSeq, t.seq)
	}
	// Records come in sequence order, which is pending order unless tasks
	// were requeued, forwarded or run: sort only then.
	for q, ts := range inPending {
		if !slices.IsSortedFunc(ts, cmpOrder) {
			slices.SortFunc(ts, cmpOrder)
		}
		q.pending.build(ts)
	}
	for tr, ts := range inTree {
		slices.SortFunc(ts, cmpTask)
		tr.build(ts)
	}
	wfs, err := loadWorkflows(meta.wf, meta.specs)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, b.store.file, err)
	}
	b.workflows = wfs
	b.doneWorkflows = make(map[string]map[string]*workflow)
	for _, wf := range wfs {
		if !wf.finished.IsZero() {
			if b.doneWorkflows[wf.home] == nil {
				b.doneWorkflows[wf.home] = make(map[string]*workflow)
			}
			b.doneWorkflows[wf.home][wf.id] = wf
		}
	}
	b.queues = queues
	b.nextSeq = maxSeq + 1
	b.durableSeq = b.nextSeq
	return nil
}

// syncDir flushes the entries of directory dir to disk.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("htq: syncing data directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && runtime.GOOS != "windows" {
		return fmt.Errorf("htq: syncing data directory %s: %w", dir, err)
	}
	return nil
}

// bigFile is the data file size from which Open pauses the garbage
// collector while it reads the file.
const bigFile = 64 << 20

// loadPausingGC runs b.load. For a big file it turns the garbage collector
// off meanwhile: everything the load allocates stays live, so collecting
// during it only repeats work (it more than doubled the reopen time of a
// million tasks). The previous setting is restored when the load ends.
func loadPausingGC(b *Broker, size int64, logged []*batch) error {
	if size >= bigFile {
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}
	return b.load(logged)
}

// decodeAll decodes records on every CPU: decoding is most of a reopen.
func decodeAll(seqs []uint64, recs [][]byte) ([]*task, error) {
	all := make([]*task, len(recs))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(recs)/10_000))
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The records are bbolt's memory map: a truncated file faults
			// here, which must become an error, not a crash.
			defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
			defer func() {
				if r := recover(); r != nil {
					errs[w] = fmt.Errorf("reading records: %v", r)
				}
			}()
			names := make(map[string]string) // interned queue names and task types
			intern := func(p []byte) string {
				if s, ok := names[string(p)]; ok {
					return s
				}
				s := string(p)
				names[s] = s
				return s
			}
			for i := w; i < len(recs); i += workers {
				t, err := decodeTask(seqs[i], recs[i], intern)
				if err != nil {
					errs[w] = err
					return
				}
				all[i] = t
			}
		}()
	}
	wg.Wait()
	return all, errors.Join(errs...)
}

// expireOrphans ends the leases of the tasks found active at open: the
// process that held them is gone (it held the directory lock that this one
// now has). Their deadline becomes now, so ExpiredLeases lists them at once.
func (b *Broker) expireOrphans() (tasks, orphans int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for _, q := range b.queues {
		tasks += len(q.tasks)
		var live []*task
		q.active.ascending(func(t *task) bool {
			orphans++
			if t.at.After(now) {
				live = append(live, t)
			}
			return true
		})
		for _, t := range live {
			q.active.remove(t)
			t.at = now
			q.active.insert(t)
			b.putTask(t)
		}
	}
	return tasks, orphans
}

// commitLoop is the committer: it writes each batch of changes as one
// transaction, so that every operation waiting on that batch shares one
// sync, then tells them how it went. It runs until Close.
func (b *Broker) commitLoop() {
	defer close(b.committerDone)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for b.buf.empty() && !b.closed && !b.ckptReady {
			b.work.Wait()
		}
		if b.buf.empty() {
			if !b.closed {
				b.maybeCheckpoint(true)
				continue
			}
			b.closeCheckpoints()
			return
		}
		cur := b.buf
		// A batch written earlier, emptied, is the next one to fill, so
		// that a commit allocates no new maps.
		if n := len(b.spares); n > 0 {
			b.buf, b.spares = b.spares[n-1], b.spares[:n-1]
		} else {
			b.buf = newBatch()
		}
		b.inflight, b.inflightSeq = cur.done, b.nextSeq
		commit := b.commitFn // read under b.mu: tests replace it
		b.mu.Unlock()
		start := time.Now()
		err := commit(cur)
		took := time.Since(start)
		b.mu.Lock()
		b.inflight = nil
		b.commits++
		b.commitTime += took
		if err != nil {
			err = fmt.Errorf("htq: committing to %s: %w", b.dir, err)
			b.writeFailed(err)
		} else {
			b.durableSeq = max(b.durableSeq, b.inflightSeq)
		}
		cur.done.err = err
		close(cur.done.done)
		// The callers just woken, coming back with more, and those
		// already waiting for the next batch.
		want := cur.waiters + b.buf.waiters
		switch {
		case err != nil:
		case b.wal != nil:
			b.ckptQ = append(b.ckptQ, cur)
		case cur.recycle():
			b.spares = append(b.spares, cur)
		}
		b.gather(want)
		b.maybeCheckpoint(b.buf.empty())
	}
}

// gatherYields caps the yields of gather.
const gatherYields = 8

// gather lets the callers that the last commit woke add their next changes
// before the committer takes the next batch, so that the batch carries
// them all instead of the callers splitting into cohorts that alternate,
// each paying a commit. want is the number of callers that would wait for
// the next batch if every one came back: those the last commit woke plus
// those already waiting. gather yields the processor while fewer wait and,
// after the first yield, their number keeps growing; a yield that adds
// none ends it. Changes no caller waits for (a Fetch's) do not count. A
// store with one writer (want < 2) does not wait, and nothing sleeps. The
// caller holds b.mu.
func (b *Broker) gather(want int) {
	if want < 2 {
		return
	}
	for i := range gatherYields {
		n := b.buf.waiters
		if n >= want {
			return
		}
		b.mu.Unlock()
		runtime.Gosched()
		b.mu.Lock()
		if i > 0 && b.buf.waiters == n {
			return
		}
	}
}

// writeFailed restores memory to what the file holds after a failed commit,
// so that nothing the file does not have is ever reported as stored. The
// operations of the failed batch and of the batch gathered meanwhile (which
// built on it) all fail with err. The caller holds b.mu.
func (b *Broker) writeFailed(err error) {
	b.log.Error("htq: write to data file failed; reloading state from the file", "err", err)
	next := b.buf
	b.buf = newBatch()
	next.done.err = err
	close(next.done.done)
	// Memory is reloaded from the file, which must first hold every
	// batch the log does.
	lerr := b.checkpointLocked()
	if lerr == nil {
		lerr = b.load(nil)
	}
	if lerr != nil {
		b.broken = fmt.Errorf("htq: state could not be reloaded after a failed write (%v): %w", err, lerr)
		b.log.Error("htq: broker unusable until reopened", "err", b.broken)
	}
	b.emit(broker.EventResync, "")
}

// begin locks b for an operation. On error b is not locked.
func (b *Broker) begin() error {
	b.mu.Lock()
	switch {
	case b.closed:
		b.mu.Unlock()
		return fmt.Errorf("htq: embedded broker: %w", base.ErrStorageClosed)
	case b.broken != nil:
		err := b.broken
		b.mu.Unlock()
		return err
	}
	return nil
}

// now reads the storage clock.
func (b *Broker) now() time.Time { return normTime(b.clock.Now()) }

// putTask records that t changed. The caller holds b.mu.
func (b *Broker) putTask(t *task) {
	if b.store == nil {
		return
	}
	b.buf.putRecord(t)
	b.work.Signal()
}

// recordTask records that t changed without waking the committer: the
// caller does, once it has released b.mu (unlockAndWake). Woken while the
// lock is still held, the committer would block on it at once and be
// woken a second time by the unlock. The caller holds b.mu.
func (b *Broker) recordTask(t *task) {
	if b.store == nil {
		return
	}
	b.buf.putRecord(t)
}

// unlockAndWake releases b.mu, then wakes the committer, for operations
// whose changes were recorded with recordTask.
func (b *Broker) unlockAndWake() {
	b.mu.Unlock()
	b.work.Signal()
}

// delTask records that t was deleted. The caller holds b.mu.
func (b *Broker) delTask(t *task) {
	if b.store == nil {
		return
	}
	b.buf.tasks[t.seq] = nil
	b.work.Signal()
}

// queue returns the queue called name, creating it when new (a queue exists
// once it is enqueued into, paused or given settings). The caller holds
// b.mu.
func (b *Broker) queue(name string) *queue {
	q := b.queues[name]
	if q == nil {
		q = newQueue(name, 0)
		b.queues[name] = q
	}
	return q
}

// saveQueue records q's entry (flags and settings). The caller holds b.mu.
func (b *Broker) saveQueue(q *queue) {
	if b.store == nil {
		return
	}
	b.buf.queues[q.name] = q.entry()
	b.work.Signal()
}

// registerQueue returns the queue called name, marking it enqueued into.
// The caller holds b.mu.
func (b *Broker) registerQueue(name string) *queue {
	q := b.queue(name)
	if !q.listed {
		q.listed = true
		b.saveQueue(q)
	}
	return q
}

// count adds one to a counter of queue. The caller holds b.mu.
func (b *Broker) count(q *queue, kind byte, now time.Time) {
	day := dayOf(now)
	k := 0
	if kind == statFailed {
		k = 1
	}
	q.count(day, k, 1)
	q.count(allTime, k, 1)
	if b.store == nil {
		return
	}
	queue := q.name
	b.buf.stats[statKey{queue, kind, day}]++
	b.buf.stats[statKey{queue, kind, allTime}]++
	b.work.Signal()
}

// dayOf numbers the UTC day of t as the counters do.
func dayOf(t time.Time) uint64 { return uint64(t.UnixMilli() / 86_400_000) }

// durable returns the ticket of the batch holding the changes made so far,
// or nil when there is nothing to wait for. The caller holds b.mu.
func (b *Broker) durable() *ticket {
	if b.store == nil || b.buf.empty() {
		return nil
	}
	b.buf.waiters++
	return b.buf.done
}

// settled returns the ticket of the batch holding the changes made so far,
// or of the batch being written when nothing is waiting for the next one:
// a call that changed nothing but reports what an earlier call did (an
// Enqueue that found its task stored) waits for it, so that it is on disk
// before the caller hears of it. nil means there is nothing to wait for.
// The caller holds b.mu.
func (b *Broker) settled() *ticket {
	if t := b.durable(); t != nil {
		return t
	}
	return b.inflight
}

// enqueueDurable returns the ticket of the batch that holds the enqueue
// of the task with record number seq, or nil when it is on disk already
// (or the broker keeps nothing on disk). The caller holds b.mu.
func (b *Broker) enqueueDurable(seq uint64) *ticket {
	switch {
	case b.store == nil || seq < b.durableSeq:
		return nil
	case b.inflight != nil && seq < b.inflightSeq:
		return b.inflight
	}
	b.buf.waiters++
	return b.buf.done
}

// wait blocks until the batch of t is on disk. If ctx ends first the change
// may or may not be stored, as with a network timeout on a remote store.
func wait(ctx context.Context, t *ticket) error {
	if t == nil {
		return nil
	}
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return fmt.Errorf("htq: waiting for the write to reach disk: %w", ctx.Err())
	}
}

// Sync waits until every change made so far is on disk, the batch being
// written included.
func (b *Broker) Sync(ctx context.Context) error {
	if err := b.begin(); err != nil {
		return err
	}
	t := b.settled()
	b.mu.Unlock()
	return wait(ctx, t)
}

// Ping checks that the broker is open and usable.
func (b *Broker) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	b.mu.Unlock()
	return nil
}

// Now returns the storage clock's time.
func (b *Broker) Now(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	if err := b.begin(); err != nil {
		return time.Time{}, err
	}
	defer b.mu.Unlock()
	return b.now(), nil
}

// Close writes the changes still in memory, closes the file and releases the
// directory lock. Subscriptions end. Calls after Close fail with
// base.ErrStorageClosed; a second Close does too.
func (b *Broker) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("htq: embedded broker: %w", base.ErrStorageClosed)
	}
	b.closed = true
	for s := range b.subs {
		s.stop()
		b.dropSub(s)
	}
	close(b.logged) // readers waiting for an event see the close
	b.logged = make(chan struct{})
	b.work.Broadcast()
	b.mu.Unlock()
	<-b.committerDone
	var errs []error
	if b.wal != nil {
		<-b.ckptStopped
		if err := b.wal.close(); err != nil {
			errs = append(errs, fmt.Errorf("htq: closing the log of %s: %w", b.dir, err))
		}
	}
	if b.store != nil {
		if err := b.store.close(); err != nil {
			errs = append(errs, fmt.Errorf("htq: closing %s: %w", b.store.file, err))
		}
	}
	if b.lock != nil {
		if err := b.lock.release(); err != nil {
			errs = append(errs, fmt.Errorf("htq: releasing lock of %s: %w", b.dir, err))
		}
	}
	return errors.Join(errs...)
}
