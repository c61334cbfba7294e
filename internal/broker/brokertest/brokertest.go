// Package brokertest is the conformance suite of the broker.Broker interface.
// Every backend runs it from its own test file, so that each one is proved
// to behave the same way by the same tests:
//
//	func TestConformance(t *testing.T) {
//		brokertest.Run(t, func(t *testing.T, clock clockwork.Clock) broker.Broker {
//			b, err := mybackend.Open(ctx, url, mybackend.Options{Clock: clock})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { _ = b.Close() })
//			return b
//		})
//	}
//
// The suite drives time with a fake clock and never sleeps: it advances the
// clock to make leases run out, tasks come due and locks expire. Only the
// events of Subscribe are waited for in real time, with a timeout of a few
// seconds. A behaviour change of the interface goes into this suite first.
package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/broker"
)

// Factory returns a broker over empty storage that no other broker of the
// run shares, and that takes every time decision (lease deadlines, due
// dates, retention, uniqueness-lock expiry, Now) from clock. The factory
// closes the broker with t.Cleanup; that cleanup must accept a broker the
// suite already closed (Close may then return base.ErrStorageClosed).
type Factory func(t *testing.T, clock clockwork.Clock) broker.Broker

// Option configures Run.
type Option func(*runConfig)

type runConfig struct {
	second SecondFactory
}

// SecondFactory returns a second handle on the storage of first, as
// another server process would open it (Redis: another Broker on the same
// database), reading the same clock. The factory closes it with t.Cleanup.
type SecondFactory func(t *testing.T, clock clockwork.Clock, first broker.Broker) broker.Broker

// WithSecond lets the cases about several servers (per-key limits across
// servers) run against a second handle on the same storage. Without it
// they use the broker under test from several goroutines, which is how
// several servers share a store that one process owns (the embedded
// backend).
func WithSecond(f SecondFactory) Option { return func(c *runConfig) { c.second = f } }

// InvariantChecker is implemented by a backend that can check its stored
// state for consistency: every task is in exactly one state, every active
// task has a lease and every lease belongs to an active task. When the
// broker under test implements it, Run calls it after every subtest and
// fails the subtest on error.
type InvariantChecker interface {
	CheckInvariants(ctx context.Context) error
}

// Epoch is the time the fake clock of every subtest starts at. It is a
// whole second so that backends keeping milliseconds lose nothing.
var Epoch = time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)

// eventTimeout bounds the real-time wait for an event of Subscribe, and for
// goroutines of the concurrency tests.
const eventTimeout = 5 * time.Second

// testCase is one leaf subtest: it gets a fresh broker over empty storage.
type testCase struct {
	name string
	fn   func(e *env)
}

// group is one area of the interface.
type group struct {
	name  string
	cases []testCase
}

// Run runs the whole suite against the brokers newBroker makes, one new
// broker for every subtest. Subtests are named Area/Behaviour (for example
// Fetch/FIFO) so that one can be run alone with -run.
//
// Besides the doc comments of package broker, the suite pins down what
// those comments leave open, so that every backend agrees:
//   - Subscribe returns only once its subscription is live: a change made
//     after Subscribe returned is announced on the channel.
//   - Bad arguments fail with base.ErrInvalidArgument: an invalid queue
//     name given to any method, Fetch's Max < 1 or LeaseDuration <= 0, a
//     limit < 1, ExtendLeases by d <= 0, a server state without an ID or
//     with ttl <= 0.
//   - An instant is reached when the clock shows it: a lease is expired at
//     its deadline, a task is due at its due time, a completed task's
//     retention has run out at CompletedAt+Retention, a uniqueness lock is
//     free at its expiry.
//   - An expired lease is not extended: ExtendLeases reports it lost and
//     leaves it for the Recoverer. (Whether Complete still accepts an
//     expired lease that nobody recovered is left open.)
//   - Uniqueness keys are per queue.
func Run(t *testing.T, newBroker Factory, opts ...Option) {
	t.Helper()
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	groups := []group{
		{"Lifecycle", lifecycleTests()},
		{"Enqueue", enqueueTests()},
		{"Repeat", repeatTests()},
		{"Validation", validationTests()},
		{"Fetch", fetchTests()},
		{"Priority", priorityTests()},
		{"Fair", fairTests()},
		{"Complete", completeTests()},
		{"Retry", retryTests()},
		{"Archive", archiveTests()},
		{"Requeue", requeueTests()},
		{"Leases", leaseTests()},
		{"Forward", forwardTests()},
		{"Retention", retentionTests()},
		{"Unique", uniqueTests()},
		{"Batch", batchTests()},
		{"Events", eventTests()},
		{"Tasks", taskTests()},
		{"Servers", serverTests()},
		{"Concurrency", concurrencyTests()},
		{"Workflows", workflowTests()},
		// The areas of broker.Admin (see admin.go).
		{"Stats", statsTests()},
		{"List", listTests()},
		{"TaskOps", taskOpTests()},
		{"BulkOps", bulkTests()},
		{"QueueControl", queueControlTests()},
		{"Settings", settingsTests()},
		{"Presence", presenceTests()},
		{"Groups", groupTests()},
		{"Scheduler", schedulerTests()},
		// broker.EventLog (eventlog.go).
		{"EventLog", eventLogTests()},
		// broker.MetaStore (meta.go).
		{"Meta", metaTests()},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					e := newEnv(t, newBroker)
					e.cfg = cfg
					c.fn(e)
				})
			}
		})
	}
}
