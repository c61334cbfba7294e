package htq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/htqueue/htq/internal/base"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// RetryDelayFunc computes how long to wait before retrying a task that
// failed for the n-th time (n counts from 0) with error e.
type RetryDelayFunc func(n int, e error, t *Task) time.Duration

// DefaultRetryDelayFunc waits n⁴ + 15 seconds plus a random part that grows
// with n: about 15 s, 16 s, 31 s, 96 s, … up to days for the 25th retry.
func DefaultRetryDelayFunc(n int, e error, t *Task) time.Duration {
	s := int64(math.Pow(float64(n), 4)) + 15 + rand.Int64N(30)*int64(n+1)
	return time.Duration(s) * time.Second
}

// ErrorHandler is told about every failed attempt.
type ErrorHandler interface {
	HandleError(ctx context.Context, task *Task, err error)
}

// ErrorHandlerFunc adapts a function to the ErrorHandler interface.
type ErrorHandlerFunc func(ctx context.Context, task *Task, err error)

// HandleError calls fn(ctx, task, err).
func (fn ErrorHandlerFunc) HandleError(ctx context.Context, task *Task, err error) {
	fn(ctx, task, err)
}

// Config configures a Server. The zero value of every field means its
// documented default.
type Config struct {
	// Concurrency is how many tasks run at once (default: the number of CPUs).
	Concurrency int
	// Queues maps each queue to serve to its weight (default {"default": 1}).
	// A queue with weight 6 is fetched from about twice as often as one
	// with weight 3.
	Queues map[string]int
	// QueueSource, when set, decides the queues to serve (with their
	// weights) instead of Queues: the server asks it at start, every
	// QueueRefreshInterval, and when a storage event names a queue it does
	// not serve yet. htq serve uses it to serve queues created at run time.
	QueueSource func(ctx context.Context) (map[string]int, error)
	// QueueRefreshInterval is how often QueueSource is asked (default 5 s).
	QueueRefreshInterval time.Duration
	// StrictPriority drains queues in order of weight, highest first: a
	// lower queue is fetched from only when every higher one is empty.
	StrictPriority bool
	// RetryDelayFunc decides when a failed task is retried
	// (default DefaultRetryDelayFunc).
	RetryDelayFunc RetryDelayFunc
	// IsFailure tells whether a handler's error counts as a failure: one
	// that uses up a retry and counts in the failed statistics (default:
	// every error). An error that is not a failure is retried without
	// using up a retry.
	IsFailure func(error) bool
	// ErrorHandler is told about every failed attempt (default: none),
	// before its outcome is written: one whose handler returned an error,
	// and one whose worker was lost (the Recoverer found its lease run
	// out; the error then wraps ErrLeaseExpired and the handler may be
	// told twice when two servers find the same lease).
	ErrorHandler ErrorHandler
	// BeforeArchiveLost, when set, is called by the Recoverer before it
	// archives a task whose worker was lost during its last attempt
	// (before ErrorHandler; err wraps ErrLeaseExpired): what must be done
	// once for every archived task (a notification, a failure callback)
	// can be done there without being lost. When it returns an error the
	// task is not archived: it is retried without using up a retry (its
	// next attempt, or the next lost one, calls the hook again), and
	// ErrorHandler is told an error that wraps both.
	BeforeArchiveLost func(ctx context.Context, task *Task, err error) error
	// BaseContext returns the context every handler's ctx derives from
	// (default context.Background).
	BaseContext func() context.Context
	// ShutdownTimeout is how long Shutdown waits for running tasks before
	// it cancels them and puts them back to pending (default 8 s).
	ShutdownTimeout time.Duration
	// HealthCheckFunc is called with the result of each storage ping.
	HealthCheckFunc func(error)
	// HealthCheckInterval is the time between storage pings (default 15 s).
	HealthCheckInterval time.Duration
	// DelayedTaskCheckInterval bounds how long the forwarder sleeps between
	// looks at scheduled and retry tasks when no event wakes it earlier
	// (default 5 s). Due tasks are normally forwarded at their due time.
	DelayedTaskCheckInterval time.Duration
	// TaskCheckInterval bounds how long an idle server waits before it
	// looks at its queues again when no event wakes it (default 1 s).
	// New tasks normally start within milliseconds through events.
	TaskCheckInterval time.Duration
	// JanitorInterval is the time between sweeps of completed tasks whose
	// retention has run out (default 8 s).
	JanitorInterval time.Duration
	// JanitorBatchSize is how many expired tasks one sweep step deletes
	// (default 100).
	JanitorBatchSize int
	// LeaseDuration is how long a worker's hold on a task lasts without
	// renewal (default 30 s, at least 500 ms). The Heartbeater renews it
	// every third of it, so long tasks keep theirs; a worker that dies
	// loses its tasks to the Recoverer once it runs out.
	LeaseDuration time.Duration
	// Logger receives the server's logs (default slog.Default()).
	Logger *slog.Logger

	// TracerProvider makes the span of each attempt (kind consumer, named
	// "process <queue>", with the task's ID, type, queue, attempt number
	// and outcome), a child of the enqueue's trace context when the task
	// carries one; the handler's ctx holds it. Nil: OpenTelemetry's global
	// provider, a no-op unless the application set one.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context a task carries (see
	// ClientOptions.Propagator). Nil: OpenTelemetry's global propagator, a
	// no-op unless the application set one.
	Propagator propagation.TextMapPropagator

	// GroupAggregator, when set, turns each group of tasks enqueued with
	// the Group option into one task (default: groups are not aggregated).
	GroupAggregator GroupAggregator
	// GroupMaxSize aggregates a group once it holds this many tasks
	// (0: no size limit).
	GroupMaxSize int
	// GroupMaxDelay aggregates a group once its oldest task has waited
	// this long (0: no limit).
	GroupMaxDelay time.Duration
	// GroupGracePeriod aggregates a group once no task has joined it for
	// this long (default 1 min).
	GroupGracePeriod time.Duration

	// clock drives every wait of the server's components (tests).
	clock clockwork.Clock
}

