package service

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/api"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/dispatch"
)

// Config configures a Service. The zero value of every field means its
// documented default; Validate reports the first bad field. docs/
// configuration.md lists the same settings as `htq serve` flags,
// environment variables and config-file keys.
type Config struct {
	// Addr is the TCP address the HTTP API listens on (default ":5999").
	// Port 0 picks a free port; Service.Addr tells which.
	Addr string
	// Broker is the storage URL given to htq.Open (default
	// "file:./htq-data", the embedded store in ./htq-data).
	Broker string

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

	// Logger receives the service's logs (default slog.Default()).
	Logger *slog.Logger
	// Stdout receives the one-time message with a generated token and
	// signing secret (default os.Stdout).
	Stdout io.Writer
}

// Defaults of Config.
const (
	DefaultAddr                   = ":5999"
	DefaultBroker                 = "file:./htq-data"
	DefaultTimeZone               = "Local"
	DefaultConcurrency            = 100
	DefaultDispatchTimeout        = dispatch.DefaultTimeout
	DefaultMaxBodyBytes           = 4 << 20
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
	str(&c.Broker, DefaultBroker)
	str(&c.TimeZone, DefaultTimeZone)
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	dur(&c.DispatchTimeout, DefaultDispatchTimeout)
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
	return c
}

// Validate reports every bad field of c (after WithDefaults), each error
// naming the setting; the result wraps ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format, args...))
	}
	if _, port, err := net.SplitHostPort(c.Addr); err != nil {
		bad("addr %q: want host:port or :port: %v", c.Addr, err)
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		bad("addr %q: bad port: %v", c.Addr, err)
	}
	if scheme, _, ok := strings.Cut(c.Broker, ":"); !ok || scheme == "" {
		bad("broker %q: want a storage URL such as file:./htq-data or redis://127.0.0.1:6379/0", redactURL(c.Broker))
	}
	if c.Token != "" {
		if err := checkToken("token", c.Token); err != nil {
			errs = append(errs, err)
		}
	}
	if (c.HTQAppKey == "") != (c.HTQAppToken == "") {
		bad("htq-app-key and htq-app-token go together: set both or neither")
	}
	if c.HTQAppToken != "" {
		if err := checkToken("htq-app-token", c.HTQAppToken); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.SigningSecrets) > 2 {
		bad("signing-secrets: %d given; give one, or two during a key rotation", len(c.SigningSecrets))
	}
	if len(c.SigningSecrets) > 0 {
		if _, err := newSigner(c.SigningSecrets); err != nil {
			bad("signing-secrets: %v", err)
		}
	}
	if _, err := dispatch.NewGuard(c.AllowTargets); err != nil {
		bad("allow-targets: %v", err)
	}
	if err := api.CheckCORSOrigins(c.CORSOrigins); err != nil {
		bad("cors-origins: %v", err)
	}
	if _, err := time.LoadLocation(c.TimeZone); err != nil {
		bad("tz %q: unknown time zone (want an IANA name such as Europe/Paris, UTC or Local): %v", c.TimeZone, err)
	}
	if c.Concurrency < 0 {
		bad("concurrency %d is negative", c.Concurrency)
	}
	if c.MaxBodyBytes < 0 {
		bad("max-body-bytes %d is negative", c.MaxBodyBytes)
	}
	if c.DispatchTimeout < 0 || c.DispatchTimeout > dispatch.DefaultMaxTimeout {
		bad("dispatch-timeout %v is out of range (0, %v]", c.DispatchTimeout, dispatch.DefaultMaxTimeout)
	}
	for name, d := range map[string]time.Duration{
		"shutdown-timeout":         c.ShutdownTimeout,
		"queue-refresh-interval":   c.QueueRefreshInterval,
		"schedule-reload-interval": c.ScheduleReloadInterval,
		"read-header-timeout":      c.ReadHeaderTimeout,
		"read-timeout":             c.ReadTimeout,
		"write-timeout":            c.WriteTimeout,
		"idle-timeout":             c.IdleTimeout,
	} {
		if d < 0 {
			bad("%s %v is negative", name, d)
		}
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= maxLongPoll {
		bad("write-timeout %v must be longer than the longest long poll of /v1/fetch (%v)", c.WriteTimeout, maxLongPoll)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
}

// minTokenLen is the shortest token accepted from the configuration: a
// token is a password and a short one can be guessed.
const minTokenLen = 16

func checkToken(what, tok string) error {
	if len(tok) < minTokenLen {
		return fmt.Errorf("%s is %d characters; use at least %d (or leave the API token unset to have one generated)", what, len(tok), minTokenLen)
	}
	for _, r := range tok {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%s contains a space or control character", what)
		}
	}
	return nil
}

// redactURL hides the password of a storage URL for error messages.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return raw
	}
	if user, _, hasPw := strings.Cut(userinfo, ":"); hasPw {
		return scheme + "://" + user + ":xxxxx@" + host
	}
	return raw
}
