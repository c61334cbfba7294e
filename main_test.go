package htq

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/redistest"
)

func TestMain(m *testing.M) {
	leaktest.Main(m, func() {
		redistest.StopShared()
		if workerPath != "" {
			os.RemoveAll(filepath.Dir(workerPath))
		}
	})
}

// openTestStorage opens a Storage on an empty Redis database.
func openTestStorage(t *testing.T) *Storage {
	t.Helper()
	st, err := Open(redistest.URL(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startServer starts a server on st and shuts it down at the end of the test.
func startServer(t *testing.T, st *Storage, cfg Config, h Handler) *Server {
	t.Helper()
	srv := NewServer(st, cfg)
	if err := srv.Start(h); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// taskInfo reads a task's current state from the storage.
func taskInfo(t *testing.T, st *Storage, queue, id string) *TaskInfo {
	t.Helper()
	ti, err := brokerOf(st).GetTaskInfo(context.Background(), queue, id)
	if err != nil {
		t.Fatalf("GetTaskInfo(%s, %s): %v", queue, id, err)
	}
	return newTaskInfo(ti, time.Now())
}

// waitFor polls cond (a storage read) until it holds or d passes. Storage
// state has no event to wait on from outside; the poll is 10 ms.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recv waits for a value on ch for at most d.
func recv[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %v waiting for %s", d, what)
		var zero T
		return zero
	}
}

func quietConfig(cfg Config) Config {
	if cfg.Logger == nil {
		cfg.Logger = discardLogger()
	}
	return cfg
}

func osMkdirTemp() (string, error) { return os.MkdirTemp("", "htq-test-") }
