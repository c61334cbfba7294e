// Package dispatch runs URL tasks: it makes the task's HTTP request to its
// target, signed in the Standard Webhooks format, through a target guard
// that refuses private and local addresses at dial time, within the task's
// timeout and reading at most 64 KiB of the answer. It returns the answer as
// a Result and a classified error; Policy.Classify says whether the task
// succeeded, should be retried or archived, and NextInterval applies the
// rule of HTQ's variable queues.
//
// The package knows nothing of storage: the caller (htq serve) fetches the
// task, builds a Request, calls Dispatcher.Dispatch and writes the outcome.
package dispatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/htqueue/htq/webhook"
)

// Headers htq puts on every request.
const (
	// HeaderTaskID carries the task's ID (also sent as webhook-id).
	HeaderTaskID = "Htq-Task-Id"
	// HeaderQueue carries the task's queue.
	HeaderQueue = "Htq-Queue"
	// HeaderRetryCount carries how many times the task was retried before
	// this attempt (0 on the first attempt).
	HeaderRetryCount = "Htq-Retry-Count"
	// HeaderCallbackOf is set on a callback's request only: the ID of the
	// task whose outcome it reports (htq serve sets it).
	HeaderCallbackOf = "Htq-Callback-Of"
	// HeaderWorkflow and HeaderWorkflowTask carry, for a workflow task,
	// its workflow's ID and its own ID within the workflow.
	HeaderWorkflow     = "Htq-Workflow"
	HeaderWorkflowTask = "Htq-Workflow-Task"
	// HeaderDependencies carries a workflow task's dependencies' outcomes
	// (JSON, docs/api.md). Like the other Htq headers it is not covered by
	// the signature.
	HeaderDependencies = "Htq-Dependencies"
)

// Defaults of Config.
const (
	DefaultTimeout             = 30 * time.Second
	DefaultMaxTimeout          = 30 * time.Minute
	DefaultMaxRedirects        = 3
	DefaultMaxResponseBytes    = 64 << 10
	DefaultMaxRetryAfter       = time.Hour
	DefaultMaxIdleConnsPerHost = 256
	DefaultDialTimeout         = 10 * time.Second
	DefaultUserAgent           = "htq"
	// maxResponseHeaderBytes bounds the headers of an answer.
	maxResponseHeaderBytes = 64 << 10
)

// Config configures a Dispatcher. Zero fields take the documented defaults.
type Config struct {
	// Signer signs every request. Required.
	Signer *webhook.Signer

	// Allow is the target guard's allowlist: CIDRs, IP addresses, host
	// names and "*.domain" wildcards that may be reached even though they
	// are not public (see NewGuard). Empty: only public addresses.
	Allow []string

	// Timeout is the timeout of a task whose Request has none: it bounds
	// the whole exchange, from dialing to the last byte of the body read.
	// Default 30 s.
	Timeout time.Duration
	// MaxTimeout is the largest Request.Timeout accepted. Default 30 min.
	MaxTimeout time.Duration

	// MaxRedirects is how many redirects to the same host (same host name
	// and port, or http to https on the default ports) are followed; each
	// new connection passes the target guard again. Redirects to another
	// host are never followed. 0 means the default, 3; negative means none.
	MaxRedirects int

	// MaxResponseBytes is how much of an answer's body is read and kept.
	// Default 64 KiB.
	MaxResponseBytes int64

	// MaxRetryAfter caps the delay a target may ask for with Retry-After.
	// Default 1 h.
	MaxRetryAfter time.Duration

	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// per target host; it should be at least the dispatch concurrency.
	// Default 256.
	MaxIdleConnsPerHost int

	// DialTimeout bounds one connection attempt (a dial may outlive the
	// request that started it, so it needs its own bound). Default 10 s.
	DialTimeout time.Duration

	// UserAgent is sent when the Request sets none. Default "htq".
	UserAgent string

	// TLSClientConfig configures TLS (root CAs, client certificates); nil
	// uses the system roots.
	TLSClientConfig *tls.Config

	// Now is the clock used for webhook-timestamp and HTTP-date
	// Retry-After values; nil means time.Now.
	Now func() time.Time

	// TracerProvider makes the HTTP client span of each Dispatch, a child
	// of the span in its ctx. Nil: OpenTelemetry's global provider, a
	// no-op unless the application set one.
	TracerProvider trace.TracerProvider
	// Propagator writes the trace context of the dispatch (traceparent,
	// tracestate) into the request's headers, over a task's own headers
	// of those names. Nil: OpenTelemetry's global propagator.
	Propagator propagation.TextMapPropagator
}

