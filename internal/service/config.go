package service

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/htqueue/htq/internal/api"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/internal/model"
)

// Config configures a Service. The zero value of every field means its
// documented default; Validate reports the first bad field. docs/
// configuration.md lists the same settings as `htq serve` flags,
// environment variables and config-file keys.
type Config struct {
	// Addr is the TCP address the HTTP API listens on (default ":5999").
	// Port 0 picks a free port; Service.Addr tells which.
	Addr string
	// Storage is the storage URL given to htq.Open (default
	// "file:./htq-data", the embedded store in ./htq-data).
	Storage string
	// StorageTimeout bounds every call to the storage (default 5 s): on
	// Redis it becomes the storage URL's timeout parameter, so that a
	// Redis that is down, cut off or loading its data fails each call
	// within it, and the API answers 503 with Retry-After instead of
	// waiting for the end of the outage; an enqueue through the API keeps
	// trying within it. A storage URL with its own timeout parameter
	// conflicts with it.
	StorageTimeout time.Duration

	// Token is the API token every /v1 call presents as
	// "Authorization: Bearer <token>". Empty: the token stored with the
	// data is used, and on the very first start one is generated, stored
	// and printed once to Stdout.
	Token string
	// HTQAppKey and HTQAppToken are the credentials of the HTQ-compatible
	// /api endpoints (the app_key and app_token form fields); set both or
	// neither. Empty: those endpoints refuse every call (error_code 1000).
	HTQAppKey   string
	HTQAppToken string

	// SigningSecrets sign every URL task's request in the Standard
	// Webhooks format ("whsec_…"; two during a key rotation, the first
	// being the current one). Empty: the secret stored with the data is
	// used, generated, stored and printed once on the very first start.
	SigningSecrets []string
	// AllowTargets lists the CIDRs, IP addresses, host names and
	// "*.domain" wildcards URL tasks may reach although they are not
	// public (loopback, private, link-local, …). Empty: public addresses
	// only.
	AllowTargets []string
	// CORSOrigins lists the origins (scheme://host[:port], or "*") whose
	// browsers may call the /v1 API. Empty: none (CORS is off).
	CORSOrigins []string

	// TimeZone is the IANA name of the zone the HTQ API's execute_time and
	// cron schedules are read in (default "Local", the machine's zone).
	TimeZone string
	// Concurrency is how many URL tasks the URL worker runs at once
	// (default 100). Each queue's own limit (real_time: 1) applies too.
	Concurrency int
	// DispatchTimeout is the request timeout of a URL task whose task and
	// queue set none (default 30 s).
	DispatchTimeout time.Duration
	// MaxBodyBytes bounds an API request's body; larger ones get 413
	// (default 4 MiB).
	MaxBodyBytes int64
	// CompletedRetention is how long a task enqueued through the API is
	// kept after it completes, with its result (a URL task's answer, the
	// result a pull worker acked), when neither the task (its retention
	// option) nor its queue (completed_retention_s) says (default 24 h).
	// Negative: such tasks are deleted as they complete.
	CompletedRetention time.Duration
	// MetricsAuth says whether GET /metrics asks for the API token as /v1
	// does (its metrics name every queue). Nil: it does unless Addr
	// listens on loopback only (127.0.0.0/8, ::1 or localhost).
	MetricsAuth *bool

	// ShutdownTimeout is how long Shutdown waits for running dispatches
	// before it sends them back to pending (default 10 s).
	ShutdownTimeout time.Duration
	// QueueRefreshInterval is how often the URL worker re-reads the list
	// of URL queues besides the storage events that name a new one
	// (default 5 s).
	QueueRefreshInterval time.Duration
	// ScheduleReloadInterval is how often the stored schedules are re-read
	// besides the reloads the API asks for when it changes one (default
	// 5 s), so a change made through another htq serve process is picked
	// up.
	ScheduleReloadInterval time.Duration

	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are
	// the HTTP server's (defaults 10 s, 60 s, 90 s, 120 s). WriteTimeout
	// must exceed the longest pull-worker long poll (30 s).
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration

	// RedisWaitReplicas, RedisWaitTimeout and RedisWaitAOFLocal make every
	// write a caller relies on (an enqueue through the API, a task's
	// outcome) wait until that many replicas received it (WAIT) and, with
	// RedisWaitAOFLocal, until the primary fsynced it to its append-only
	// file (WAITAOF, Redis 7.2+), each wait bounded by RedisWaitTimeout
	// (0: 1 s); a wait not met fails the call. They become the Redis
	// broker URL's wait_replicas, wait_timeout and wait_aof_local
	// parameters (docs/operations.md); zero values wait for nothing.
	RedisWaitReplicas int
	RedisWaitTimeout  time.Duration
	RedisWaitAOFLocal bool
	// Pprof serves the Go runtime's profiles (CPU, heap, goroutines, …)
	// under /debug/pprof/, behind the API token (docs/operations.md).
	// Off by default.
	Pprof bool
	// UIReadOnly makes the dashboard (/ui/) read-only: it shows no action,
	// and the API refuses every call made with a dashboard session that
	// is not a GET or HEAD (403). The bearer token keeps every right.
	UIReadOnly bool

	// TracerProvider makes the service's spans: each enqueue through the
	// API (a child of the request's traceparent), each attempt of a URL
	// task and its HTTP request (docs/tracing.md). Nil: OpenTelemetry's
	// global provider, a no-op unless the program set one; `htq serve`
	// sets one that exports with OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is
	// set (see NewTracerProvider).
	TracerProvider trace.TracerProvider
	// Propagator carries the trace context from an enqueue request's
	// headers into the task, and from the task onto its URL request and
	// into a pull worker's fetch. Nil: W3C Trace Context (traceparent,
	// tracestate), which passes a caller's trace on even when the service
	// makes no spans of its own.
	Propagator propagation.TextMapPropagator

	// Logger receives the service's logs (default slog.Default()).
	Logger *slog.Logger
	// Stdout receives the one-time message with a generated token and
	// signing secret (default os.Stdout).
	Stdout io.Writer
}

