package htq

import (
	"context"
	"log/slog"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/storage"
)

// Storage is an open connection to the storage that holds the queues.
// Clients, Servers and Inspectors made from one Storage share it; close it
// once they are all done. Its methods:
//
//	String() string                  the storage URL with any password removed
//	Ping(ctx context.Context) error  checks that the storage answers
//	Close() error                    closes the connection (twice is not an error)
type Storage = storage.Storage

// Open connects to the storage named by rawURL:
//
//	file:PATH                               the embedded on-disk store in directory PATH
//	                                        (created if missing; one process at a time)
//	mem:                                    an in-memory store, for tests and examples
//	redis://[:password@]host:port/db        one Redis server
//	rediss://[:password@]host:port/db       the same over TLS
//	redis-sentinel://[:password@]h1:p1,h2:p2/db?master=NAME
//	redis-cluster://[:password@]h1:p1,h2:p2 a Redis Cluster
//
// The Redis URLs take query parameters: timeout=5s bounds every call to
// Redis that the caller's context does not end sooner (default 5 s): a
// Redis that does not answer, or is still loading its data after a
// restart, fails the call with ErrUnavailable within it instead of
// holding it for the length of the outage. dial_timeout=5s, client_name=…,
// and wait_replicas=N, wait_timeout=500ms and wait_aof_local=true, which
// make every write a caller relies on (Enqueue, a task's outcome, …) wait
// until N replicas received it or the primary fsynced it, and fail with
// ErrReplicationTimeout otherwise; docs/operations.md says what to
// configure on Redis so that it does not lose tasks, and what it costs.
// At connect, a Redis that would lose or evict tasks (no persistence, a
// maxmemory-policy other than noeviction) is logged as a warning.
//
// An unknown scheme gives an error wrapping ErrUnknownScheme that lists the
// schemes Open knows.
func Open(rawURL string) (*Storage, error) {
	return OpenContext(context.Background(), rawURL)
}

// OpenContext is Open with a context bounding the connection attempt.
func OpenContext(ctx context.Context, rawURL string) (*Storage, error) {
	return OpenWithOptions(ctx, rawURL, OpenOptions{})
}

// OpenOptions tunes OpenWithOptions.
type OpenOptions struct {
	// Logger receives the storage's own log lines: on Redis, the warnings
	// at connect about settings that lose or evict tasks, lost event
	// subscriptions and tasks that cannot be decoded; on file:, what the
	// open recovered. Nil means slog.Default().
	Logger *slog.Logger
}

// OpenWithOptions is OpenContext with options.
func OpenWithOptions(ctx context.Context, rawURL string, opts OpenOptions) (*Storage, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return storage.Open(ctx, rawURL, opts.Logger)
}

// brokerOf returns the broker behind s.
func brokerOf(s *Storage) broker.Broker { return storage.BrokerOf(s) }
