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
// own. Accepted query parameters: dial_timeout (a Go duration),
// client_name, event_log (the size of each queue's event log, 0 to turn
// it off; see EventLogParam), and master / sentinel_password for
// redis-sentinel. Any other parameter, a bad port or db, or a missing
// host is an error wrapping base.ErrInvalidArgument.
func ParseURL(rawURL string) (rueidis.ClientOption, error) {
	var co rueidis.ClientOption
	bad := func(format string, a ...any) (rueidis.ClientOption, error) {
		return rueidis.ClientOption{}, fmt.Errorf("rdb: storage URL %q: %s: %w",
			redactURL(rawURL), fmt.Sprintf(format, a...), base.ErrInvalidArgument)
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
		return rueidis.ClientOption{}, fmt.Errorf("rdb: storage URL %q: scheme %q is not redis, rediss, redis-sentinel or redis-cluster: %w",
			redactURL(rawURL), scheme, base.ErrInvalidArgument)
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
		return bad("bad query: %v", err)
	}
	for k, v := range q {
		val := v[len(v)-1]
		switch {
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
			if _, err := eventLogSize(val); err != nil {
				return bad("%v", err)
			}
		case k == "master" && scheme == "redis-sentinel":
			co.Sentinel.MasterSet = val
		case k == "sentinel_password" && scheme == "redis-sentinel":
			co.Sentinel.Password = val
		default:
			return bad("unknown parameter %q", k)
		}
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
	return co, nil
}

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

// redactURL hides the password of a storage URL for error messages.
func redactURL(raw string) string {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw
	}
	i := strings.LastIndexByte(rest, '@')
	if i < 0 {
		return raw
	}
	slash := strings.IndexByte(rest, '/')
	if slash >= 0 && slash < i {
		return raw
	}
	user, _, hasPass := strings.Cut(rest[:i], ":")
	if !hasPass {
		return raw
	}
	return scheme + "://" + user + ":xxxxx@" + rest[i+1:]
}

// EventLogParam returns the Options.EventLogSize the event_log parameter
// of a storage URL asks for (0: the parameter is absent): the size of
// each queue's event log, -1 for event_log=0 (the log is off). ParseURL
// has checked it.
func EventLogParam(rawURL string) int {
	_, rawQuery, _ := strings.Cut(rawURL, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil || !q.Has("event_log") {
		return 0
	}
	n, err := eventLogSize(q.Get("event_log"))
	if err != nil {
		return 0
	}
	if n == 0 {
		return -1
	}
	return n
}

// eventLogSize parses the value of event_log: a count of entries, 0 for
// none.
func eventLogSize(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 1_000_000 {
		return 0, fmt.Errorf("event_log %q: want the number of entries each queue's event log keeps (0 turns it off; at most 1000000)", v)
	}
	return n, nil
}
