// Package api is the HTTP face of htq serve: the native JSON API under
// /v1 (queues, tasks, schedules, pull workers, its OpenAPI document),
// /healthz, /readyz and /metrics, with HTQ's /api/* endpoints mounted
// from package htqcompat.
//
// Handlers decode, call and encode; they hold no business logic. Enqueues
// go through htq.Client, management through htq.Inspector, the queue model
// (modes, URL tasks, queue definition, schedules) through package model,
// and the pull-worker calls straight to the storage (there is no public Go
// API for a remote worker). Every error leaves through one function,
// writeError, that maps the sentinel errors to an HTTP status and a JSON
// code (see docs/api.md).
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/apitoken"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/htqcompat"
	"github.com/htqueue/htq/internal/metrics"
	"github.com/htqueue/htq/internal/model"
	"github.com/htqueue/htq/internal/storage"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// DefaultMaxBodyBytes is the request body limit when Options.MaxBodyBytes
// is 0: 4 MiB. A larger body gets 413 payload_too_large.
const DefaultMaxBodyBytes = 4 << 20

// DefaultMaxFetchBytes is the bound on a fetch's answer when
// Options.MaxFetchBytes is 0: 4 MiB.
const DefaultMaxFetchBytes = 4 << 20

// Options configures the handler.
type Options struct {
	// Storage holds the queues. Required.
	Storage *htq.Storage
	// Token is the bearer token every /v1 call must present
	// ("Authorization: Bearer <token>"), when the service is configured
	// with one. Set Token or Tokens.
	Token string
	// Tokens, when set, decides which bearer tokens are accepted: those
	// stored with the data, which POST /v1/token/rotate rotates. Token is
	// then ignored.
	Tokens *apitoken.Checker
	// HTQAppKey and HTQAppToken are the credentials of the HTQ-compatible
	// /api/* endpoints (form fields app_key and app_token). When both are
	// empty those endpoints refuse every call with error_code 1000.
	HTQAppKey, HTQAppToken string
	// Location is the time zone of HTQ's execute_time (default time.Local).
	Location *time.Location
	// MaxBodyBytes bounds a request body (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxFetchBytes bounds the answer of a pull worker's fetch (default
	// DefaultMaxFetchBytes): a fetch returns fewer tasks than it asked
	// for, but always at least one, rather than a larger answer.
	MaxFetchBytes int64
	// Logger receives the handler's logs (default slog.Default()).
	Logger *slog.Logger
	// Registry is where /metrics' collectors are registered and what it
	// serves. Nil: a registry of the handler's own, with the Go runtime
	// and process collectors.
	Registry *prometheus.Registry
	// Metrics receives the dispatcher's observations and the handler's own
	// (requests by route and status class, pull workers' leases), and is
	// served on /metrics. Nil: the handler makes its own (the dispatch
	// histograms then stay empty).
	Metrics *metrics.Metrics
	// MetricsAuth makes GET /metrics ask for the bearer token as /v1
	// does: its queue metrics name every queue. htq serve sets it unless
	// it listens on loopback only (--metrics-auth).
	MetricsAuth bool
	// Ready reports whether the service can take work (/readyz). Nil:
	// the storage answers a ping within 2 s.
	Ready func(ctx context.Context) error
	// Context bounds the handler's background work: its one storage
	// subscription, which wakes long-polling pull workers and tells them
	// of cancels at their heartbeat. Cancel it at shutdown (after the
	// HTTP server's Shutdown). Nil: context.Background().
	Context context.Context
	// Meta keeps the queue records and schedules. Nil: the storage's own
	// records.
	Meta broker.MetaStore
	// Queues caches the queue records; share it with the dispatcher so
	// that a change through the API is seen at once. Nil: a cache of the
	// handler's own over Meta.
	Queues *model.Cache
	// CheckTarget, when set, is asked about every URL task's target at
	// enqueue; an error refuses the task with 422 target_not_allowed (the
	// dispatcher's guard still checks the address it dials).
	CheckTarget func(ctx context.Context, target *url.URL) error
	// SchedulesChanged, when set, is called after a schedule is created or
	// deleted through this handler, so the service reloads them at once.
	SchedulesChanged func()
	// CompletedRetention is how long a task enqueued through the handler
	// is kept after it completes, with its result, when neither the task
	// nor its queue (completed_retention_s) says: htq serve's
	// --completed-retention. 0: such tasks are not kept.
	CompletedRetention time.Duration
	// DispatchTimeout is the request timeout of a URL task when neither
	// the task nor its queue sets one (htq serve's --dispatch-timeout),
	// shown as the task's timeout_ms. 0: model.DefaultDispatchTimeout.
	DispatchTimeout time.Duration
	// Pprof serves the Go runtime's profiles (net/http/pprof) under
	// /debug/pprof/, behind the bearer token as /v1 is: htq serve's
	// --pprof. Off by default.
	Pprof bool
	// EnqueueRetryFor is how long an enqueue keeps trying while the
	// storage cannot be reached or does not answer, before it answers 503
	// (htq.ClientOptions.RetryFor; htq serve gives its storage timeout, so
	// that an outage answers within it). 0: htq.DefaultRetryFor.
	EnqueueRetryFor time.Duration
	// CORSOrigins lists the origins (scheme://host[:port], or "*" for
	// any) whose browsers may call /v1; empty: none (CORS is off). See
	// CheckCORSOrigins.
	CORSOrigins []string

	// TracerProvider makes the span of each enqueue (htq.ClientOptions).
	// Nil: OpenTelemetry's global provider.
	TracerProvider trace.TracerProvider
	// Propagator reads the trace context of a request (its traceparent and
	// tracestate headers), which the tasks it enqueues carry, and writes
	// it into them. Nil: OpenTelemetry's global propagator. Its Fields
	// (the headers a request is looked at for) are read once, by New.
	Propagator propagation.TextMapPropagator

	// clock drives the handler's background loops (tests; default the
	// real clock).
	clock clockwork.Clock
}

