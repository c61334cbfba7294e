package embedded

import (
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// TestSyncWaitsForTheBatchInFlight: a change that does not wait for the
// disk (a Fetch) can be in the batch being written when Sync is called,
// with nothing gathered behind it; Sync returns only once that batch is
// on disk.
func TestSyncWaitsForTheBatchInFlight(t *testing.T) {
	ctx := t.Context()
	b, err := Open(ctx, t.TempDir(), Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	msg := &base.TaskMessage{ID: "a", Type: "x", Queue: "q", Payload: []byte("p")}
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: msg}); err != nil {
		t.Fatal(err)
	}
	// entered hears of the first commit after the swap; later ones (Close's)
	// pass.
	entered, release := make(chan struct{}, 1), make(chan struct{})
	b.mu.Lock()
	real := b.commitFn
	b.commitFn = func(bt *batch) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		return real(bt)
	}
	b.mu.Unlock()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free() // before Close, which waits for the held write

	ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Fetch: %v, %d leases", err, len(ls))
	}
	<-entered // the fetch's batch is being written; nothing waits behind it
	synced := make(chan error, 1)
	go func() { synced <- b.Sync(ctx) }()
	// Sync must still be waiting while the write is held. A negative can
	// only be watched for a while: 100 ms is long enough for a Sync that
	// does not wait to have returned.
	select {
	case err := <-synced:
		t.Fatalf("Sync returned (%v) while its batch was still being written", err)
	case <-time.After(100 * time.Millisecond):
	}
	free()
	if err := <-synced; err != nil {
		t.Fatalf("Sync: %v", err)
	}
}