// withDefaults returns c with zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxTimeout == 0 {
		c.MaxTimeout = DefaultMaxTimeout
	}
	switch {
	case c.MaxRedirects == 0:
		c.MaxRedirects = DefaultMaxRedirects
	case c.MaxRedirects < 0:
		c.MaxRedirects = 0
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if c.MaxIdleConnsPerHost == 0 {
		c.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Propagator == nil {
		c.Propagator = otel.GetTextMapPropagator()
	}
	return c
}

// validate reports the first bad field of c (after withDefaults).
func (c Config) validate() error {
	switch {
	case c.Signer == nil:
		return fmt.Errorf("%w: Signer is required (every request is signed)", ErrInvalidConfig)
	case c.Timeout < 0:
		return fmt.Errorf("%w: Timeout %s is negative", ErrInvalidConfig, c.Timeout)
	case c.MaxTimeout < 0:
		return fmt.Errorf("%w: MaxTimeout %s is negative", ErrInvalidConfig, c.MaxTimeout)
	case c.Timeout > c.MaxTimeout:
		return fmt.Errorf("%w: Timeout %s is above MaxTimeout %s", ErrInvalidConfig, c.Timeout, c.MaxTimeout)
	case c.MaxResponseBytes < 0:
		return fmt.Errorf("%w: MaxResponseBytes %d is negative", ErrInvalidConfig, c.MaxResponseBytes)
	case c.MaxRetryAfter < 0:
		return fmt.Errorf("%w: MaxRetryAfter %s is negative", ErrInvalidConfig, c.MaxRetryAfter)
	case c.MaxIdleConnsPerHost < 0:
		return fmt.Errorf("%w: MaxIdleConnsPerHost %d is negative", ErrInvalidConfig, c.MaxIdleConnsPerHost)
	case c.DialTimeout < 0:
		return fmt.Errorf("%w: DialTimeout %s is negative", ErrInvalidConfig, c.DialTimeout)
	}
	return nil
}

// A Request is one URL task's HTTP request and the task's identity.
type Request struct {
	// TaskID is the task's ID, sent as Htq-Task-Id and webhook-id (the
	// same on every retry, so receivers can drop duplicates). Required.
	TaskID string
	// Queue is the task's queue, sent as Htq-Queue. Required.
	Queue string
	// RetryCount is how many times the task was retried before this
	// attempt, sent as Htq-Retry-Count.
	RetryCount int

	// URL is the target, http or https.
	URL string
	// Method is GET, HEAD, POST, PUT, PATCH, DELETE or OPTIONS, in any
	// case; "" means POST.
	Method string
	// Header holds the task's own headers. The htq and webhook headers
	// and the ones HTTP manages (Host, Content-Length, Transfer-Encoding,
	// Connection, …) may not be set here. Content-Type is not added: set
	// it when there is a body.
	Header http.Header
	// Body is sent as is; it is what the signature covers.
	Body []byte
	// Timeout bounds the whole exchange; 0 means Config.Timeout.
	Timeout time.Duration
	// Workflow, WorkflowTask and Dependencies, for a workflow task, are
	// sent as Htq-Workflow, Htq-Workflow-Task and Htq-Dependencies.
	Workflow, WorkflowTask, Dependencies string
}

// A Result is the target's answer.
type Result struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the answer's headers.
	Header http.Header
	// Body holds the first MaxResponseBytes (64 KiB) of the body.
	Body []byte
	// Truncated reports that the body was longer than Body.
	Truncated bool
	// Duration is the time from sending the request to reading the body.
	Duration time.Duration
}

// A Dispatcher sends URL tasks' requests through one pooled HTTP client. It
// is safe for concurrent use; make one per process and reuse it.
type Dispatcher struct {
	cfg       Config
	guard     *Guard
	signer    atomic.Pointer[webhook.Signer]
	transport *http.Transport
	client    *http.Client
	tracer    trace.Tracer
}