// Config defaults.
const (
	defaultShutdownTimeout     = 8 * time.Second
	defaultHealthCheckInterval = 15 * time.Second
	defaultDelayedCheck        = 5 * time.Second
	defaultTaskCheck           = time.Second
	defaultJanitorInterval     = 8 * time.Second
	defaultJanitorBatchSize    = 100
	defaultLeaseDuration       = 30 * time.Second
	minLeaseDuration           = 500 * time.Millisecond
)

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Concurrency == 0 {
		c.Concurrency = runtime.NumCPU()
	}
	if len(c.Queues) == 0 && c.QueueSource == nil {
		c.Queues = map[string]int{base.DefaultQueue: 1}
	}
	if c.QueueRefreshInterval == 0 {
		c.QueueRefreshInterval = 5 * time.Second
	}
	if c.RetryDelayFunc == nil {
		c.RetryDelayFunc = DefaultRetryDelayFunc
	}
	if c.IsFailure == nil {
		c.IsFailure = func(error) bool { return true }
	}
	if c.BaseContext == nil {
		c.BaseContext = context.Background
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	setDur(&c.ShutdownTimeout, defaultShutdownTimeout)
	setDur(&c.HealthCheckInterval, defaultHealthCheckInterval)
	setDur(&c.DelayedTaskCheckInterval, defaultDelayedCheck)
	setDur(&c.TaskCheckInterval, defaultTaskCheck)
	setDur(&c.JanitorInterval, defaultJanitorInterval)
	setDur(&c.LeaseDuration, defaultLeaseDuration)
	setDur(&c.GroupGracePeriod, defaultGroupGracePeriod)
	if c.JanitorBatchSize == 0 {
		c.JanitorBatchSize = defaultJanitorBatchSize
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.clock == nil {
		c.clock = clockwork.NewRealClock()
	}
	return c
}

// Validate reports the first invalid field of c, wrapping ErrInvalidArgument.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: Config.%s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if c.Concurrency < 0 {
		return bad("Concurrency %d is negative", c.Concurrency)
	}
	if c.QueueSource != nil && len(c.Queues) > 0 {
		return bad("Queues and QueueSource are both set; set one")
	}
	if err := validQueues(c.Queues); err != nil {
		return fmt.Errorf("Config.Queues: %w", err)
	}
	for name, d := range map[string]time.Duration{
		"ShutdownTimeout":          c.ShutdownTimeout,
		"HealthCheckInterval":      c.HealthCheckInterval,
		"DelayedTaskCheckInterval": c.DelayedTaskCheckInterval,
		"TaskCheckInterval":        c.TaskCheckInterval,
		"JanitorInterval":          c.JanitorInterval,
		"LeaseDuration":            c.LeaseDuration,
		"GroupMaxDelay":            c.GroupMaxDelay,
		"QueueRefreshInterval":     c.QueueRefreshInterval,
		"GroupGracePeriod":         c.GroupGracePeriod,
	} {
		if d < 0 {
			return bad("%s %v is negative", name, d)
		}
	}
	if c.LeaseDuration != 0 && c.LeaseDuration < minLeaseDuration {
		return bad("LeaseDuration %v is shorter than %v", c.LeaseDuration, minLeaseDuration)
	}
	if c.GroupMaxSize < 0 {
		return bad("GroupMaxSize %d is negative", c.GroupMaxSize)
	}
	if c.JanitorBatchSize < 0 {
		return bad("JanitorBatchSize %d is negative", c.JanitorBatchSize)
	}
	return nil
}

