package rdb

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
)

// ParseURL turns a storage URL into rueidis client options. The forms:
//
//	redis://[[user]:password@]host[:port][/db]
//	rediss://[[user]:password@]host[:port][/db]          (TLS)
//	redis-sentinel://[[user]:password@]h1[:p1][,h2[:p2]…][/db]?master=NAME
//	redis-cluster://[[user]:password@]h1[:p1][,h2[:p2]…]
//
// The port defaults to 6379 (26379 for sentinels). The password of a
// sentinel URL is the master's; sentinel_password=… gives the sentinels'
// own. Accepted query parameters: timeout (Options.Timeout, a Go
// duration), dial_timeout (a Go duration), client_name, event_log (the
// size of each queue's event log, 0 to turn it off; see
// URLSettings.EventLogSize), master / sentinel_password for
// redis-sentinel, and on every scheme the
// WaitOptions: wait_replicas (a count), wait_timeout (a Go duration, at
// least 1ms) and wait_aof_local (true/false or 1/0). Any other parameter,
// a bad value, a bad port or db, or a missing host is an error naming it
// and wrapping base.ErrInvalidArgument. No error shows any part of a
// password: the error of a URL that cannot be read for sure
// (base.AmbiguousURL) names no part of it.
func ParseURL(rawURL string) (rueidis.ClientOption, URLSettings, error) {
	var co rueidis.ClientOption
	var set URLSettings
	bad := func(format string, a ...any) (rueidis.ClientOption, URLSettings, error) {
		detail := fmt.Sprintf(format, a...)
		if base.AmbiguousURL(rawURL) {
			// A '?' in a password or an '@' in a parameter: the detail
			// could quote part of a password.
			detail = "cannot be read for sure: an '@' follows the '?' (write a '?' of a password as %3F, an '@' of a parameter as %40)"
		}
		return rueidis.ClientOption{}, URLSettings{}, fmt.Errorf("rdb: storage URL %q: %s: %w",
			base.RedactURL(rawURL), detail, base.ErrInvalidArgument)
	}
	wait := set.Wait
	waitOpts := func() *WaitOptions {
		if wait == nil {
			wait = &WaitOptions{}
		}
		return wait
	}
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return bad("want scheme://host, e.g. redis://localhost:6379/0")
	}
	defaultPort := "6379"
	multiHost := false
	switch scheme {
	case "redis":
	case "rediss":
		co.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	case "redis-sentinel":
		defaultPort = "26379"
		multiHost = true
	case "redis-cluster":
		multiHost = true
	default:
		return rueidis.ClientOption{}, URLSettings{}, fmt.Errorf("rdb: storage URL %q: scheme %q is not redis, rediss, redis-sentinel or redis-cluster: %w",
			base.RedactURL(rawURL), scheme, base.ErrInvalidArgument)
	}
	rest, rawQuery, _ := strings.Cut(rest, "?")
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user, pass, hasPass := strings.Cut(rest[:i], ":")
		var err error
		if co.Username, err = url.PathUnescape(user); err != nil {
			return bad("bad user name escape")
		}
		if hasPass {
			if co.Password, err = url.PathUnescape(pass); err != nil {
				return bad("bad password escape")
			}
		}
		rest = rest[i+1:]
	}
	hostPart, path, hasPath := strings.Cut(rest, "/")
	if hostPart == "" {
		return bad("no host")
	}
	hosts := strings.Split(hostPart, ",")
	if len(hosts) > 1 && !multiHost {
		return bad("%s takes one host; use redis-sentinel:// or redis-cluster:// for several", scheme)
	}
	for _, h := range hosts {
		addr, err := hostPort(h, defaultPort)
		if err != nil {
			return bad("%v", err)
		}
		co.InitAddress = append(co.InitAddress, addr)
	}
	if hasPath && path != "" {
		if scheme == "redis-cluster" {
			return bad("Redis Cluster has only database 0; remove /%s", path)
		}
		db, err := strconv.Atoi(path)
		if err != nil || db < 0 {
			return bad("database %q is not a number >= 0", path)
		}
		co.SelectDB = db
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		// Not quoted: the bad escape may be part of sentinel_password.
		return bad("bad query: a malformed %%-escape or a ';' (percent-encode special characters)")
	}
	for k, v := range q {
		val := v[len(v)-1]
		switch {
		case k == "timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return bad("timeout %q is not a positive duration (write e.g. 5s)", val)
			}
			set.Timeout = d
		case k == "dial_timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 {
				return bad("dial_timeout %q is not a positive duration", val)
			}
			co.Dialer.Timeout = d
			co.Sentinel.Dialer.Timeout = d
		case k == "client_name":
			co.ClientName = val
		case k == "event_log":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > maxEventLogSize {
				return bad("event_log %q: want the number of entries each queue's event log keeps (0 turns it off; at most %d)", val, maxEventLogSize)
			}
			set.EventLogSize = n
			if n == 0 {
				set.EventLogSize = -1
			}
		case k == "master" && scheme == "redis-sentinel":
			co.Sentinel.MasterSet = val
		case k == "sentinel_password" && scheme == "redis-sentinel":
			co.Sentinel.Password = val
		case k == "wait_replicas":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return bad("wait_replicas %q is not a whole number >= 0", val)
			}
			waitOpts().Replicas = n
		case k == "wait_timeout":
			d, err := time.ParseDuration(val)
			if err != nil || d < time.Millisecond {
				return bad("wait_timeout %q is not a duration of at least 1ms (write e.g. 500ms)", val)
			}
			waitOpts().Timeout = d
		case k == "wait_aof_local":
			on, err := strconv.ParseBool(val)
			if err != nil {
				return bad("wait_aof_local %q is not true, false, 1 or 0", val)
			}
			waitOpts().AOFLocal = on
		default:
			return bad("unknown parameter %q", k)
		}
	}
	if wait != nil && wait.Timeout > 0 && !wait.Enabled() {
		return bad("wait_timeout does nothing without wait_replicas >= 1 or wait_aof_local=true")
	}
	switch scheme {
	case "redis", "rediss":
		co.ForceSingleClient = true
		if co.TLSConfig != nil {
			host, _, _ := net.SplitHostPort(co.InitAddress[0])
			co.TLSConfig.ServerName = host
		}
	case "redis-sentinel":
		if co.Sentinel.MasterSet == "" {
			return bad("redis-sentinel needs ?master=NAME")
		}
	}
	// htq uses no client-side caching: turning it off saves the CLIENT
	// TRACKING set-up and the cache's bookkeeping on every reply.
	co.DisableCache = true
	set.Wait = wait
	return co, set, nil
}

// URLSettings are the settings of a storage URL that are htq's own, not
// the connection's.
type URLSettings struct {
	// Wait is nil unless the URL has a wait_* parameter.
	Wait *WaitOptions
	// Timeout is the timeout parameter; 0 when the URL has none.
	Timeout time.Duration
	// EventLogSize is the event_log parameter as an Options.EventLogSize:
	// 0 when the URL has none, -1 for event_log=0 (the log is off).
	EventLogSize int
}

// maxEventLogSize bounds the event_log parameter.
const maxEventLogSize = 1_000_000

// hostPort checks h ("host", "host:port", "[v6]", "[v6]:port") and adds
// the default port.
func hostPort(h, defaultPort string) (string, error) {
	if h == "" {
		return "", fmt.Errorf("empty host")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port (or a malformed one): accept a bare host or [v6].
		host = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
			return "", fmt.Errorf("bad host %q", h)
		}
		port = defaultPort
	}
	if host == "" {
		return "", fmt.Errorf("empty host in %q", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("bad port %q", port)
	}
	return net.JoinHostPort(host, port), nil
}
