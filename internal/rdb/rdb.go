package rdb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

var _ broker.Broker = (*Broker)(nil)

// Defaults of Options.
const (
	// DefaultArchiveMaxSize is how many archived tasks a queue keeps.
	DefaultArchiveMaxSize = 10000
	// DefaultArchiveMaxAge is how long an archived task is kept.
	DefaultArchiveMaxAge = 90 * 24 * time.Hour
)

// Options tunes a Broker. The zero value is ready to use.
type Options struct {
	// Clock, when set, replaces Redis TIME as the storage clock: every
	// script receives Clock.Now() from Go. For tests with a fake clock;
	// leave it nil in production, so that leases and due times do not
	// depend on each process's clock.
	Clock clockwork.Clock
	// Logger receives the broker's warnings (lost subscriptions, corrupt
	// tasks). Nil discards them.
	Logger *slog.Logger
	// TLSConfig replaces the TLS configuration of rediss:// URLs (for a
	// private CA or client certificates). Open only.
	TLSConfig *tls.Config
	// Timeout bounds each call to Redis (one round trip, with the
	// connection it may have to open first) that the caller's context
	// does not end sooner: a call to a Redis that does not answer
	// (stopped, cut off, still loading its data) fails within it with an
	// error wrapping base.ErrUnavailable instead of waiting for the end
	// of the outage. A write that waits for replicas (Wait) gets
	// Wait.Timeout on top. 0 means DefaultTimeout (5 s); a negative value
	// leaves calls to their context alone. In Open, the URL's timeout
	// parameter replaces it.
	Timeout time.Duration
	// DialTimeout bounds each connection attempt; 0 means DefaultDialTimeout,
	// or half of Timeout when that is shorter. Open only.
	DialTimeout time.Duration
	// Connections is how many pipelined connections the client keeps to
	// each Redis node (rounded up to a power of two); 0 means 1. Every
	// concurrent call shares them; one connection batched best on a
	// 2-core machine (BenchmarkFetchComplete: 92k tasks/s at batch 16
	// against 70k with rueidis's default of 4). More may help many-core
	// clients or large payloads. Open only.
	Connections int
	// ArchiveMaxSize is how many archived tasks a queue keeps (the oldest
	// are deleted beyond it); 0 means DefaultArchiveMaxSize.
	ArchiveMaxSize int
	// ArchiveMaxAge is how long an archived task is kept; 0 means
	// DefaultArchiveMaxAge.
	ArchiveMaxAge time.Duration
	// Wait makes the writes callers rely on wait for replicas or an
	// fsync (see WaitOptions); the zero value waits for nothing. In Open,
	// a storage URL with any of the wait_replicas, wait_timeout and
	// wait_aof_local parameters replaces it whole.
	Wait WaitOptions
	// EventLogSize is about how many entries each queue's event log keeps
	// (XADD MAXLEN ~, so somewhat more; an entry holds the events of one
	// call, such as a Fetch of 16 tasks); 0 means the storage URL's
	// event_log parameter, else broker.DefaultEventLogSize; a negative
	// size turns the log off (each state-changing call then costs one XADD
	// less, and ReadEvents finds nothing). Give every process sharing the
	// Redis the same setting: a process with the log off leaves its
	// changes out of everyone's log.
	EventLogSize int
}

// Broker is the Redis implementation of broker.Broker. It is safe for
// concurrent use.
type Broker struct {
	c     rueidis.Client
	clock clockwork.Clock // nil: Redis TIME is the clock
	log   *slog.Logger
	wait  *waiter // nil: acknowledged writes do not wait (Options.Wait)
	// timeout bounds each call (Options.Timeout); <= 0: no bound.
	timeout time.Duration
	// trouble is when (Unix ns) a call last met unavailability (see
	// deadline.go); 0: never.
	trouble atomic.Int64
	closed  atomic.Bool

	archiveMax  string   // ArchiveMaxSize as an ARGV
	archiveAge  string   // ArchiveMaxAge in ms as an ARGV
	logLen      string   // EventLogSize as an ARGV ("0": the log is off)
	lockSlackMS int64    // added to the PX ttl of uniqueness locks
	queues      sync.Map // queue name -> *queueKeys
	// seen holds empty map[string]struct{} for Complete's search for
	// repeated IDs (completable).
	seen sync.Pool

	// life is cancelled by Close; subscriptions end with it.
	life      context.Context
	endLife   context.CancelFunc
	closeOnce sync.Once
	subsMu    sync.Mutex // orders Subscribe's subsWG.Add before Close's Wait
	subsWG    sync.WaitGroup
}

