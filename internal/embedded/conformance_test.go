package embedded

import (
	"testing"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/broker/brokertest"
)

// TestConformanceFile runs the conformance suite against a file store on a
// real disk (t.TempDir), one data directory per subtest.
func TestConformanceFile(t *testing.T) {
	brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
		b, err := Open(t.Context(), t.TempDir(), Options{Clock: clock, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}

// TestConformanceMemory runs the conformance suite against the mem: store.
func TestConformanceMemory(t *testing.T) {
	brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
		b, err := OpenMemory(Options{Clock: clock, Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		return b
	})
}