// New returns a Dispatcher for cfg.
func New(cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	guard, err := NewGuard(cfg.Allow)
	if err != nil {
		return nil, err
	}
	d := &Dispatcher{cfg: cfg, guard: guard, tracer: cfg.TracerProvider.Tracer(TracerName)}
	d.signer.Store(cfg.Signer)

	var tlsConfig *tls.Config
	if cfg.TLSClientConfig != nil {
		tlsConfig = cfg.TLSClientConfig.Clone()
	}
	d.transport = &http.Transport{
		// Never a proxy from the environment: the guard would then see
		// only the proxy's address.
		Proxy:                  nil,
		DialContext:            guard.DialContext(&net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}),
		TLSClientConfig:        tlsConfig,
		TLSHandshakeTimeout:    10 * time.Second,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           4 * cfg.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// Keep the body as the target sent it (what "done" is compared
		// with, what the Result stores).
		DisableCompression: true,
	}
	d.client = &http.Client{
		Transport:     d.transport,
		CheckRedirect: d.checkRedirect,
	}
	return d, nil
}

// SetSigner replaces the Signer, for a key rotation without a restart.
func (d *Dispatcher) SetSigner(s *webhook.Signer) {
	if s != nil {
		d.signer.Store(s)
	}
}

// Guard returns the Dispatcher's target guard, so the API can refuse a bad
// target when the task is created (Guard.CheckURL).
func (d *Dispatcher) Guard() *Guard { return d.guard }

// Close closes the idle connections. Dispatches in flight are not affected.
func (d *Dispatcher) Close() { d.transport.CloseIdleConnections() }

// Validate checks req as Dispatch would before sending it, without sending
// anything: the API calls it when the task is created. It returns nil, an
// error matching ErrInvalidRequest, or a *TargetError for an IP address the
// guard refuses.
func (d *Dispatcher) Validate(req Request) error {
	u, _, _, err := d.prepare(&req)
	if err != nil {
		return err
	}
	return d.guard.CheckURL(u)
}

var allowedMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// reservedHeaders may not be set by a task: htq sets them, or HTTP does.
var reservedHeaders = map[string]bool{
	HeaderTaskID: true, HeaderQueue: true, HeaderRetryCount: true,
	HeaderWorkflow: true, HeaderWorkflowTask: true, HeaderDependencies: true,
	http.CanonicalHeaderKey(webhook.HeaderID):        true,
	http.CanonicalHeaderKey(webhook.HeaderTimestamp): true,
	http.CanonicalHeaderKey(webhook.HeaderSignature): true,
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Keep-Alive": true, "Te": true, "Trailer": true, "Upgrade": true, "Proxy-Connection": true,
	"Proxy-Authorization": true, "Expect": true,
}

