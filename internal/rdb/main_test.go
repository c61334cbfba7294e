package rdb

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/redistest"
)

func TestMain(m *testing.M) {
	// rueidis's cluster client closes replaced connections 5 s after a
	// topology refresh, in a goroutine that outlives Close.
	leaktest.Main(m, func() {
		_ = big.Close()
		redistest.StopShared()
	}, goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"))
}

// newTestBroker opens a Broker on a flushed database of the shared test
// server. clock may be nil (Redis TIME).
func newTestBroker(t testing.TB, clock clockwork.Clock) *Broker {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var opts Options
	if clock != nil {
		opts.Clock = clock
	}
	b, err := Open(ctx, redistest.URL(t), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
