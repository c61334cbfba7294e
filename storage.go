package htq

import (
	"context"

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
// An unknown scheme gives an error wrapping ErrUnknownScheme that lists the
// schemes Open knows.
func Open(rawURL string) (*Storage, error) {
	return OpenContext(context.Background(), rawURL)
}

// OpenContext is Open with a context bounding the connection attempt.
func OpenContext(ctx context.Context, rawURL string) (*Storage, error) {
	return storage.Open(ctx, rawURL)
}

// brokerOf returns the broker behind s.
func brokerOf(s *Storage) broker.Broker { return storage.BrokerOf(s) }
