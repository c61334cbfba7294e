package embedded

import (
	"log/slog"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/broker"
)

// Options configures a Broker. The zero value is ready to use.
type Options struct {
	// Clock is the storage clock: leases, due times and retention are read
	// from it. Nil means real time.
	Clock clockwork.Clock
	// Logger receives the backend's few log lines (open, recovery, write
	// failures). Nil means slog.Default().
	Logger *slog.Logger
	// LockTimeout is how long Open waits for another process to release
	// the data directory before failing. 0 means do not wait.
	LockTimeout time.Duration
	// EventLogSize is how many events each queue's event log keeps in
	// memory (broker.EventLog); 0 means broker.DefaultEventLogSize, a
	// negative size turns the log off.
	EventLogSize int

	// walSize is the size the log files are preallocated to; 0 means
	// walPrealloc (tests make it small).
	walSize int64
	// afterCheckpoint, when set, is called by the checkpointer after each
	// checkpoint is committed to the data file and before the committer
	// hears of it (tests kill the process there).
	afterCheckpoint func()
}

func (o Options) withDefaults() Options {
	if o.Clock == nil {
		o.Clock = clockwork.NewRealClock()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.walSize <= 0 {
		o.walSize = walPrealloc
	}
	if o.EventLogSize == 0 {
		o.EventLogSize = broker.DefaultEventLogSize
	}
	return o
}
