package rdb

import (
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokertest"
)

// TestConformance runs the broker conformance suite against Redis, with
// the suite's fake clock passed to the scripts.
func TestConformance(t *testing.T) {
	brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
		return newTestBroker(t, clock)
	})
}
