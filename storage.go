package htq

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

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
// The Redis URLs take query parameters: dial_timeout=5s, client_name=…,
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
	scheme, _, ok := strings.Cut(rawURL, ":")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("htq: open %q: %w: no scheme; use one of %s", redact(rawURL), ErrUnknownScheme, strings.Join(schemes, ", "))
	}
	switch strings.ToLower(scheme) {
	case "file":
		path := strings.TrimPrefix(rawURL[len(scheme)+1:], "//")
		if path == "" {
			return nil, fmt.Errorf("htq: open %q: %w: file: needs a directory path, e.g. file:./htq-data", rawURL, ErrInvalidArgument)
		}
		b, err := embedded.Open(ctx, path, embedded.Options{Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("htq: open %s: %w", rawURL, err)
		}
		return newStorage(b, rawURL), nil
	case "mem":
		b, err := embedded.OpenMemory(embedded.Options{Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("htq: open %s: %w", rawURL, err)
		}
		return newStorage(b, rawURL), nil
	case "redis", "rediss", "redis-sentinel", "redis-cluster":
		b, err := rdb.Open(ctx, rawURL, rdb.Options{Logger: opts.Logger})
		if err != nil {
			return nil, fmt.Errorf("htq: open %s: %w", redact(rawURL), err)
		}
		return newStorage(b, rawURL), nil
	default:
		return nil, fmt.Errorf("htq: open %q: %w %q; use one of %s", redact(rawURL), ErrUnknownScheme, scheme, strings.Join(schemes, ", "))
	}
}

func newStorage(b broker.Broker, rawURL string) *Storage {
	return &Storage{b: b, url: redact(rawURL)}
}

// String returns the storage URL with any password removed.
func (s *Storage) String() string { return s.url }

// Ping checks that the storage answers.
func (s *Storage) Ping(ctx context.Context) error { return s.b.Ping(ctx) }

// Close closes the storage connection. Clients and Servers using it stop
// working; shut Servers down first.
func (s *Storage) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return s.b.Close()
}

// now reads the storage's clock, falling back to the local one.
func (s *Storage) now(ctx context.Context) time.Time {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if t, err := s.b.Now(ctx); err == nil {
		return t
	}
	return time.Now()
}

// redact hides the password of a URL.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}
