package htq

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAggregationTwoServers: two servers aggregate the same group at once;
// every task ends in exactly one aggregate, and none is lost.
func TestAggregationTwoServers(t *testing.T) {
	st := openTestStorage(t)
	const n = 300
	var mu sync.Mutex
	seen := map[int]int{}
	total := 0
	all := make(chan struct{})
	mux := NewServeMux()
	mux.HandleFunc("batch", func(ctx context.Context, task *Task) error {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range strings.Fields(string(task.Payload())) {
			i, _ := strconv.Atoi(f)
			seen[i]++
			total++
		}
		if total == n {
			close(all)
		}
		return nil
	})
	agg := GroupAggregatorFunc(func(group string, tasks []*Task) *Task {
		var b strings.Builder
		for _, t := range tasks {
			b.Write(t.Payload())
			b.WriteByte(' ')
		}
		return NewTask("batch", []byte(b.String()))
	})
	for i := 0; i < 2; i++ {
		startServer(t, st, quietConfig(Config{Concurrency: 4, GroupAggregator: agg, GroupMaxSize: 7, GroupGracePeriod: 200 * time.Millisecond}), mux)
	}
	c := NewClient(st)
	for i := 0; i < n; i++ {
		if _, err := c.Enqueue(NewTask("item", []byte(fmt.Sprint(i))), Group("g")); err != nil {
			t.Fatal(err)
		}
	}
	recv(t, all, 30*time.Second, "every task aggregated")
	mu.Lock()
	defer mu.Unlock()
	for i := 0; i < n; i++ {
		if seen[i] != 1 {
			t.Fatalf("task %d aggregated %d times", i, seen[i])
		}
	}
}