// Defaults of Config.
const (
	DefaultAddr                   = ":5999"
	DefaultStorage                = "file:./htq-data"
	DefaultStorageTimeout         = 5 * time.Second
	DefaultTimeZone               = "Local"
	DefaultConcurrency            = 100
	DefaultDispatchTimeout        = dispatch.DefaultTimeout
	DefaultMaxBodyBytes           = 4 << 20
	DefaultCompletedRetention     = 24 * time.Hour
	DefaultShutdownTimeout        = 10 * time.Second
	DefaultQueueRefreshInterval   = 5 * time.Second
	DefaultScheduleReloadInterval = 5 * time.Second
	DefaultReadHeaderTimeout      = 10 * time.Second
	DefaultReadTimeout            = 60 * time.Second
	DefaultWriteTimeout           = 90 * time.Second
	DefaultIdleTimeout            = 120 * time.Second
	// maxLongPoll is the longest wait of POST /v1/fetch.
	maxLongPoll = 30 * time.Second
)

// ErrInvalidConfig marks a Config that Validate refuses. It wraps
// base.ErrInvalidArgument, so errors.Is works with either.
var ErrInvalidConfig = fmt.Errorf("%w: service config", base.ErrInvalidArgument)

// WithDefaults returns a copy of c with every zero field set to its
// default (the token, app credentials and signing secrets stay empty:
// Start loads or generates them).
func (c Config) WithDefaults() Config {
	str := func(s *string, def string) {
		if strings.TrimSpace(*s) == "" {
			*s = def
		}
	}
	dur := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	str(&c.Addr, DefaultAddr)
	str(&c.Storage, DefaultStorage)
	str(&c.TimeZone, DefaultTimeZone)
	dur(&c.StorageTimeout, DefaultStorageTimeout)
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	dur(&c.DispatchTimeout, DefaultDispatchTimeout)
	dur(&c.CompletedRetention, DefaultCompletedRetention)
	dur(&c.ShutdownTimeout, DefaultShutdownTimeout)
	dur(&c.QueueRefreshInterval, DefaultQueueRefreshInterval)
	dur(&c.ScheduleReloadInterval, DefaultScheduleReloadInterval)
	dur(&c.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	dur(&c.ReadTimeout, DefaultReadTimeout)
	dur(&c.WriteTimeout, DefaultWriteTimeout)
	dur(&c.IdleTimeout, DefaultIdleTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	return c
}

// Validate reports every bad field of c (after WithDefaults), each a
// *SettingError naming the setting; the result wraps ErrInvalidConfig.
func (c Config) Validate() error { return c.ValidateFrom(nil) }

// ValidateFrom is Validate for a program that knows where each setting's
// value came from: source(setting) says it ("--tz", "HTQ_TZ", "config file
// /etc/htq.toml, key tz"; "" when it does not know), and each error names
// it instead of the bare setting. Settings are named as `htq serve` names
// its flags, without the dashes.
func (c Config) ValidateFrom(source func(setting string) string) error {
	timeoutGiven := c.StorageTimeout != 0
	c = c.WithDefaults()
	var errs []error
	bad := func(setting, format string, args ...any) {
		e := &SettingError{Setting: setting, Problem: fmt.Sprintf(format, args...)}
		if source != nil {
			e.Source = source(setting)
		}
		errs = append(errs, e)
	}
	if c.StorageTimeout < 0 {
		bad("storage-timeout", "%v is negative", c.StorageTimeout)
	} else if timeoutGiven && urlParam(c.Storage, "timeout") {
		bad("storage-timeout", "the storage URL sets timeout too: set it in one place")
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil {
		bad("addr", "%q: want host:port or :port: %v", c.Addr, err)
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		bad("addr", "%q: bad port: %v", c.Addr, err)
	}
	if scheme, _, ok := strings.Cut(c.Storage, ":"); !ok || scheme == "" {
		bad("storage", "%q: want a storage URL such as file:./htq-data or redis://127.0.0.1:6379/0", base.RedactURL(c.Storage))
	}
	errs = append(errs, c.validateRedisWait()...)
	if c.Token != "" {
		if problem := checkToken(c.Token); problem != "" {
			bad("token", "%s (or leave it unset: the first start then generates one, stores it with the data and prints it once)", problem)
		}
	}
	switch {
	case c.HTQAppKey != "" && c.HTQAppToken == "":
		bad("htq-app-key", "set without htq-app-token; set both or neither")
	case c.HTQAppKey == "" && c.HTQAppToken != "":
		bad("htq-app-token", "set without htq-app-key; set both or neither")
	}
	if c.HTQAppToken != "" {
		if problem := checkToken(c.HTQAppToken); problem != "" {
			bad("htq-app-token", "%s (or leave it and htq-app-key unset: the HTQ-compatible /api endpoints then refuse every call)", problem)
		}
	}
	if len(c.SigningSecrets) > 2 {
		bad("signing-secrets", "%d given; give one, or two during a key rotation", len(c.SigningSecrets))
	}
	if len(c.SigningSecrets) > 0 {
		if _, err := newSigner(c.SigningSecrets); err != nil {
			bad("signing-secrets", "%v", err)
		}
	}
	if _, err := dispatch.NewGuard(c.AllowTargets); err != nil {
		bad("allow-targets", "%v", err)
	}
	if err := api.CheckCORSOrigins(c.CORSOrigins); err != nil {
		bad("cors-origins", "%v", err)
	}
	if _, err := time.LoadLocation(c.TimeZone); err != nil {
		bad("tz", "%q: unknown time zone (want an IANA name such as Europe/Paris, UTC or Local): %v", c.TimeZone, err)
	}
	if c.Concurrency < 0 {
		bad("concurrency", "%d is negative", c.Concurrency)
	}
	if c.MaxBodyBytes < 0 {
		bad("max-body-bytes", "%d is negative", c.MaxBodyBytes)
	}
	if c.DispatchTimeout < 0 || c.DispatchTimeout > model.MaxDispatchTimeout {
		bad("dispatch-timeout", "%v is out of range (0, %v]", c.DispatchTimeout, model.MaxDispatchTimeout)
	}
	if c.CompletedRetention > model.MaxCompletedRetention {
		bad("completed-retention", "%v is longer than %v", c.CompletedRetention, model.MaxCompletedRetention)
	}
	for _, d := range []struct {
		setting string
		d       time.Duration
	}{
		{"shutdown-timeout", c.ShutdownTimeout},
		{"queue-refresh-interval", c.QueueRefreshInterval},
		{"schedule-reload-interval", c.ScheduleReloadInterval},
		{"read-header-timeout", c.ReadHeaderTimeout},
		{"read-timeout", c.ReadTimeout},
		{"write-timeout", c.WriteTimeout},
		{"idle-timeout", c.IdleTimeout},
	} {
		if d.d < 0 {
			bad(d.setting, "%v is negative", d.d)
		}
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= maxLongPoll {
		bad("write-timeout", "%v must be longer than the longest long poll of /v1/fetch (%v)", c.WriteTimeout, maxLongPoll)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}

// A SettingError is what Validate says of one bad setting.
type SettingError struct {
	// Setting is the setting's name as `htq serve` spells its flag
	// ("tz", "write-timeout").
	Setting string
	// Source is where the value came from ("--tz", "HTQ_TZ", "config
	// file /etc/htq.toml, key tz"); empty when not known.
	Source string
	// Problem says what is wrong with the value.
	Problem string
}

// Error names the source, or the setting when the source is not known,
// then the problem: "HTQ_TZ: "Mars/Olympus": unknown time zone …".
func (e *SettingError) Error() string {
	name := e.Setting
	if e.Source != "" {
		name = e.Source
	}
	return name + ": " + e.Problem
}

// redisWaitParams maps the redis-wait-* settings to the storage URL
// parameters they become.
var redisWaitParams = []struct{ setting, param string }{
	{"redis-wait-replicas", "wait_replicas"},
	{"redis-wait-timeout", "wait_timeout"},
	{"redis-wait-aof-local", "wait_aof_local"},
}

// validateRedisWait checks the redis-wait-* settings against each other
// and against the broker URL.
func (c Config) validateRedisWait() []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if c.RedisWaitReplicas < 0 {
		bad("redis-wait-replicas %d is negative", c.RedisWaitReplicas)
	}
	if c.RedisWaitTimeout < 0 || (c.RedisWaitTimeout > 0 && c.RedisWaitTimeout < time.Millisecond) {
		bad("redis-wait-timeout %v is not a duration of at least 1ms", c.RedisWaitTimeout)
	}
	if c.RedisWaitTimeout > 0 && c.RedisWaitReplicas <= 0 && !c.RedisWaitAOFLocal {
		bad("redis-wait-timeout does nothing without redis-wait-replicas >= 1 or redis-wait-aof-local")
	}
	if c.RedisWaitReplicas == 0 && c.RedisWaitTimeout == 0 && !c.RedisWaitAOFLocal {
		return errs
	}
	if !isRedis(c.Storage) {
		bad("redis-wait-replicas, redis-wait-timeout and redis-wait-aof-local apply to Redis storage (redis://, rediss://, redis-sentinel://, redis-cluster://), not %q", base.RedactURL(c.Storage))
		return errs
	}
	for _, p := range redisWaitParams {
		if urlParam(c.Storage, p.param) {
			bad("storage URL sets %s and a redis-wait-* setting is given too: set the wait in one place (%s or the URL's %s)", p.param, p.setting, p.param)
		}
	}
	return errs
}

// urlParam tells whether the storage URL has the query parameter name.
func urlParam(storage, name string) bool {
	_, rawQuery, ok := strings.Cut(storage, "?")
	if !ok {
		return false
	}
	q, _ := url.ParseQuery(rawQuery) // the storage checks the URL itself
	return q.Has(name)
}

// isRedis tells whether the storage URL names a Redis storage.
func isRedis(storage string) bool {
	scheme, _, _ := strings.Cut(storage, ":")
	switch strings.ToLower(scheme) {
	case "redis", "rediss", "redis-sentinel", "redis-cluster":
		return true
	}
	return false
}

// storageURL is Storage with the redis-wait-* settings added as the
// storage URL's wait_* parameters and, on Redis, StorageTimeout as its
// timeout parameter (unless the URL has one).
func (c Config) storageURL() string {
	var q []string
	if isRedis(c.Storage) && c.StorageTimeout > 0 && !urlParam(c.Storage, "timeout") {
		q = append(q, "timeout="+c.StorageTimeout.String())
	}
	if c.RedisWaitReplicas > 0 {
		q = append(q, "wait_replicas="+strconv.Itoa(c.RedisWaitReplicas))
	}
	if c.RedisWaitTimeout > 0 {
		q = append(q, "wait_timeout="+c.RedisWaitTimeout.String())
	}
	if c.RedisWaitAOFLocal {
		q = append(q, "wait_aof_local=true")
	}
	if len(q) == 0 {
		return c.Storage
	}
	sep := "?"
	if strings.Contains(c.Storage, "?") {
		sep = "&"
	}
	return c.Storage + sep + strings.Join(q, "&")
}

// metricsAuth reports whether /metrics asks for the token: as MetricsAuth
// says, else unless Addr's host is a loopback address or localhost (an
// empty host, 0.0.0.0 or :: listen on every interface).
func (c Config) metricsAuth() bool {
	if c.MetricsAuth != nil {
		return *c.MetricsAuth
	}
	host, _, err := net.SplitHostPort(c.WithDefaults().Addr)
	if err != nil {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// minTokenLen is the shortest token accepted from the configuration: a
// token is a password and a short one can be guessed.
const minTokenLen = 16

// checkToken says what is wrong with a token, or "".
func checkToken(tok string) string {
	if len(tok) < minTokenLen {
		return fmt.Sprintf("%d characters; use at least %d", len(tok), minTokenLen)
	}
	for _, r := range tok {
		if r <= ' ' || r == 0x7f {
			return "has a space or control character"
		}
	}
	return ""
}