// Server fetches tasks from its queues and runs them with a Handler.
//
// Inside it, each background component has one job: the processor fetches
// and runs tasks, the forwarder moves due scheduled and retry tasks to
// pending, the heartbeater renews task leases and the server's presence,
// the recoverer rescues tasks of dead workers, the janitor deletes
// completed tasks past their retention, the health checker pings the
// storage, and the subscriber turns storage events into wake-ups.
type Server struct {
	s      *Storage
	cfg    Config
	cfgErr error
	logger *slog.Logger
	info   base.ServerInfo

	mu    sync.Mutex
	state serverState

	// ctx lives as long as the background components; cancel ends them.
	ctx    context.Context
	cancel context.CancelFunc

	proc *processor
	fwd  *forwarder
	hb   *heartbeater
	bg   []*periodic
	sub  *subscriber
	ref  *refresher // nil unless Config.QueueSource is set
}

type serverState int

const (
	stateNew serverState = iota
	stateRunning
	stateStopped // fetching stopped, tasks may still run
	stateClosed
)

// NewServer returns a Server that serves the queues of s as cfg says. An
// invalid cfg is reported by Start and Run (NewServer itself never fails,
// so that its signature matches asynq's).
func NewServer(s *Storage, cfg Config) *Server {
	srv := &Server{s: s, cfgErr: cfg.Validate()}
	srv.cfg = cfg.withDefaults()
	srv.logger = srv.cfg.Logger.With("component", "htq.server")
	host, _ := os.Hostname()
	srv.info = base.ServerInfo{
		ID:             uuid.NewString(),
		Host:           host,
		PID:            os.Getpid(),
		Concurrency:    srv.cfg.Concurrency,
		Queues:         srv.cfg.Queues,
		StrictPriority: srv.cfg.StrictPriority,
	}
	return srv
}

