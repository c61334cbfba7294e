package rdb

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokertest"
	"github.com/htqueue/htq/internal/redistest"
)

// TestConformance runs the broker conformance suite against Redis, with
// the suite's fake clock passed to the scripts. The cases about several
// servers get a second Broker on the same database.
func TestConformance(t *testing.T) {
	var mu sync.Mutex
	urls := map[broker.Broker]string{}
	open := func(t *testing.T, url string, clock clockwork.Clock) *Broker {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := Open(ctx, url, Options{Clock: clock})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	}
	brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
		url := redistest.URL(t)
		b := open(t, url, clock)
		mu.Lock()
		urls[b] = url
		mu.Unlock()
		return b
	}, brokertest.WithSecond(func(t *testing.T, clock clockwork.Clock, first broker.Broker) broker.Broker {
		mu.Lock()
		url := urls[first]
		mu.Unlock()
		return open(t, url, clock)
	}))
}