// handler serves every route.
// store is what the HTTP layer uses of the storage directly, beside the
// Client and Inspector that every Go program has: the lease operations of
// pull workers (the work a Go Server does for its own handlers), the
// upkeep of queues that only pull workers serve, the storage's events, and
// the records htq serve keeps beside the queues.
type store interface {
	broker.MetaStore
	Fetch(ctx context.Context, p broker.FetchParams) ([]*broker.Lease, error)
	Complete(ctx context.Context, leases []broker.LeaseRef) []error
	Requeue(ctx context.Context, l broker.LeaseRef) error
	Retry(ctx context.Context, p broker.RetryParams) error
	Archive(ctx context.Context, p broker.ArchiveParams) error
	ExtendLeases(ctx context.Context, queue string, leases []broker.LeaseRef, d time.Duration) (lost []string, err error)
	ExpiredLeases(ctx context.Context, queue string, limit int) ([]*broker.Lease, error)
	WriteResult(ctx context.Context, l broker.LeaseRef, data []byte) error
	DeleteExpiredCompleted(ctx context.Context, queue string, limit int) (int, error)
	Forward(ctx context.Context, queue string, limit int) (broker.ForwardResult, error)
	GetTaskInfo(ctx context.Context, queue, id string) (*base.TaskInfo, error)
	Subscribe(ctx context.Context) (<-chan broker.Event, error)
	WriteServerState(ctx context.Context, info *base.ServerInfo, ttl time.Duration) error
	ReadEvents(ctx context.Context, p broker.ReadEventsParams) (*broker.EventBatch, error)
	Queues(ctx context.Context) ([]string, error)
	DependencyResults(ctx context.Context, l broker.LeaseRef) ([]base.DependencyResult, error)
}

type handler struct {
	opts      Options
	b         store
	client    *htq.Client
	inspector *htq.Inspector
	meta      broker.MetaStore
	queues    *model.Cache
	reg       *model.Registry
	logger    *slog.Logger
	metrics   *metrics.Metrics
	token     []byte
	// traceFields are the propagator's header names in canonical form,
	// read once: most requests carry none, and asking the propagator and
	// canonicalizing each name per request cost allocations.
	traceFields []string
	hub         *hub
	upkeep      *upkeep
	sampler     *sampler
	workers     *pullWorkers
	eventHub    *eventHub
	mux         *http.ServeMux // the routes (noRoute asks it which methods a path takes)
	serve       http.Handler   // mux behind the CORS rule
}

