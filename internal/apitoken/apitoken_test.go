package apitoken

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/storage"
)

// metaStore returns the meta records of a real in-memory embedded store.
func metaStore(t *testing.T) broker.MetaStore {
	t.Helper()
	st, err := storage.Open(context.Background(), "mem:", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return storage.BrokerOf(st)
}

// A rotation makes a new current token and keeps the old one for the
// grace period only; a rotation without grace drops it at once; earlier
// grace entries survive later rotations until they end.
func TestRotate(t *testing.T) {
	ctx := context.Background()
	ms := metaStore(t)
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if _, err := Load(ctx, ms, now); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("Load of nothing = %v; want ErrNotFound", err)
	}
	if _, err := Rotate(ctx, ms, time.Hour, now); !errors.Is(err, base.ErrNotFound) {
		t.Fatalf("Rotate of nothing = %v; want ErrNotFound", err)
	}
	first, _ := Generate()
	if !strings.HasPrefix(first, Prefix) || len(first) != len(Prefix)+43 {
		t.Fatalf("Generate = %q", first)
	}
	if err := ms.PutMeta(ctx, CurrentKey, []byte(first)); err != nil {
		t.Fatal(err)
	}
	set, err := Rotate(ctx, ms, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	second := set.Current
	if second == first || !set.Accepts(first, now) || !set.Accepts(second, now) {
		t.Fatalf("after rotation with grace: %+v", set)
	}
	if set.Accepts(first, now.Add(time.Hour)) || set.Accepts("", now) || set.Accepts(first+"x", now) {
		t.Error("accepts what it should not")
	}
	loaded, err := Load(ctx, ms, now.Add(time.Minute))
	if err != nil || loaded.Current != second || len(loaded.Grace) != 1 || loaded.Grace[0].Token != first {
		t.Fatalf("Load = %+v, %v", loaded, err)
	}
	set, err = Rotate(ctx, ms, 0, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if set.Accepts(second, now.Add(time.Minute)) || !set.Accepts(first, now.Add(time.Minute)) || !set.Accepts(set.Current, now) {
		t.Errorf("rotation without grace: %+v", set)
	}
	if loaded, _ := Load(ctx, ms, now.Add(2*time.Hour)); len(loaded.Grace) != 0 {
		t.Errorf("ended grace still loaded: %+v", loaded.Grace)
	}
	for _, g := range []time.Duration{-time.Second, MaxGrace + time.Second} {
		if _, err := Rotate(ctx, ms, g, now); !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("Rotate(grace %v) = %v; want ErrInvalidArgument", g, err)
		}
	}
}

// A Checker sees a rotation made through another process: the new token
// at its first use, the old one until its grace ends, and a dropped one
// no later than MaxAge.
func TestChecker(t *testing.T) {
	ctx := context.Background()
	ms := metaStore(t)
	first, _ := Generate()
	ms.PutMeta(ctx, CurrentKey, []byte(first))
	var mu sync.Mutex
	now := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	var changes []string
	c, err := NewChecker(ctx, ms, CheckerOptions{Now: clock, OnChange: func(tok string) { changes = append(changes, tok) }})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Accepts(ctx, first) || c.Accepts(ctx, "nope") || c.Current() != first {
		t.Fatal("fresh checker")
	}
	// Another process rotates with a grace period.
	set, err := Rotate(ctx, ms, time.Minute, clock())
	if err != nil {
		t.Fatal(err)
	}
	// The checker loaded the set at this very moment: the new token's
	// first use waits for MinAge (real time) and reloads.
	start := time.Now()
	if !c.Accepts(ctx, set.Current) || !c.Accepts(ctx, first) {
		t.Error("new token not seen at its first use, or old one dropped within its grace")
	}
	if waited := time.Since(start); waited < DefaultMinAge {
		t.Errorf("reloaded after %v, before MinAge", waited)
	}
	if c.Accepts(ctx, "wrong") {
		t.Error("accepted a wrong token")
	}
	if c.IsCurrent(ctx, first) || !c.IsCurrent(ctx, set.Current) {
		t.Error("IsCurrent")
	}
	if len(changes) != 1 || changes[0] != set.Current {
		t.Errorf("OnChange calls: %v", changes)
	}
	advance(time.Minute)
	if c.Accepts(ctx, first) {
		t.Error("old token accepted after its grace")
	}
	// A rotation without grace through another process: the holder of the
	// dropped token is refused once the set is older than MaxAge.
	dropped := set.Current
	if _, err := Rotate(ctx, ms, 0, clock()); err != nil {
		t.Fatal(err)
	}
	advance(DefaultMaxAge + time.Millisecond)
	if c.Accepts(ctx, dropped) {
		t.Error("dropped token still accepted after MaxAge")
	}
	// Rotation through the checker itself applies at once.
	set, err = c.Rotate(ctx, 0)
	if err != nil || !c.IsCurrent(ctx, set.Current) || c.Current() != set.Current {
		t.Fatalf("Checker.Rotate: %v", err)
	}
}

// A checker whose storage fails keeps the tokens it had.
func TestCheckerKeepsSetWhenStorageFails(t *testing.T) {
	ctx := context.Background()
	st, err := storage.Open(ctx, "mem:", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ms := storage.BrokerOf(st)
	tok, _ := Generate()
	ms.PutMeta(ctx, CurrentKey, []byte(tok))
	now := time.Now()
	c, err := NewChecker(ctx, ms, CheckerOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	now = now.Add(time.Hour)
	if !c.Accepts(ctx, tok) {
		t.Error("token refused after the storage closed")
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFile(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile of nothing = %v", err)
	}
	if err := WriteFile(dir, "htq_abc"); err != nil {
		t.Fatal(err)
	}
	if tok, err := ReadFile(dir); err != nil || tok != "htq_abc" {
		t.Fatalf("ReadFile = %q, %v", tok, err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode: %v, %v", fi, err)
	}
	if err := RemoveFile(dir); err != nil {
		t.Fatal(err)
	}
	if err := RemoveFile(dir); err != nil {
		t.Errorf("second RemoveFile: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}
