package brokerbench_test

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"testing"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokerbench"
	"github.com/htqueue/htq/internal/embedded"
)

// TestBenchmarks runs every benchmark once on small queues of a file
// store, so that they keep working between the runs that measure.
func TestBenchmarks(t *testing.T) {
	setFlag(t, "test.benchtime", "1x")
	dir := t.TempDir()
	big := brokerbench.NewBigQueues(1_000, func(testing.TB) (broker.Broker, error) {
		return embedded.Open(context.Background(), dir, embedded.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	})
	t.Cleanup(func() {
		if err := big.Close(); err != nil {
			t.Error(err)
		}
	})
	for _, c := range []struct {
		name string
		fn   func(*testing.B, *brokerbench.BigQueues)
	}{
		{"ListTasks", brokerbench.ListTasks},
		{"QueueStats", brokerbench.QueueStats},
		{"ListTasksReopened", brokerbench.ListTasksReopened},
		{"ListTasks after the reopen", brokerbench.ListTasks},
	} {
		// testing.Benchmark drops the benchmark's messages and counts
		// a failed sub-benchmark as a success: ask b itself.
		failed := false
		testing.Benchmark(func(b *testing.B) {
			defer func() { failed = b.Failed() }()
			c.fn(b, big)
		})
		if failed {
			t.Errorf("%s failed (go test ./internal/embedded -run XXX -bench 1M tells why)", c.name)
		}
	}
}

// setFlag sets a flag of the test binary for the test's duration.
func setFlag(t *testing.T, name, value string) {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %s", name)
	}
	old := f.Value.String()
	if err := flag.Set(name, value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = flag.Set(name, old) })
}
