// Package apiclient is a Go client of htq serve's native API (/v1), the one
// the htq command line uses for every command that talks to a service.
//
// An error answer comes back as an *Error that wraps the sentinel error the
// service answered for (htq.ErrQueueNotFound, htq.ErrTaskNotFound,
// htq.ErrInvalidArgument, …; see codes), so errors.Is works across the
// network as it does in-process. A service that cannot be reached is an
// error wrapping ErrUnreachable.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultServer is the service's address when none is given.
const DefaultServer = "http://127.0.0.1:5999"

// DefaultTimeout bounds one call when Options.Timeout is 0.
const DefaultTimeout = 30 * time.Second

// maxAnswer bounds the body of an answer the client reads.
const maxAnswer = 64 << 20

// Options configures a Client. Zero fields take their defaults.
type Options struct {
	// Token is sent as "Authorization: Bearer <token>"; empty sends none.
	Token string
	// Timeout bounds one call (default DefaultTimeout).
	Timeout time.Duration
	// Transport makes the requests (default a transport of the client's
	// own).
	Transport http.RoundTripper
	// UserAgent is sent as the User-Agent header (default "htq-apiclient").
	UserAgent string
}

// Client calls one htq serve. It is safe for concurrent use.
type Client struct {
	base  *url.URL
	token string
	agent string
	hc    *http.Client
}

// New returns a client of the service at server: a base URL
// ("http://127.0.0.1:5999", "https://htq.example.com/") or a bare
// host:port, taken as http. A malformed address is an error wrapping
// htq.ErrInvalidArgument.
func New(server string, opts Options) (*Client, error) {
	u, err := parseServer(server)
	if err != nil {
		return nil, err
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Transport == nil {
		opts.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "htq-apiclient"
	}
	return &Client{base: u, token: opts.Token, agent: opts.UserAgent,
		hc: &http.Client{Transport: opts.Transport, Timeout: opts.Timeout}}, nil
}

// parseServer reads a service address as New does.
func parseServer(server string) (*url.URL, error) {
	s := strings.TrimSpace(server)
	if s == "" {
		return nil, invalidf("server address is empty; want e.g. %s", DefaultServer)
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, invalidf("server address %q: %v", server, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, invalidf("server address %q: want an http:// or https:// URL", server)
	}
	if u.Host == "" {
		return nil, invalidf("server address %q has no host", server)
	}
	if strings.Count(u.Host, ":") > 1 && !strings.HasPrefix(u.Host, "[") {
		// Go before 1.26 (or GODEBUG=urlstrictcolons=0) parses this.
		return nil, invalidf("server address %q: write an IPv6 address in brackets, e.g. http://[::1]:5999", server)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, invalidf("server address %q: want scheme://host:port[/path] only", server)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// Server returns the service's base URL.
func (c *Client) Server() string { return c.base.String() }

// Close releases the client's idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// path joins escaped path segments under /v1.
func path(segments ...string) string {
	var b strings.Builder
	b.WriteString("/v1")
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// do sends one call: body (when not nil) as JSON, the answer (when 2xx and
// out is not nil) decoded into out; an error answer becomes an *Error.
func (c *Client) do(ctx context.Context, method, p string, query url.Values, body, out any) error {
	u := *c.base
	u.Path += p
	u.RawQuery = query.Encode()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("apiclient: encode %s %s: %w", method, p, err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return fmt.Errorf("apiclient: %s %s: %w", method, p, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.agent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w", method, p, ctx.Err())
		}
		return &unreachableError{server: c.Server(), err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return &unreachableError{server: c.Server(), err: fmt.Errorf("read the answer to %s %s: %w", method, p, err)}
	}
	if resp.StatusCode >= 300 {
		return errorFrom(resp.StatusCode, data)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: the answer to %s %s is not the JSON expected: %v", ErrServer, method, p, err)
	}
	return nil
}

// ErrUnreachable means no answer came from the service: it does not run at
// that address, the network is down, or the call timed out.
var ErrUnreachable = errors.New("htq serve unreachable")

type unreachableError struct {
	server string
	err    error
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("cannot reach htq serve at %s: %v", e.server, innermost(e.err))
}

func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// innermost returns the most specific cause of a transport error
// ("connection refused" rather than the whole Post "…": dial tcp chain).
func innermost(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