// New returns the HTTP handler of htq serve.
func New(opts Options) (http.Handler, error) {
	if opts.Storage == nil {
		return nil, errors.New("api: Options.Storage is nil")
	}
	if opts.Token == "" && opts.Tokens == nil {
		return nil, errors.New("api: Options.Token is empty and Options.Tokens nil; every /v1 call needs a token")
	}
	if opts.CompletedRetention < 0 {
		return nil, fmt.Errorf("api: Options.CompletedRetention %v is negative", opts.CompletedRetention)
	}
	if opts.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("api: Options.MaxBodyBytes %d is negative", opts.MaxBodyBytes)
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.MaxFetchBytes < 0 {
		return nil, fmt.Errorf("api: Options.MaxFetchBytes %d is negative", opts.MaxFetchBytes)
	}
	if opts.MaxFetchBytes == 0 {
		opts.MaxFetchBytes = DefaultMaxFetchBytes
	}
	if opts.Location == nil {
		opts.Location = time.Local
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Context == nil {
		opts.Context = context.Background()
	}
	if opts.clock == nil {
		opts.clock = clockwork.NewRealClock()
	}
	if err := CheckCORSOrigins(opts.CORSOrigins); err != nil {
		return nil, fmt.Errorf("api: Options.CORSOrigins: %w", err)
	}
	if opts.Propagator == nil {
		opts.Propagator = otel.GetTextMapPropagator()
	}
	var b store = storage.BrokerOf(opts.Storage)
	if opts.Meta == nil {
		opts.Meta = b
	}
	if opts.Queues == nil {
		opts.Queues = model.NewCache(opts.Meta, 0)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	reg := opts.Registry
	if reg == nil {
		reg = newDefaultRegistry()
	}
	h := &handler{
		opts: opts, b: b,
		client: htq.NewClientWithOptions(opts.Storage, htq.ClientOptions{RetryFor: opts.EnqueueRetryFor,
			TracerProvider: opts.TracerProvider, Propagator: opts.Propagator}),
		inspector: htq.NewInspector(opts.Storage),
		meta:      opts.Meta, queues: opts.Queues,
		logger:  opts.Logger.With("component", "htq.api"),
		metrics: opts.Metrics,
		token:   []byte(opts.Token),
	}
	for _, f := range opts.Propagator.Fields() {
		h.traceFields = append(h.traceFields, http.CanonicalHeaderKey(f))
	}
	h.reg = model.NewRegistry(h.queues, h.inspector, opts.CheckTarget,
		model.Defaults{CompletedRetention: opts.CompletedRetention, DispatchTimeout: opts.DispatchTimeout}, h.logger)
	h.upkeep = newUpkeep(b, h.metrics, h.logger)
	h.hub = newHub(opts.Context, b, h.logger)
	h.hub.onSched = h.upkeep.scheduled
	h.hub.start()
	if err := registerMetrics(reg, opts.Metrics, h.collectQueues); err != nil {
		return nil, err
	}
	h.sampler = newSampler(opts.clock, h.inspector, h.logger)
	h.sampler.sample() // the series start with the handler
	go h.sampler.run(opts.Context)
	h.workers = newPullWorkers(b, opts.clock, h.logger)
	go h.workers.run(opts.Context)
	h.eventHub = newEventHub(opts.Context, b, h.logger)
	h.mux = h.routes(reg)
	h.serve = newCORS(opts.CORSOrigins).wrap(h.mux)
	return h, nil
}

// ServeHTTP serves one request and counts it by route (the pattern the
// router matched, which it leaves in r.Pattern) and status class. A path
// the mux would answer with a redirect and no JSON (see unclean) gets a
// JSON 404 instead.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if unclean(r.URL.Path) {
		h.writeError(w, r, fmt.Errorf("%w: %s %q: the path is not in its clean form (an empty queue name or task ID, \"//\", \".\" or \"..\")", errNoRoute, r.Method, r.URL.Path))
		return
	}
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	r = h.withTraceContext(r)
	h.serve.ServeHTTP(sw, r)
	route := r.Pattern
	if route == routeV1Fallback || route == routeFallback {
		route = "" // no route took it: counted as unmatched
	}
	h.metrics.ObserveRequest(route, sw.status(), time.Since(start))
}

