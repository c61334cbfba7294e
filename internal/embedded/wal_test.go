package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	bolt "go.etcd.io/bbolt"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// smallLog keeps the log files small, so that the tests that open a
// directory hundreds of times stay quick.
const smallLog = 64 << 10

// crashCopy copies b's data directory to dst as a crash would leave it:
// every write that returned is in the copy, and no checkpoint is half
// written (the copy waits for the checkpointer). The caller makes no
// calls meanwhile. It returns how many log records the copy holds after
// its checkpoint.
func crashCopy(t testing.TB, b *Broker, dst string) uint64 {
	t.Helper()
	if err := b.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.collectCheckpoint(true)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{DataFileName}, WALFileNames[:]...) {
		data, err := os.ReadFile(filepath.Join(b.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return b.wal.seq - b.ckptSeq
}

// copyDir copies the files of a crash copy.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{DataFileName}, WALFileNames[:]...) {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLogReplay runs random operations with checkpoints now held back,
// now running, and at random moments opens a copy of the directory as a
// crash leaves it: the copy must hold exactly what memory held, and pass
// the invariant check. The log files rotate many times meanwhile.
func TestLogReplay(t *testing.T) {
	dir := t.TempDir()
	clock := clockwork.NewFakeClockAt(time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC))
	opts := Options{Clock: clock, Logger: discardLogger(), walSize: smallLog}
	b, err := Open(t.Context(), dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	queues := []string{"a", "b", "c"}
	var leases []*broker.Lease
	n, replayed := 0, uint64(0)
	for step := range 2000 {
		q := queues[rng.IntN(len(queues))]
		switch r := rng.IntN(100); {
		case r < 40:
			n++
			m := &base.TaskMessage{ID: fmt.Sprintf("t%d", n), Type: "x", Queue: q, Payload: []byte{byte(n)}, MaxRetry: 3}
			if rng.IntN(4) == 0 {
				m.UniqueKey, m.UniqueTTL = fmt.Sprintf("u%d", rng.IntN(5)), time.Minute
			}
			var at time.Time
			if rng.IntN(4) == 0 {
				at = clock.Now().Add(time.Duration(rng.IntN(60)) * time.Second)
			}
			_ = b.Enqueue(ctx, broker.EnqueueParams{Msg: m, ProcessAt: at})
		case r < 55:
			ls, err := b.Fetch(ctx, broker.FetchParams{Queue: q, Max: 1 + rng.IntN(3), LeaseDuration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, ls...)
		case r < 75 && len(leases) > 0:
			i := rng.IntN(len(leases))
			l := leases[i].Ref()
			leases = append(leases[:i], leases[i+1:]...)
			switch rng.IntN(3) {
			case 0:
				_ = b.Retry(ctx, broker.RetryParams{Lease: l, Delay: time.Duration(rng.IntN(30)) * time.Second, ErrMsg: "boom", IsFailure: true})
			case 1:
				_ = b.Archive(ctx, broker.ArchiveParams{Lease: l, ErrMsg: "dead"})
			default:
				b.Complete(ctx, []broker.LeaseRef{l})
			}
		case r < 82:
			if _, err := b.Forward(ctx, q, 10); err != nil {
				t.Fatal(err)
			}
		case r < 86:
			if err := b.PutMeta(ctx, fmt.Sprintf("k%d", rng.IntN(3)), []byte{byte(step)}); err != nil {
				t.Fatal(err)
			}
		case r < 88:
			if err := b.PauseQueue(ctx, q); err != nil && !errors.Is(err, base.ErrQueuePaused) {
				t.Fatal(err)
			}
		case r < 95:
			clock.Advance(time.Duration(rng.IntN(20)) * time.Second)
		default:
			_ = b.DeleteTask(ctx, q, fmt.Sprintf("t%d", 1+rng.IntN(n+1)))
		}
		if step%100 == 50 {
			b.mu.Lock()
			b.ckptHold = rng.IntN(2) == 0
			b.mu.Unlock()
		}
		if step%150 != 149 {
			continue
		}
		img := filepath.Join(t.TempDir(), "img")
		replayed += crashCopy(t, b, img)
		before := snapshot(t, b)
		c, err := Open(ctx, img, opts)
		if err != nil {
			t.Fatalf("step %d: open of the crash copy: %v", step, err)
		}
		after := snapshot(t, c)
		if err := c.CheckInvariants(ctx); err != nil {
			t.Fatalf("step %d: crash copy: %v", step, err)
		}
		_ = c.Close()
		requireSameSnapshot(t, step, before, after)
	}
	b.mu.Lock()
	records, ckpt := b.wal.seq, b.ckptSeq
	b.mu.Unlock()
	if replayed == 0 || ckpt == 0 {
		t.Fatalf("the crash copies replayed %d log records, and the checkpoint is at %d of %d: the test did not exercise both", replayed, ckpt, records)
	}
	t.Logf("%d log records written, %d replayed by the crash copies", records, replayed)
}

// logDir makes a crash copy of a directory whose log holds n enqueues of
// one task each (t0…) after a checkpoint of none, and returns it with the
// offsets of the records in log file 0 (offs[i] is where record i starts;
// offs[n] where the last ends).
func logDir(t *testing.T, n int) (string, []int) {
	t.Helper()
	dir := t.TempDir()
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger(), walSize: smallLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	b.mu.Lock()
	b.ckptHold = true
	b.mu.Unlock()
	for i := range n {
		m := &base.TaskMessage{ID: fmt.Sprintf("t%d", i), Type: "x", Queue: "q", Payload: bytes.Repeat([]byte{byte(i)}, 100)}
		if err := b.Enqueue(t.Context(), broker.EnqueueParams{Msg: m}); err != nil {
			t.Fatal(err)
		}
	}
	img := filepath.Join(t.TempDir(), "img")
	crashCopy(t, b, img)
	data, err := os.ReadFile(filepath.Join(img, WALFileNames[0]))
	if err != nil {
		t.Fatal(err)
	}
	salt := imgSession(t, img).salt
	offs := []int{0}
	for {
		_, size, ok := walFrameAt(data, offs[len(offs)-1], salt)
		if !ok {
			break
		}
		offs = append(offs, offs[len(offs)-1]+size)
	}
	if len(offs) != n+1 {
		t.Fatalf("log file 0 holds %d records, want %d (one per enqueue)", len(offs)-1, n)
	}
	return img, offs
}

// imgSession returns the log session that the data file of the closed
// directory dir names.
func imgSession(t testing.TB, dir string) walSession {
	t.Helper()
	s, err := openBolt(filepath.Join(dir, DataFileName), true, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	_, sess, _, err := s.checkpointSeq()
	if err != nil {
		t.Fatal(err)
	}
	if sess.salt == 0 {
		t.Fatalf("%s names no log session", dir)
	}
	return sess
}

// openHas opens dir and reports which of t0…t(n-1) it holds, after an
// invariant check.
func openHas(t *testing.T, dir string, n int) ([]bool, error) {
	t.Helper()
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger(), walSize: smallLog})
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.Close() }()
	if err := b.CheckInvariants(t.Context()); err != nil {
		t.Fatal(err)
	}
	has := make([]bool, n)
	for i := range n {
		_, err := b.GetTaskInfo(t.Context(), "q", fmt.Sprintf("t%d", i))
		has[i] = err == nil
	}
	return has, nil
}

// TestLogTornLastRecord cuts the last record of the log at every offset
// (the bytes after the cut as a power loss leaves them: zeros, or
// garbage): every open succeeds and loses the last enqueue only, which
// was never acknowledged; uncut, it is kept.
func TestLogTornLastRecord(t *testing.T) {
	const n = 12
	img, offs := logDir(t, n)
	file := WALFileNames[0]
	orig, err := os.ReadFile(filepath.Join(img, file))
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "work")
	rng := rand.New(rand.NewPCG(5, 6))
	start, end := offs[n-1], offs[n]
	for cut := start; cut <= end; cut++ {
		for _, garbage := range []bool{false, true} {
			if cut == end && garbage {
				continue
			}
			copyDir(t, img, work)
			data := bytes.Clone(orig)
			for i := cut; i < end; i++ {
				data[i] = 0
				if garbage {
					data[i] = byte(rng.Uint32())
				}
			}
			if err := os.WriteFile(filepath.Join(work, file), data, 0o600); err != nil {
				t.Fatal(err)
			}
			has, err := openHas(t, work, n)
			if err != nil {
				t.Fatalf("cut at %d of the last record [%d, %d) (garbage %v): %v", cut, start, end, garbage, err)
			}
			for i := range n - 1 {
				if !has[i] {
					t.Fatalf("cut at %d (garbage %v): acknowledged t%d lost", cut, garbage, i)
				}
			}
			// Bytes that were zeros already leave the record whole.
			whole := bytes.Equal(data[start:end], orig[start:end])
			if has[n-1] != whole {
				t.Fatalf("cut at %d of [%d, %d) (garbage %v): last task kept = %v", cut, start, end, garbage, has[n-1])
			}
		}
	}
	// The open cuts the torn record off: after more writes and a crash,
	// the directory holds them and still not the torn one.
	copyDir(t, img, work)
	data := bytes.Clone(orig)
	clear(data[start+walHeader+3 : end])
	if err := os.WriteFile(filepath.Join(work, file), data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(t.Context(), work, Options{Logger: discardLogger(), walSize: smallLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	if err := b.Enqueue(t.Context(), broker.EnqueueParams{Msg: &base.TaskMessage{ID: "after", Type: "x", Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(t.TempDir(), "again")
	crashCopy(t, b, again)
	has, err := openHas(t, again, n)
	if err != nil || has[n-1] || !has[n-2] {
		t.Fatalf("reopen after the cut: %v, kept %v", err, has)
	}
	c, err := Open(t.Context(), again, Options{Logger: discardLogger(), walSize: smallLog})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if _, err := c.GetTaskInfo(t.Context(), "q", "after"); err != nil {
		t.Fatalf("the enqueue after the cut: %v", err)
	}
}

// TestLogDamagedRecord damages a record that acknowledged records follow,
// in its payload and in its header: Open refuses with ErrCorrupt naming
// the log file, instead of dropping what follows.
func TestLogDamagedRecord(t *testing.T) {
	const n = 8
	img, offs := logDir(t, n)
	file := filepath.Join(WALFileNames[0])
	orig, err := os.ReadFile(filepath.Join(img, file))
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(t.TempDir(), "work")
	for _, at := range []struct {
		what string
		off  int
	}{
		{"payload", offs[3] + walHeader + 10},
		{"length", offs[3] + 1},
		{"salt", offs[3] + 6},
		{"number", offs[3] + 15},
		{"payload checksum", offs[3] + 21},
		{"header checksum", offs[3] + 26},
		{"first record", offs[0] + 30},
	} {
		copyDir(t, img, work)
		data := bytes.Clone(orig)
		data[at.off] ^= 0x5a
		if err := os.WriteFile(filepath.Join(work, file), data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := openHas(t, work, n)
		name := filepath.Join(work, file)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
			t.Fatalf("damaged %s: got %v, want ErrCorrupt naming %s", at.what, err, name)
		}
	}
	// Undamaged, the copy opens with every task.
	copyDir(t, img, work)
	has, err := openHas(t, work, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range has {
		if !ok {
			t.Fatalf("t%d lost", i)
		}
	}
}

// TestLogMissingRecord: a log whose records after the checkpoint do not
// start right after it (a record lost) is refused.
func TestLogMissingRecord(t *testing.T) {
	const n = 6
	img, offs := logDir(t, n)
	path := filepath.Join(img, WALFileNames[0])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Drop the first record: the rest start at record 2.
	data = append(data[offs[1]:], make([]byte, offs[1])...)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openHas(t, img, n); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

// TestBatchCodec: a batch with every kind of change survives its log
// encoding.
func TestBatchCodec(t *testing.T) {
	b := newBatch()
	b.tasks[1] = []byte("rec")
	b.tasks[2] = nil
	b.queues["q"] = []byte{flagListed}
	b.claims["c"] = nil
	b.kv["k"] = []byte{}
	b.wf["w"] = []byte("x")
	b.wfSpecs["s"] = nil
	b.stats[statKey{"q", statProcessed, 7}] = 3
	b.dropStats["old"] = true
	got, err := decodeBatch(appendBatch(nil, b))
	if err != nil {
		t.Fatal(err)
	}
	got.done, b.done = nil, nil
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("decoded %+v, want %+v", got, b)
	}
}

// TestSalvageReplaysLog: Salvage copies what the log holds after the
// checkpoint, up to a damaged record, into the new directory.
func TestSalvageReplaysLog(t *testing.T) {
	const n = 8
	img, offs := logDir(t, n)
	path := filepath.Join(img, WALFileNames[0])
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[offs[5]+walHeader+4] ^= 0xff // record 6 damaged: t5 and after lost
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openHas(t, img, n); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: got %v, want ErrCorrupt", err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	rep, err := Salvage(t.Context(), img, dst)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LogRecords != 5 {
		t.Fatalf("replayed %d log records, want 5: %+v", rep.LogRecords, rep)
	}
	has, err := openHas(t, dst, n)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range has {
		if ok != (i < 5) {
			t.Fatalf("salvaged copy: t%d kept = %v, want %v", i, ok, i < 5)
		}
	}
}

// frameAt builds a log frame of the session with salt: record seq holding
// batch bt.
func frameAt(salt, seq uint64, bt *batch) []byte {
	f := appendBatch(make([]byte, walHeader), bt)
	putFrameHeader(f, salt, seq)
	return f
}

// frameOffsets returns where the records of the session with salt start
// in data, from its start, and where the last ends.
func frameOffsets(data []byte, salt uint64) []int {
	offs := []int{0}
	for {
		_, size, ok := walFrameAt(data, offs[len(offs)-1], salt)
		if !ok {
			return offs
		}
		offs = append(offs, offs[len(offs)-1]+size)
	}
}

// TestLogSessions writes a log file over an earlier session's records, as
// a reopen after a crash does, and puts frames that must not count after
// the live records: the earlier session's own (with the next record
// number), one of an unknown session, and a task payload that is a whole
// frame. Opens keep exactly the acknowledged enqueues: with the last
// record cut at every offset, all but it; with a middle record damaged,
// Open refuses with ErrCorrupt.
func TestLogSessions(t *testing.T) {
	const nA, nB = 20, 5
	opts := Options{Logger: discardLogger(), walSize: smallLog}
	enqueue := func(b *Broker, i int, payload []byte) {
		t.Helper()
		m := &base.TaskMessage{ID: fmt.Sprintf("t%d", i), Type: "x", Queue: "q", Payload: payload}
		if err := b.Enqueue(t.Context(), broker.EnqueueParams{Msg: m}); err != nil {
			t.Fatal(err)
		}
	}
	hold := func(b *Broker) {
		b.mu.Lock()
		b.ckptHold = true
		b.mu.Unlock()
	}
	// Session A: large records, crash.
	a, err := Open(t.Context(), t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	hold(a)
	for i := range nA {
		enqueue(a, i, bytes.Repeat([]byte{byte(i + 1)}, 900))
	}
	imgA := filepath.Join(t.TempDir(), "a")
	crashCopy(t, a, imgA)
	_ = a.Close()
	saltA := imgSession(t, imgA).salt
	// Session B replays A and writes small records over the start of
	// the same file; its last carries a forged frame as its payload.
	b, err := Open(t.Context(), imgA, opts)
	if err != nil {
		t.Fatal(err)
	}
	hold(b)
	forgedKV := newBatch()
	forgedKV.kv["forged"] = []byte("yes")
	for i := nA; i < nA+nB-1; i++ {
		enqueue(b, i, []byte("small"))
	}
	enqueue(b, nA+nB-1, frameAt(rand.Uint64()|1, 1<<40, forgedKV))
	imgB := filepath.Join(t.TempDir(), "b")
	crashCopy(t, b, imgB)
	_ = b.Close()
	saltB := imgSession(t, imgB).salt
	if saltA == saltB {
		t.Fatal("two sessions share a salt")
	}
	path := filepath.Join(imgB, WALFileNames[0])
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(orig, saltB)
	if len(offs) != nB+1 {
		t.Fatalf("session B's file holds %d records, want %d", len(offs)-1, nB)
	}
	end := offs[nB]
	if bytes.Equal(orig[end:end+64], make([]byte, 64)) {
		t.Fatalf("zeros follow session B's records at %d, not session A's", end)
	}
	// After the live records: session A's salt with the next number, then
	// an unknown session's, then A's again.
	stale := slices.Concat(frameAt(saltA, nA+nB+1, forgedKV), frameAt(rand.Uint64()|1, nA+nB+1, forgedKV), frameAt(saltA, nA+nB+2, forgedKV))
	work := filepath.Join(t.TempDir(), "work")
	check := func(data []byte, keepLast bool, what string) {
		t.Helper()
		copyDir(t, imgB, work)
		if err := os.WriteFile(filepath.Join(work, WALFileNames[0]), data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Open(t.Context(), work, opts)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer func() { _ = c.Close() }()
		if err := c.CheckInvariants(t.Context()); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		for i := range nA + nB {
			_, err := c.GetTaskInfo(t.Context(), "q", fmt.Sprintf("t%d", i))
			if want := i < nA+nB-1 || keepLast; (err == nil) != want {
				t.Fatalf("%s: t%d kept = %v, want %v", what, i, err == nil, want)
			}
		}
		c.mu.Lock()
		_, forged := c.kv["forged"]
		c.mu.Unlock()
		if forged {
			t.Fatalf("%s: a frame that is not a record of the session was replayed", what)
		}
	}
	withStale := bytes.Clone(orig)
	copy(withStale[end:], stale)
	check(withStale, true, "stale frames after the live records")
	// The last record cut at every offset, the rest as it was: the stale
	// frames, the forged payload's frame, session A's records.
	for cut := offs[nB-1]; cut < end; cut++ {
		data := bytes.Clone(withStale)
		copy(data[cut:], stale)
		// Bytes that were the same already leave the record whole.
		whole := bytes.Equal(data[offs[nB-1]:end], orig[offs[nB-1]:end])
		check(data, whole, fmt.Sprintf("last record cut at %d of [%d, %d)", cut, offs[nB-1], end))
	}
	// A middle record damaged: the records after it are the session's.
	for _, off := range []int{offs[2] + 3, offs[2] + 10, offs[2] + walHeader + 2} {
		data := bytes.Clone(withStale)
		data[off] ^= 0x20
		copyDir(t, imgB, work)
		if err := os.WriteFile(filepath.Join(work, WALFileNames[0]), data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Open(t.Context(), work, opts)
		if err == nil {
			_ = c.Close()
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("record 3 damaged at %d: got %v, want ErrCorrupt", off, err)
		}
	}
}

// TestLogFileRemovedOrCut: after a crash, a log file deleted or cut short
// by hand (it may have held acknowledged records) makes Open refuse with
// ErrCorrupt naming it, and the refused Open changes nothing: with the
// file put back, every task is there. After a clean Close the log holds
// nothing the data file lacks, and deleting it loses nothing.
func TestLogFileRemovedOrCut(t *testing.T) {
	const n = 6
	img, offs := logDir(t, n)
	work := filepath.Join(t.TempDir(), "work")
	for _, c := range []struct {
		what string
		name string
		harm func(path string) error
	}{
		{"file 0 deleted", WALFileNames[0], os.Remove},
		{"file 1 deleted", WALFileNames[1], os.Remove},
		{"file 0 emptied", WALFileNames[0], func(p string) error { return os.Truncate(p, 0) }},
		{"file 0 cut after record 3", WALFileNames[0], func(p string) error { return os.Truncate(p, int64(offs[3])) }},
		{"file 1 cut", WALFileNames[1], func(p string) error { return os.Truncate(p, smallLog/2) }},
	} {
		copyDir(t, img, work)
		path := filepath.Join(work, c.name)
		if err := c.harm(path); err != nil {
			t.Fatal(err)
		}
		_, err := openHas(t, work, n)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: got %v, want ErrCorrupt naming %s", c.what, err, path)
		}
		data, err := os.ReadFile(filepath.Join(img, c.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		has, err := openHas(t, work, n)
		if err != nil {
			t.Fatalf("%s, then put back: %v", c.what, err)
		}
		if slices.Contains(has, false) {
			t.Fatalf("%s, then put back: kept %v", c.what, has)
		}
	}
	// work was opened and closed cleanly: its log may go.
	for _, name := range WALFileNames {
		if err := os.Remove(filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	has, err := openHas(t, work, n)
	if err != nil || slices.Contains(has, false) {
		t.Fatalf("log deleted after a clean close: %v, kept %v", err, has)
	}
}

// TestLogLegacyFormat: a data file from the log's first format (a
// checkpoint but no session record) opens when its log holds nothing
// after the checkpoint, and is refused with ErrCorrupt when it does: this
// build cannot replay those records.
func TestLogLegacyFormat(t *testing.T) {
	dir := t.TempDir()
	fillDir(t, dir, 3)
	// dropSession takes the session record away, as the first format
	// left the file, and returns the checkpoint.
	dropSession := func() uint64 {
		t.Helper()
		s, err := openBolt(filepath.Join(dir, DataFileName), false, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		var ckpt uint64
		if err := s.db.Update(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			ckpt = binary.BigEndian.Uint64(meta.Get(keyCheckpoint))
			return meta.Delete(keyWAL)
		}); err != nil {
			t.Fatal(err)
		}
		return ckpt
	}
	ckpt := dropSession()
	legacy := func(seq uint64) []byte {
		payload := appendBatch(nil, &batch{kv: map[string][]byte{"k": []byte("v")}})
		h := make([]byte, 20)
		binary.BigEndian.PutUint32(h[0:4], uint32(len(payload)))
		binary.BigEndian.PutUint64(h[4:12], seq)
		binary.BigEndian.PutUint32(h[12:16], crc32.Checksum(payload, crc32c))
		binary.BigEndian.PutUint32(h[16:20], crc32.Checksum(h[:16], crc32c))
		return append(h, payload...)
	}
	path := filepath.Join(dir, WALFileNames[0])
	data := make([]byte, smallLog)
	copy(data, slices.Concat(legacy(ckpt-1), legacy(ckpt)))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger(), walSize: smallLog})
	if err != nil {
		t.Fatalf("legacy log holding nothing after the checkpoint: %v", err)
	}
	if _, err := b.GetTaskInfo(t.Context(), "q", "t000002"); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// That open and Close wrote a session record; take it away again.
	ckpt = dropSession()
	copy(data, slices.Concat(legacy(ckpt), legacy(ckpt+1)))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openHas(t, dir, 3); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("legacy log holding records after the checkpoint: got %v, want ErrCorrupt naming %s", err, path)
	}
}