// New returns a Broker over c. The Broker owns c: Close closes it.
func New(c rueidis.Client, opts Options) *Broker {
	b := &Broker{
		c:       c,
		clock:   opts.Clock,
		log:     opts.Logger,
		wait:    newWaiter(opts.Wait, c.Mode() == rueidis.ClientModeCluster),
		timeout: opts.timeout(),
	}
	b.life, b.endLife = context.WithCancel(context.Background())
	if b.log == nil {
		b.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if b.clock != nil {
		// With a fake clock the lock's expiry (in its value) decides; the
		// PX ttl, which runs on Redis's own clock, only cleans up, so it
		// must not fire before a test's fake clock says so.
		b.lockSlackMS = (24 * time.Hour).Milliseconds()
	}
	size := opts.ArchiveMaxSize
	if size <= 0 {
		size = DefaultArchiveMaxSize
	}
	age := opts.ArchiveMaxAge
	if age <= 0 {
		age = DefaultArchiveMaxAge
	}
	b.archiveMax = strconv.Itoa(size)
	b.archiveAge = strconv.FormatInt(age.Milliseconds(), 10)
	switch {
	case opts.EventLogSize < 0:
		b.logLen = "0"
	case opts.EventLogSize == 0:
		b.logLen = strconv.Itoa(broker.DefaultEventLogSize)
	default:
		b.logLen = strconv.Itoa(opts.EventLogSize)
	}
	return b
}

// Open connects to the Redis named by rawURL (see ParseURL for the forms)
// and checks that it answers. It then reads each node's version and
// settings: a node that would lose or evict tasks gets a warning in the
// log (see checkNode), and WaitOptions a node cannot honour (WAITAOF
// before Redis 7.2) are an error.
func Open(ctx context.Context, rawURL string, opts Options) (*Broker, error) {
	co, set, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if set.Wait != nil {
		opts.Wait = *set.Wait
	}
	if set.Timeout > 0 {
		opts.Timeout = set.Timeout
	}
	if err := opts.Wait.Validate(); err != nil {
		return nil, err
	}
	if opts.TLSConfig != nil {
		co.TLSConfig = opts.TLSConfig
	}
	if opts.EventLogSize == 0 {
		opts.EventLogSize = set.EventLogSize
	}
	if opts.DialTimeout > 0 {
		co.Dialer.Timeout = opts.DialTimeout
		co.Sentinel.Dialer.Timeout = opts.DialTimeout
	}
	limitConnTimeouts(&co, opts.timeout(), opts.Wait)
	co.PipelineMultiplex = pipelineMultiplex(opts.Connections)
	c, err := rueidis.NewClient(co)
	if err != nil {
		return nil, fmt.Errorf("rdb: connect to %s: %w", base.RedactURL(rawURL), err)
	}
	b := New(c, opts)
	if err := b.Ping(ctx); err != nil {
		b.Close()
		return nil, err
	}
	if err := b.checkNodes(ctx, opts.Wait); err != nil {
		b.Close()
		return nil, err
	}
	// Loading the scripts now saves each first call a NOSCRIPT round trip;
	// when it fails (an ACL without SCRIPT, say), calls fall back to EVAL.
	if err := b.loadScripts(ctx); err != nil {
		b.log.Warn("rdb: cannot preload scripts; they will be sent with EVAL", "err", err)
	}
	return b, nil
}

// timeout is Timeout with its default.
func (o Options) timeout() time.Duration {
	if o.Timeout == 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// DefaultDialTimeout is Options.DialTimeout's default (rueidis's own is
// 5 s): see limitConnTimeouts.
const DefaultDialTimeout = time.Second

// limitConnTimeouts fits rueidis's own timeouts to the call timeout, so
// that a call fails within it (see deadline.go):
//   - a connection attempt (TCP connect and handshake) lasts at most
//     DefaultDialTimeout or half the call timeout. Calls that find a
//     connection being opened wait for that attempt whatever their own
//     deadline, and a stopped Redis accepts TCP connections (the kernel
//     does) but never answers the handshake. While Redis is in trouble
//     such calls are abandoned at their deadline (deadline.go); the dial
//     timeout bounds how long the attempt itself, and the first call
//     that finds Redis gone, may hold them.
//   - ConnWriteTimeout, which rueidis also uses as the longest wait of a
//     call without a deadline and as the time a keep-alive PING may take
//     before the connection is dropped, is raised when calls may last
//     longer (a long timeout, or a write waiting for replicas), so that a
//     call is not cut short nor its connection dropped while it is within
//     its deadline.
func limitConnTimeouts(co *rueidis.ClientOption, timeout time.Duration, w WaitOptions) {
	if timeout <= 0 {
		return
	}
	for _, d := range []*net.Dialer{&co.Dialer, &co.Sentinel.Dialer} {
		if d.Timeout <= 0 {
			d.Timeout = min(DefaultDialTimeout, timeout/2)
		}
	}
	longest := timeout
	if w.Enabled() {
		wt := w.Timeout
		if wt <= 0 {
			wt = DefaultWaitTimeout
		}
		longest += wt
	}
	keepAlive := co.Dialer.KeepAlive
	if keepAlive <= 0 {
		keepAlive = rueidis.DefaultTCPKeepAlive
	}
	if co.ConnWriteTimeout <= 0 && longest+time.Second > 10*keepAlive { // rueidis's default is 10 keep-alives
		co.ConnWriteTimeout = longest + time.Second
	}
}

// pipelineMultiplex turns a connection count into rueidis's
// PipelineMultiplex (log2 of the count; -1 stands for 2^0 = 1).
func pipelineMultiplex(conns int) int {
	if conns <= 1 {
		return -1
	}
	m := 0
	for 1<<m < conns && m < rueidis.MaxPipelineMultiplex {
		m++
	}
	return m
}

// Close closes the connections and ends every subscription. Later calls
// fail with base.ErrStorageClosed.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.subsMu.Lock()
		b.closed.Store(true)
		b.subsMu.Unlock()
		b.endLife()
		b.subsWG.Wait() // subscriptions give their connections back
		b.c.Close()
	})
	return nil
}