// prepare checks req and returns its parsed URL, method and timeout.
func (d *Dispatcher) prepare(req *Request) (*url.URL, string, time.Duration, error) {
	if req.TaskID == "" {
		return nil, "", 0, fmt.Errorf("%w: no task ID", ErrInvalidRequest)
	}
	if req.Queue == "" {
		return nil, "", 0, fmt.Errorf("%w: task %s: no queue", ErrInvalidRequest, req.TaskID)
	}
	if req.RetryCount < 0 {
		return nil, "", 0, fmt.Errorf("%w: task %s: negative retry count %d", ErrInvalidRequest, req.TaskID, req.RetryCount)
	}
	u, err := url.Parse(req.URL)
	if err != nil {
		return nil, "", 0, fmt.Errorf("%w: task %s: URL: %v", ErrInvalidRequest, req.TaskID, err)
	}
	if err := checkURLSyntax(u); err != nil {
		return nil, "", 0, fmt.Errorf("task %s: %w", req.TaskID, err)
	}
	method := strings.ToUpper(req.Method)
	if method == "" {
		method = http.MethodPost
	}
	if !allowedMethods[method] {
		return nil, "", 0, fmt.Errorf("%w: task %s: method %q not allowed", ErrInvalidRequest, req.TaskID, req.Method)
	}
	for k, vs := range req.Header {
		if !validHeaderName(k) {
			return nil, "", 0, fmt.Errorf("%w: task %s: bad header name %q", ErrInvalidRequest, req.TaskID, k)
		}
		if reservedHeaders[http.CanonicalHeaderKey(k)] {
			return nil, "", 0, fmt.Errorf("%w: task %s: header %s is set by htq or HTTP and may not be given", ErrInvalidRequest, req.TaskID, k)
		}
		for _, v := range vs {
			if !validHeaderValue(v) {
				return nil, "", 0, fmt.Errorf("%w: task %s: header %s has a control character in its value", ErrInvalidRequest, req.TaskID, k)
			}
		}
	}
	timeout := req.Timeout
	switch {
	case timeout == 0:
		timeout = d.cfg.Timeout
	case timeout < 0:
		return nil, "", 0, fmt.Errorf("%w: task %s: negative timeout %s", ErrInvalidRequest, req.TaskID, timeout)
	case timeout > d.cfg.MaxTimeout:
		return nil, "", 0, fmt.Errorf("%w: task %s: timeout %s is above the maximum %s", ErrInvalidRequest, req.TaskID, timeout, d.cfg.MaxTimeout)
	}
	return u, method, timeout, nil
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s has no control character but tab.
func validHeaderValue(s string) bool {
	for _, c := range []byte(s) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// errTaskTimeout is the cause of the context of a dispatch whose own
// timeout passed.
var errTaskTimeout = errors.New("task timeout")

type redirectKey struct{}

// redirectState records, for one Dispatch, why a redirect was not followed.
type redirectState struct{ reason string }

// Dispatch sends req's request and reads the answer.
//
// It returns the Result whenever an answer arrived, and an error when the
// attempt did not succeed: a *StatusError for a non-2xx answer (with the
// Result), or an error matching ErrTimeout, ErrNetwork, ErrTargetNotAllowed,
// ErrInvalidRequest or context.Canceled (the Result is nil, or holds what
// was read when the body failed midway). Pass the error to Policy.Classify.
//
// The request carries req's headers, Htq-Task-Id, Htq-Queue,
// Htq-Retry-Count, a workflow task's Htq-Workflow, Htq-Workflow-Task and
// Htq-Dependencies, a User-Agent, and the webhook-id (the task ID),
// webhook-timestamp and webhook-signature headers. The whole exchange is
// bounded by req.Timeout (or Config.Timeout) and by ctx.
//
// The exchange is traced as an HTTP client span (see Config.TracerProvider)
// whose trace context the request carries as traceparent.
func (d *Dispatcher) Dispatch(ctx context.Context, req Request) (res *Result, err error) {
	u, method, timeout, err := d.prepare(&req)
	if err != nil {
		return nil, err
	}
	ctx, span := d.startSpan(ctx, method, u, req.TaskID)
	defer func() { endSpan(span, res, err) }()
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, errTaskTimeout)
	defer cancel()
	rs := &redirectState{}
	ctx = context.WithValue(ctx, redirectKey{}, rs)

	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(req.Body))
	if err != nil {
		return nil, fmt.Errorf("%w: task %s: %v", ErrInvalidRequest, req.TaskID, err)
	}
	h := make(http.Header, len(req.Header)+7)
	for k, vs := range req.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	h.Set(HeaderTaskID, req.TaskID)
	h.Set(HeaderQueue, req.Queue)
	h.Set(HeaderRetryCount, strconv.Itoa(req.RetryCount))
	if req.Workflow != "" {
		h.Set(HeaderWorkflow, req.Workflow)
		h.Set(HeaderWorkflowTask, req.WorkflowTask)
		h.Set(HeaderDependencies, req.Dependencies)
	}
	if h.Get("User-Agent") == "" {
		h.Set("User-Agent", d.cfg.UserAgent)
	}
	d.signer.Load().SignHeader(h, req.TaskID, d.cfg.Now(), req.Body)
	d.cfg.Propagator.Inject(ctx, propagation.HeaderCarrier(h))
	hreq.Header = h

	start := time.Now()
	resp, err := d.client.Do(hreq)
	if err != nil {
		return nil, d.transportError(ctx, req.TaskID, u, timeout, err)
	}
	body, truncated, readErr := readLimited(resp.Body, d.cfg.MaxResponseBytes, resp.ContentLength)
	// A body read to its end lets the connection be reused; closing one
	// that was not (truncated, or failed) discards the connection.
	resp.Body.Close()
	res = &Result{
		Status:    resp.StatusCode,
		Header:    resp.Header,
		Body:      body,
		Truncated: truncated,
		Duration:  time.Since(start),
	}
	if readErr != nil {
		return res, d.transportError(ctx, req.TaskID, u, timeout, fmt.Errorf("reading the body of a %d answer: %w", resp.StatusCode, readErr))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return res, nil
	}
	se := &StatusError{Status: resp.StatusCode}
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		se.Location = resp.Header.Get("Location")
		se.Reason = rs.reason
		if se.Reason == "" {
			se.Reason = "no usable Location"
		}
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 && resp.StatusCode < 600:
		se.RetryAfter, se.HasRetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), d.cfg.Now(), d.cfg.MaxRetryAfter)
	}
	return res, fmt.Errorf("task %s: %s %s: %w", req.TaskID, method, logURL(u), se)
}

