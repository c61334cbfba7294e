package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// fillDir makes a data directory holding n pending tasks and returns the
// path of its data file.
func fillDir(t *testing.T, dir string, n int) string {
	t.Helper()
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]broker.EnqueueParams, n)
	for i := range ps {
		ps[i] = broker.EnqueueParams{Msg: &base.TaskMessage{ID: fmt.Sprintf("t%06d", i), Type: "x", Payload: make([]byte, 100), Queue: "q"}}
	}
	for _, err := range b.EnqueueBatch(t.Context(), ps) {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, DataFileName)
}

// wantCorrupt opens dir and wants an error wrapping ErrCorrupt that names
// the data file.
func wantCorrupt(t *testing.T, dir string) {
	t.Helper()
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	if err == nil {
		_ = b.Close()
		t.Fatal("Open of a damaged file succeeded")
	}
	file := filepath.Join(dir, DataFileName)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), file) {
		t.Fatalf("Open of a damaged file: got %v, want ErrCorrupt naming %s", err, file)
	}
	t.Logf("error: %v", err)
}

func TestCorruptNotADatabase(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DataFileName), []byte(strings.Repeat("not a bbolt file\n", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, dir)
}

func TestCorruptTruncated(t *testing.T) {
	dir := t.TempDir()
	file := fillDir(t, dir, 5000)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, fi.Size()/3); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, dir)
}

func TestCorruptTruncatedToOnePage(t *testing.T) {
	dir := t.TempDir()
	file := fillDir(t, dir, 10)
	if err := os.Truncate(file, 4096); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, dir)
}

func TestCorruptDamagedPages(t *testing.T) {
	dir := t.TempDir()
	file := fillDir(t, dir, 5000)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// Overwrite every page after the two meta pages and the first few
	// with a pattern: branch and leaf pages both get hit.
	for off := 6 * 4096; off+4096 <= len(data); off += 4096 {
		for i := 0; i < 64; i++ {
			data[off+i] = 0xA5
		}
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, dir)
}

func TestCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	file := fillDir(t, dir, 10)
	s, err := openBolt(file, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := newBatch()
	b.tasks[3] = []byte{recordVersion, 2, 200} // truncated after the state
	if err := s.commit(b); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, dir)
}

func TestPathIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(t.Context(), file, Options{})
	if !errors.Is(err, base.ErrInvalidArgument) {
		t.Fatalf("Open of a file path: got %v, want ErrInvalidArgument", err)
	}
}

// TestSalvage damages a few pages in the middle of a file that Open then
// refuses, and Salvage copies what is left into a directory that opens.
func TestSalvage(t *testing.T) {
	src := t.TempDir()
	file := fillDir(t, src, 20000)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pages := len(data) / 4096
	for _, p := range []int{pages / 3, pages / 2, pages/2 + 1} {
		for i := 0; i < 4096; i++ {
			data[p*4096+i] = 0x5A
		}
	}
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantCorrupt(t, src)
	dst := filepath.Join(t.TempDir(), "salvaged")
	rep, err := Salvage(t.Context(), src, dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", rep)
	if rep.Tasks < 19000 || rep.Tasks >= 20000 || rep.DamagedRanges == 0 {
		t.Fatalf("salvage: %+v; want most of 20000 tasks and some damage", rep)
	}
	b, err := Open(t.Context(), dst, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatalf("Open of the salvaged directory: %v", err)
	}
	defer b.Close()
	if err := b.CheckInvariants(t.Context()); err != nil {
		t.Fatal(err)
	}
	ls, err := b.Fetch(t.Context(), broker.FetchParams{Queue: "q", Max: 100000, LeaseDuration: time.Minute})
	if err != nil || len(ls) != rep.Tasks {
		t.Fatalf("Fetch from the salvaged directory: %d tasks, %v; want %d", len(ls), err, rep.Tasks)
	}
}

// TestSalvageCompacts: on a healthy directory Salvage copies everything
// (tasks, settings, counters, meta records) into a file as small as the
// live data.
func TestSalvageCompacts(t *testing.T) {
	src := t.TempDir()
	ctx := t.Context()
	fillDir(t, src, 20000)
	b, err := Open(ctx, src, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.DeleteAll(ctx, "q", base.StatePending, ""); err != nil {
		t.Fatal(err)
	}
	kept := broker.EnqueueParams{Msg: &base.TaskMessage{ID: "kept", Type: "x", Queue: "q"}}
	if err := b.Enqueue(ctx, kept); err != nil {
		t.Fatal(err)
	}
	ls, _ := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute})
	b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})
	if err := b.Enqueue(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if err := b.SetQueueSettings(ctx, "q", broker.QueueSettings{MaxConcurrency: 3}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutMeta(ctx, "token", []byte("secret")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "compact")
	rep, err := Salvage(ctx, src, dst)
	if err != nil || rep.Tasks != 1 || rep.DamagedRanges != 0 || len(rep.Lost) != 0 {
		t.Fatalf("Salvage: %+v, %v", rep, err)
	}
	before, _ := os.Stat(filepath.Join(src, DataFileName))
	after, _ := os.Stat(filepath.Join(dst, DataFileName))
	t.Logf("file %d bytes, compacted copy %d bytes", before.Size(), after.Size())
	if after.Size() >= before.Size()/4 {
		t.Errorf("the copy (%d bytes) is not much smaller than the original (%d)", after.Size(), before.Size())
	}
	c, err := Open(ctx, dst, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.QueueStats(ctx, "q")
	if err != nil || st.Pending != 1 || st.Settings.MaxConcurrency != 3 || st.ProcessedTotal != 1 {
		t.Fatalf("copy: %+v, %v", st, err)
	}
	if v, err := c.GetMeta(ctx, "token"); err != nil || string(v) != "secret" {
		t.Fatalf("meta record: %q, %v", v, err)
	}
	if err := c.CheckInvariants(ctx); err != nil {
		t.Fatal(err)
	}
}
