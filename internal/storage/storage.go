// Package storage opens the storage named by a URL and holds the open
// connection, the type the public package exports as htq.Storage. It is
// the one typed seam through which htq's own packages (the HTTP service,
// the command line) reach the broker behind an htq.Storage: BrokerOf is
// an ordinary function of an internal package, so programs that import
// htq cannot call it, and nothing is set at init time.
package storage

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/embedded"
	"github.com/htqueue/htq/internal/rdb"
)

// Storage is an open connection to the storage that holds the queues.
// Clients, Servers and Inspectors made from one Storage share it; close it
// once they are all done.
type Storage struct {
	b       broker.Broker
	url     string
	closeMu sync.Mutex
	closed  bool
}

// Schemes lists the storage URL schemes Open accepts.
var schemes = []string{"file", "mem", "redis", "rediss", "redis-sentinel", "redis-cluster"}

// Open connects to the storage named by rawURL (see htq.Open for the
// forms); logger receives the storage's own log lines. An unknown scheme
// gives an error wrapping base.ErrUnknownScheme that lists the schemes
// Open knows.
func Open(ctx context.Context, rawURL string, logger *slog.Logger) (*Storage, error) {
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("htq: open %q: %w: no scheme; use one of %s", base.RedactURL(rawURL), base.ErrUnknownScheme, strings.Join(schemes, ", "))
	}
	switch strings.ToLower(scheme) {
	case "file":
		path, _ := DataDir(rawURL)
		if path == "" {
			return nil, fmt.Errorf("htq: open %q: %w: file: needs a directory path, e.g. file:./htq-data", rawURL, base.ErrInvalidArgument)
		}
		b, err := embedded.Open(ctx, path, embedded.Options{Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("htq: open %s: %w", rawURL, err)
		}
		return New(b, rawURL), nil
	case "mem":
		b, err := embedded.OpenMemory(embedded.Options{Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("htq: open %s: %w", rawURL, err)
		}
		return New(b, rawURL), nil
	case "redis", "rediss", "redis-sentinel", "redis-cluster":
		b, err := rdb.Open(ctx, rawURL, rdb.Options{Logger: logger})
		if err != nil {
			return nil, fmt.Errorf("htq: open %s: %w", base.RedactURL(rawURL), err)
		}
		return New(b, rawURL), nil
	default:
		return nil, fmt.Errorf("htq: open %q: %w %q; use one of %s", base.RedactURL(rawURL), base.ErrUnknownScheme, scheme, strings.Join(schemes, ", "))
	}
}

// DataDir returns the data directory a file: URL names ("file:./htq-data"
// and "file://./htq-data" both name ./htq-data) and true, or "" and false
// for a URL of another scheme. The path of "file:" alone is "".
func DataDir(rawURL string) (string, bool) {
	scheme, rest, ok := strings.Cut(rawURL, ":")
	if !ok || !strings.EqualFold(scheme, "file") {
		return "", false
	}
	return strings.TrimPrefix(rest, "//"), true
}

// New wraps an open broker; rawURL names it (its password is hidden).
func New(b broker.Broker, rawURL string) *Storage {
	return &Storage{b: b, url: base.RedactURL(rawURL)}
}

// BrokerOf returns the broker behind s.
func BrokerOf(s *Storage) broker.Broker { return s.b }

// String returns the storage URL with any password removed.
func (s *Storage) String() string { return s.url }

// Ping checks that the storage answers.
func (s *Storage) Ping(ctx context.Context) error { return s.b.Ping(ctx) }

// Close closes the storage connection. Clients and Servers using it stop
// working; shut Servers down first. Closing twice is not an error.
func (s *Storage) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.b.Close()
}

// Now reads the storage's clock, falling back to the local one when the
// storage does not answer within a second.
func Now(ctx context.Context, s *Storage) time.Time {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if t, err := s.b.Now(ctx); err == nil {
		return t
	}
	return time.Now()
}