// Ping checks that Redis answers.
func (b *Broker) Ping(ctx context.Context) error {
	if b.closed.Load() {
		return fmt.Errorf("rdb: ping: %w", base.ErrStorageClosed)
	}
	if err := b.do(ctx, b.c.B().Ping().Build()).Error(); err != nil {
		return b.wrap("ping", err)
	}
	return nil
}

// Now returns the storage clock: Redis TIME, or Options.Clock when set.
func (b *Broker) Now(ctx context.Context) (time.Time, error) {
	if b.closed.Load() {
		return time.Time{}, fmt.Errorf("rdb: now: %w", base.ErrStorageClosed)
	}
	if b.clock != nil {
		return b.clock.Now(), nil
	}
	v, err := b.do(ctx, b.c.B().Time().Build()).AsStrSlice()
	if err != nil {
		return time.Time{}, b.wrap("time", err)
	}
	if len(v) != 2 {
		return time.Time{}, fmt.Errorf("rdb: time: unexpected reply %q", v)
	}
	sec, err1 := strconv.ParseInt(v[0], 10, 64)
	usec, err2 := strconv.ParseInt(v[1], 10, 64)
	if err1 != nil || err2 != nil {
		return time.Time{}, fmt.Errorf("rdb: time: unexpected reply %q", v)
	}
	return time.Unix(sec, usec*1000), nil
}

// nowArg is the ARGV that carries "now" to a script: empty (the script
// reads Redis TIME) unless a clock was given.
func (b *Broker) nowArg() string {
	if b.clock == nil {
		return ""
	}
	return strconv.FormatInt(b.clock.Now().UnixMilli(), 10)
}

// keys returns the (cached) key names of queue q, validating q the first
// time.
func (b *Broker) keys(q string) (*queueKeys, error) {
	if k, ok := b.queues.Load(q); ok {
		return k.(*queueKeys), nil
	}
	k, err := queueKeysFor(q)
	if err != nil {
		return nil, err
	}
	v, _ := b.queues.LoadOrStore(q, k)
	return v.(*queueKeys), nil
}

// check returns the keys of q, or an error when the broker is closed or q
// is not a valid queue name.
func (b *Broker) check(op, q string) (*queueKeys, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("rdb: %s: %w", op, base.ErrStorageClosed)
	}
	k, err := b.keys(q)
	if err != nil {
		return nil, fmt.Errorf("rdb: %s: %w", op, err)
	}
	return k, nil
}

// wrap adds the operation's name to a Redis or connection error and maps
// a closed client to base.ErrStorageClosed.
func (b *Broker) wrap(op string, err error) error {
	if errors.Is(err, rueidis.ErrClosing) || b.closed.Load() {
		return fmt.Errorf("rdb: %s: %w", op, base.ErrStorageClosed)
	}
	return fmt.Errorf("rdb: %s: %w", op, err)
}

// ms converts a duration to whole milliseconds, rounding up so that a
// positive duration never becomes 0.
func ms(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
