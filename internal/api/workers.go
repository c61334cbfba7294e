package api

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
	"unicode"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/jonboulle/clockwork"
)

// Presence of pull workers.
const (
	// workerTTL is how long a pull worker stays listed after its last
	// call (fetch, heartbeat, ack or fail).
	workerTTL = time.Minute
	// workerFlushEvery is how often changed presence records are written.
	workerFlushEvery = time.Second
	// workerRenewEvery is how often an unchanged record is written again
	// while its worker keeps calling.
	workerRenewEvery = workerTTL / 3
	// maxWorkerIDLen bounds worker_id.
	maxWorkerIDLen = 128
	// pullWorkerStatus is the status of a pull worker's presence record.
	pullWorkerStatus = "pull"
	// anonymousWorker names the leases of pull workers without a
	// worker_id; they have no presence record.
	anonymousWorker = "http-pull"
)

// pullWorkers keeps a presence record (the one Go Servers keep, listed by
// GET /v1/servers) for each pull worker that names itself with worker_id:
// its address, the queues it fetches from and the tasks it holds. The
// record is written with a ttl of workerTTL, at most every
// workerFlushEvery, from what this process saw: the tasks it leased to the
// worker, less those acked, failed or lost through it, less those whose
// lease ran out without a heartbeat through it. A worker whose calls are
// spread over several htq serve processes shows, at any moment, what the
// process that wrote its record last saw.
type pullWorkers struct {
	b      presenceStore
	clock  clockwork.Clock
	logger *slog.Logger

	mu sync.Mutex
	m  map[string]*pullWorker
}

// presenceStore is what pullWorkers needs of the storage.
type presenceStore interface {
	WriteServerState(ctx context.Context, info *base.ServerInfo, ttl time.Duration) error
	GetTaskInfo(ctx context.Context, queue, id string) (*base.TaskInfo, error)
}

type pullWorker struct {
	info  base.ServerInfo // without ActiveTasks
	tasks map[string]*heldTask
	seen  time.Time // last call
	// dirty is set when the record changed since it was last written.
	dirty   bool
	written time.Time
}

// heldTask is a task leased to a worker, until its lease deadline.
type heldTask struct {
	task  base.ActiveTask
	until time.Time
}

func newPullWorkers(b presenceStore, clock clockwork.Clock, logger *slog.Logger) *pullWorkers {
	return &pullWorkers{b: b, clock: clock, logger: logger, m: make(map[string]*pullWorker)}
}

// checkWorkerID refuses a worker_id the records cannot hold: at most
// maxWorkerIDLen bytes of printable text without spaces or '/'.
func checkWorkerID(id string) error {
	if len(id) > maxWorkerIDLen {
		return invalid(fmt.Sprintf("worker_id of %d bytes; at most %d", len(id), maxWorkerIDLen))
	}
	for _, r := range id {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '/' {
			return invalid(fmt.Sprintf("worker_id %q: want printable text without spaces or '/'", id))
		}
	}
	return nil
}

// remoteHost is the address a request came from (without the port).
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// worker returns the worker called id, adding it when new. The caller
// holds w.mu.
func (w *pullWorkers) worker(id, host string, now time.Time) *pullWorker {
	pw := w.m[id]
	if pw == nil {
		pw = &pullWorker{
			info:  base.ServerInfo{ID: id, Host: host, Queues: map[string]int{}, Started: now, Status: pullWorkerStatus},
			tasks: make(map[string]*heldTask), dirty: true,
		}
		w.m[id] = pw
	}
	pw.seen = now
	return pw
}

// fetched records a fetch by worker id (from host) of queues, asking for
// count tasks, and the leases it got.
func (w *pullWorkers) fetched(id, host string, queues []string, count int, leases []leasedTask) {
	if id == "" {
		return
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	pw := w.worker(id, host, now)
	for _, q := range queues {
		if _, ok := pw.info.Queues[q]; !ok {
			pw.info.Queues[q] = 1
			pw.dirty = true
		}
	}
	if count > pw.info.Concurrency {
		pw.info.Concurrency = count
		pw.dirty = true
	}
	for _, l := range leases {
		pw.tasks[l.Queue+"/"+l.ID] = &heldTask{
			task:  base.ActiveTask{ID: l.ID, Queue: l.Queue, Type: l.Type, Started: now},
			until: l.LeaseDeadline,
		}
		pw.dirty = true
	}
}

// extended records a heartbeat that extended the lease of token on task
// queue/id until until. A task this process did not lease is looked up
// once, for its type.
func (w *pullWorkers) extended(ctx context.Context, token, host, queue, id string, until time.Time) {
	wid := broker.ServerOfToken(token)
	if wid == "" || wid == anonymousWorker {
		return
	}
	key := queue + "/" + id
	w.mu.Lock()
	pw := w.worker(wid, host, w.clock.Now())
	held := pw.tasks[key]
	if held != nil {
		held.until = until
	}
	w.mu.Unlock()
	if held != nil {
		return
	}
	ti, err := w.b.GetTaskInfo(ctx, queue, id)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pw = w.worker(wid, host, w.clock.Now())
	pw.tasks[key] = &heldTask{task: base.ActiveTask{ID: id, Queue: queue, Type: ti.Message.Type, Started: w.clock.Now()}, until: until}
	pw.dirty = true
}

// finished records that the task queue/id leased with token is no longer
// held (acked, failed, or its lease was lost).
func (w *pullWorkers) finished(token, queue, id string) {
	wid := broker.ServerOfToken(token)
	if wid == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	pw := w.m[wid]
	if pw == nil {
		return
	}
	pw.seen = w.clock.Now()
	if _, ok := pw.tasks[queue+"/"+id]; ok {
		delete(pw.tasks, queue+"/"+id)
		pw.dirty = true
	}
}

// run writes the records every workerFlushEvery until ctx is done.
func (w *pullWorkers) run(ctx context.Context) { every(ctx, w.clock, workerFlushEvery, w.flush) }

// flush forgets the workers silent for workerTTL (their records expire)
// and the tasks whose lease ran out, and writes the records that changed
// or are due for renewal.
func (w *pullWorkers) flush(ctx context.Context) {
	now := w.clock.Now()
	var write []*base.ServerInfo
	w.mu.Lock()
	for id, pw := range w.m {
		if now.Sub(pw.seen) >= workerTTL {
			delete(w.m, id)
			continue
		}
		for key, held := range pw.tasks {
			if now.After(held.until) {
				delete(pw.tasks, key)
				pw.dirty = true
			}
		}
		if !pw.dirty && now.Sub(pw.written) < workerRenewEvery {
			continue
		}
		info := pw.info
		info.Queues = make(map[string]int, len(pw.info.Queues))
		for q, n := range pw.info.Queues {
			info.Queues[q] = n
		}
		info.ActiveTasks = make([]base.ActiveTask, 0, len(pw.tasks))
		for _, held := range pw.tasks {
			info.ActiveTasks = append(info.ActiveTasks, held.task)
		}
		sort.Slice(info.ActiveTasks, func(i, j int) bool { return info.ActiveTasks[i].Started.Before(info.ActiveTasks[j].Started) })
		pw.dirty, pw.written = false, now
		write = append(write, &info)
	}
	w.mu.Unlock()
	for _, info := range write {
		if err := w.b.WriteServerState(ctx, info, workerTTL); err != nil && ctx.Err() == nil {
			w.logger.Warn("write a pull worker's presence failed", "worker", info.ID, "err", err)
			w.mu.Lock()
			if pw := w.m[info.ID]; pw != nil {
				pw.dirty = true
			}
			w.mu.Unlock()
		}
	}
}