// withTraceContext returns r with the trace context its headers carry
// (traceparent, tracestate) in its context, from where an enqueue passes
// it to the tasks; r itself when it carries none.
func (h *handler) withTraceContext(r *http.Request) *http.Request {
	for _, f := range h.traceFields {
		if v := r.Header[f]; len(v) > 0 && v[0] != "" {
			return r.WithContext(h.opts.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
	}
	return r
}

// statusWriter remembers the status of the answer it carries.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// status is the answer's status (200 when the handler wrote nothing).
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// routes lists every route. Native routes pass through auth; the HTQ
// routes check their form credentials themselves.
func (h *handler) routes(reg *prometheus.Registry) *http.ServeMux {
	mux := http.NewServeMux()
	v1 := func(pattern string, fn http.HandlerFunc) { mux.Handle(pattern, h.auth(fn)) }

	v1("GET /v1/queues", h.listQueues)
	v1("POST /v1/queues", h.createQueue)
	v1("GET /v1/queues/{queue}", h.getQueue)
	v1("PATCH /v1/queues/{queue}", h.updateQueue)
	v1("DELETE /v1/queues/{queue}", h.deleteQueue)
	v1("POST /v1/queues/{queue}/pause", h.pauseQueue)
	v1("POST /v1/queues/{queue}/resume", h.resumeQueue)
	v1("GET /v1/queues/{queue}/keys", h.listKeys)

	v1("POST /v1/queues/{queue}/tasks", h.enqueue)
	v1("POST /v1/queues/{queue}/tasks/batch", h.enqueueBatch)
	v1("GET /v1/queues/{queue}/tasks", h.listTasks)
	v1("GET /v1/queues/{queue}/tasks/{id}", h.getTask)
	v1("DELETE /v1/queues/{queue}/tasks/{id}", h.deleteTask)
	v1("POST /v1/queues/{queue}/tasks/{id}/run", h.runTask)
	v1("POST /v1/queues/{queue}/tasks/{id}/archive", h.archiveTask)
	v1("POST /v1/queues/{queue}/tasks/{id}/cancel", h.cancelTask)

	v1("POST /v1/workflows", h.enqueueWorkflow)
	v1("GET /v1/workflows/{id}", h.getWorkflow)
	v1("POST /v1/workflows/{id}/cancel", h.cancelWorkflow)

	v1("POST /v1/fetch", h.fetch)
	v1("POST /v1/queues/{queue}/tasks/{id}/ack", h.ack)
	v1("POST /v1/queues/{queue}/tasks/{id}/fail", h.fail)
	v1("POST /v1/queues/{queue}/tasks/{id}/heartbeat", h.heartbeat)

	v1("POST /v1/token/rotate", h.rotateToken)

	v1("GET /v1/schedules", h.listSchedules)
	v1("POST /v1/schedules", h.createSchedule)
	v1("GET /v1/schedules/{id}", h.getSchedule)
	v1("DELETE /v1/schedules/{id}", h.deleteSchedule)

	// The Inspector's views and bulk actions (admin.go, scheduler.go).
	v1("POST /v1/queues/{queue}/bulk", h.bulk)
	v1("GET /v1/queues/{queue}/history", h.history)
	v1("GET /v1/queues/{queue}/series", h.series)
	v1("GET /v1/queues/{queue}/groups", h.groups)
	v1("GET /v1/servers", h.servers)
	v1("GET /v1/schedules/{id}/history", h.scheduleHistory)
	v1("GET /v1/scheduler-entries", h.schedulerEntries)
	v1("GET /v1/events", h.events)

	mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	v1(routeV1Fallback, h.noRoute)
	mux.HandleFunc(routeFallback, h.noRoute)

	compat := htqcompat.New(htqcompat.Options{
		Registry: h.reg, Client: h.client, Inspector: h.inspector,
		AppKey: h.opts.HTQAppKey, AppToken: h.opts.HTQAppToken, Location: h.opts.Location,
		MaxBodyBytes: h.opts.MaxBodyBytes, Logger: h.logger,
		StatusOf:   func(err error) int { status, _ := statusOf(err); return status },
		RetryAfter: RetryAfter,
	})
	for _, pattern := range htqcompat.Routes() {
		mux.Handle(pattern, compat.Route(pattern))
	}

	if h.opts.Pprof {
		h.mountPprof(mux)
	}

	mux.HandleFunc("GET /healthz", h.healthz)
	mux.HandleFunc("GET /readyz", h.readyz)
	if h.opts.MetricsAuth {
		mux.Handle("GET /metrics", h.auth(metricsHandler(reg).ServeHTTP))
	} else {
		mux.Handle("GET /metrics", metricsHandler(reg))
	}
	return mux
}

// healthz answers while the process runs.
func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 while the service can take work, 503 otherwise, with
// the reason only for a caller that sends the token.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var err error
	if h.opts.Ready != nil {
		err = h.opts.Ready(ctx)
	} else {
		err = h.opts.Storage.Ping(ctx)
	}
	if err != nil {
		// The reason may name the storage's address; only a caller with
		// the token sees it.
		msg := "not ready (send the bearer token to see why)"
		if h.hasToken(r) {
			msg = err.Error()
		}
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: errorDetail{Code: codeUnavailable, Message: msg}})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