// Start starts the server's components and returns; tasks are fetched
// until Stop or Shutdown.
func (srv *Server) Start(h Handler) error {
	if srv.cfgErr != nil {
		return srv.cfgErr
	}
	if h == nil {
		return fmt.Errorf("%w: nil Handler", ErrInvalidArgument)
	}
	if s := srv.s; s == nil {
		return fmt.Errorf("%w: nil Storage", ErrInvalidArgument)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	switch srv.state {
	case stateRunning, stateStopped:
		return ErrServerRunning
	case stateClosed:
		return ErrServerClosed
	}
	pingCtx, cancelPing := context.WithTimeout(context.Background(), 5*time.Second)
	err := brokerOf(srv.s).Ping(pingCtx)
	cancelPing()
	if err != nil {
		return fmt.Errorf("htq: start server: storage unreachable: %w", err)
	}

	cfg, b, clock := srv.cfg, brokerOf(srv.s), srv.cfg.clock
	srv.ctx, srv.cancel = context.WithCancel(context.Background())
	srv.info.Started = clock.Now()
	srv.info.Status = "active"
	initial := cfg.Queues
	if cfg.QueueSource != nil {
		srcCtx, cancelSrc := context.WithTimeout(context.Background(), 10*time.Second)
		initial, err = cfg.QueueSource(srcCtx)
		cancelSrc()
		if err != nil {
			return fmt.Errorf("htq: start server: QueueSource: %w", err)
		}
		if err := validQueues(initial); err != nil {
			return fmt.Errorf("htq: start server: QueueSource: %w", err)
		}
	}
	queues := newQueueSet(initial, cfg.StrictPriority)

	// The wiring: who talks to whom.
	srv.proc = newProcessor(processorParams{
		broker: b, logger: cfg.Logger, clock: clock, handler: h, queues: queues,
		concurrency: cfg.Concurrency, leaseDuration: cfg.LeaseDuration,
		pollInterval: cfg.TaskCheckInterval, retryDelay: cfg.RetryDelayFunc,
		isFailure: cfg.IsFailure, errorHandler: cfg.ErrorHandler,
		baseContext: cfg.BaseContext, serverID: srv.info.ID,
		tracing: newTracing(cfg.TracerProvider, cfg.Propagator),
	})
	srv.fwd = newForwarder(b, cfg.Logger, clock, queues, cfg.DelayedTaskCheckInterval)
	srv.hb = newHeartbeater(b, cfg.Logger, clock, srv.proc, &srv.info, cfg.LeaseDuration)
	var onUnknown func(string)
	if cfg.QueueSource != nil {
		srv.ref = newRefresher(cfg.QueueSource, cfg.Logger, clock, cfg.QueueRefreshInterval, queues, func() {
			srv.proc.signal()
			srv.fwd.signal()
		})
		onUnknown = func(string) { srv.ref.signal() }
	}
	srv.sub = newSubscriber(b, cfg.Logger, clock, queues, srv.proc.signal, srv.fwd.signal, srv.proc.cancelTask, onUnknown)
	rec := newRecoverer(b, cfg.Logger, queues, cfg.RetryDelayFunc, cfg.ErrorHandler, srv.proc.watch)
	rec.beforeArchive = cfg.BeforeArchiveLost
	jan := newJanitor(b, cfg.Logger, queues, cfg.JanitorBatchSize)
	hc := newHealthChecker(b, cfg.HealthCheckFunc)
	srv.bg = []*periodic{
		// At start too: tasks orphaned while no server ran are due now.
		newPeriodic("recoverer", clock, recoverInterval(cfg.LeaseDuration), rec.exec).runAtStart(),
		newPeriodic("janitor", clock, cfg.JanitorInterval, jan.exec),
		newPeriodic("healthchecker", clock, cfg.HealthCheckInterval, hc.exec),
	}
	if cfg.GroupAggregator != nil {
		agg := newAggregator(srv.s, b, cfg.Logger, queues, cfg)
		srv.bg = append(srv.bg, newPeriodic("aggregator", clock, aggregatorInterval(cfg.GroupGracePeriod), agg.exec))
	}

	srv.hb.start(srv.ctx)
	srv.sub.start(srv.ctx)
	srv.fwd.start(srv.ctx)
	for _, p := range srv.bg {
		p.start(srv.ctx)
	}
	if srv.ref != nil {
		srv.ref.start(srv.ctx)
	}
	srv.proc.start(srv.ctx)
	srv.state = stateRunning
	srv.logger.Info("server started", "id", srv.info.ID, "concurrency", cfg.Concurrency, "queues", cfg.Queues, "storage", srv.s.String())
	return nil
}

// Run starts the server and blocks until SIGINT or SIGTERM, then shuts it
// down gracefully (see Shutdown). SIGTSTP stops fetching new tasks.
func (srv *Server) Run(h Handler) error {
	// Listen before starting, so that no signal can find the default
	// action once tasks run.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGTSTP)
	defer signal.Stop(sigs)
	if err := srv.Start(h); err != nil {
		return err
	}
	for sig := range sigs {
		if sig == syscall.SIGTSTP {
			srv.Stop()
			continue
		}
		break
	}
	srv.Shutdown()
	return nil
}

// Stop stops fetching new tasks; running tasks go on. Call Shutdown to
// finish.
func (srv *Server) Stop() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.state != stateRunning {
		return
	}
	srv.logger.Info("stopping: no new tasks will be fetched")
	srv.proc.stopFetching()
	srv.info.Status = "stopped"
	srv.state = stateStopped
}

// Shutdown stops fetching, waits up to ShutdownTimeout for running tasks,
// then cancels those still running and puts them back to pending, and stops
// every component. It is safe to call more than once.
func (srv *Server) Shutdown() {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.state == stateNew || srv.state == stateClosed {
		srv.state = stateClosed
		return
	}
	srv.logger.Info("shutting down")
	// Order matters: stop taking work, let the running work end (or send it
	// back), write the last outcomes, then stop the components that serve
	// running tasks (the heartbeater last, so leases live until then).
	srv.proc.stopFetching()
	srv.proc.drain(srv.cfg.ShutdownTimeout)
	srv.fwd.shutdown()
	if srv.ref != nil {
		srv.ref.shutdown()
	}
	for _, p := range srv.bg {
		p.shutdown()
	}
	srv.sub.shutdown()
	srv.hb.shutdown()
	srv.cancel()
	srv.state = stateClosed
	srv.logger.Info("server stopped")
}

// ID returns the server's ID, as its presence record in the storage shows it.
func (srv *Server) ID() string { return srv.info.ID }

// recoverInterval is how often the recoverer looks for expired leases.
func recoverInterval(lease time.Duration) time.Duration {
	d := lease / 2
	if d > 30*time.Second {
		d = 30 * time.Second
	}
	return d
}

// logCall logs err (if any) of a storage call made by a component.
func logCall(logger *slog.Logger, what string, err error, args ...any) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	logger.Warn(what+" failed", append(args, "err", err)...)
}

// validQueues checks queue names and weights.
func validQueues(queues map[string]int) error {
	for q, w := range queues {
		if err := base.ValidateQueueName(q); err != nil {
			return err
		}
		if w <= 0 {
			return fmt.Errorf("%w: queue %q has weight %d, not positive", ErrInvalidArgument, q, w)
		}
	}
	return nil
}