// transportError wraps an error of the HTTP exchange into ErrTimeout,
// ErrNetwork, ErrTargetNotAllowed or the context's cancellation.
func (d *Dispatcher) transportError(ctx context.Context, taskID string, u *url.URL, timeout time.Duration, err error) error {
	where := fmt.Sprintf("task %s: %s", taskID, logURL(u))
	// The *url.Error repeats the method and URL; keep what it wraps (a
	// *net.OpError for a dial, which wraps a refusal's *TargetError).
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, ErrTargetNotAllowed) {
		return fmt.Errorf("%s: %w", where, err)
	}
	if ctx.Err() != nil {
		cause := context.Cause(ctx)
		switch {
		case errors.Is(cause, errTaskTimeout):
			return fmt.Errorf("%s: %w after %s: %w", where, ErrTimeout, timeout, err)
		case errors.Is(cause, context.DeadlineExceeded):
			return fmt.Errorf("%s: %w (context deadline): %w", where, ErrTimeout, err)
		default:
			return fmt.Errorf("%s: canceled: %w", where, errors.Join(cause, err))
		}
	}
	return fmt.Errorf("%s: %w: %w", where, ErrNetwork, err)
}

// logURL is u as errors show it: without user information, query or
// fragment, which may hold credentials.
func logURL(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// checkRedirect follows a redirect only to the same host, within the
// limit; otherwise the 3xx answer becomes the attempt's result.
func (d *Dispatcher) checkRedirect(req *http.Request, via []*http.Request) error {
	rs, _ := req.Context().Value(redirectKey{}).(*redirectState)
	stop := func(reason string) error {
		if rs != nil {
			rs.reason = reason
		}
		return http.ErrUseLastResponse
	}
	if len(via) > d.cfg.MaxRedirects {
		if d.cfg.MaxRedirects == 0 {
			return stop("redirects are not followed")
		}
		return stop(fmt.Sprintf("more than %d redirects", d.cfg.MaxRedirects))
	}
	if err := checkURLSyntax(req.URL); err != nil {
		return stop(strings.TrimPrefix(err.Error(), ErrInvalidRequest.Error()+": "))
	}
	if !sameHost(via[0].URL, req.URL) {
		return stop("to another host " + req.URL.Host)
	}
	return nil
}

// sameHost reports whether a redirect from a to b stays on the same host:
// the same host name and port, or the same host name going from http on
// its default port to https on its default port. https to http is refused.
func sameHost(a, b *url.URL) bool {
	if normalizeHost(a.Hostname()) != normalizeHost(b.Hostname()) {
		return false
	}
	pa, pb := portOf(a), portOf(b)
	switch {
	case a.Scheme == b.Scheme:
		return pa == pb
	case a.Scheme == "http" && b.Scheme == "https":
		return pa == "80" && pb == "443"
	}
	return false
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// readLimited reads up to limit bytes of r and reports whether there was
// more. It reads one byte past the limit to find out, never more.
func readLimited(r io.Reader, limit, contentLength int64) ([]byte, bool, error) {
	size := int64(512)
	if contentLength >= 0 {
		size = contentLength + 1 // room to see EOF without growing
	}
	buf := make([]byte, 0, min(size, limit+1))
	r = io.LimitReader(r, limit+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf[:limit], true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}
