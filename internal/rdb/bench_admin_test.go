package rdb

import (
	"context"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokerbench"
	"github.com/htqueue/htq/internal/redistest"
)

// The management operations on queues of 1,000,000 tasks (package
// brokerbench, the same benchmarks on every backend). Run with:
//
//	go test ./internal/rdb -run XXX -bench 1M -count 5
//
// The first benchmark fills one database of the shared test server (about
// 20 s), and fills it again if another benchmark flushed it since.

var (
	bigURL string
	big    = brokerbench.NewBigQueues(1_000_000, func(tb testing.TB) (broker.Broker, error) {
		if bigURL == "" {
			bigURL = redistest.URL(tb)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return Open(ctx, bigURL, Options{})
	})
)

// BenchmarkListTasks1M lists one page of 100 tasks of a queue of 1,000,000,
// at its start, middle and end (pending is a list, scheduled a zset).
func BenchmarkListTasks1M(b *testing.B) { brokerbench.ListTasks(b, big) }

// BenchmarkQueueStats1M reads the stats of a queue of 1,000,000 pending
// tasks (with MEMORY USAGE).
func BenchmarkQueueStats1M(b *testing.B) { brokerbench.QueueStats(b, big) }
