package embedded

import (
	"context"
	"os"
	"testing"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokerbench"
)

// The management operations on queues of 1,000,000 tasks (package
// brokerbench, the same benchmarks on every backend). Run with:
//
//	go test ./internal/embedded -run XXX -bench 1M -count 5
//
// The first benchmark fills a file store in a temporary directory, which
// stays open until the test binary ends (TestMain closes and removes it).
// BenchmarkListTasks1M lists the indexes as they grew through Enqueue when
// it runs first; BenchmarkListTasks1MReopened closes and reopens the store
// first, so it lists the indexes rebuilt at open.

var (
	bigDir string
	big    = brokerbench.NewBigQueues(1_000_000, func(testing.TB) (broker.Broker, error) {
		if bigDir == "" {
			dir, err := os.MkdirTemp("", "htq-bench-")
			if err != nil {
				return nil, err
			}
			bigDir = dir
		}
		return Open(context.Background(), bigDir, Options{Logger: discardLogger()})
	})
)

// closeBig closes and removes the big store, if a benchmark made one.
func closeBig() {
	_ = big.Close()
	if bigDir != "" {
		_ = os.RemoveAll(bigDir)
	}
}

// BenchmarkListTasks1M lists one page of 100 tasks of a queue of 1,000,000,
// at its start, middle and end.
func BenchmarkListTasks1M(b *testing.B) { brokerbench.ListTasks(b, big) }

// BenchmarkListTasks1MReopened is BenchmarkListTasks1M on the indexes that
// Open rebuilt.
func BenchmarkListTasks1MReopened(b *testing.B) { brokerbench.ListTasksReopened(b, big) }

// BenchmarkQueueStats1M reads the stats of a queue of 1,000,000 pending
// tasks.
func BenchmarkQueueStats1M(b *testing.B) { brokerbench.QueueStats(b, big) }
