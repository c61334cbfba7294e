package dispatch

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
)

// A Guard decides which network addresses a URL task may reach. It refuses
// every address that is not public unicast — loopback, private, link-local
// (the cloud metadata service 169.254.169.254 among them), unspecified,
// multicast, broadcast, shared (CGNAT), benchmarking, documentation and
// reserved ranges — unless its allowlist permits it.
//
// The check that matters runs at dial time, on the address the dialer is
// about to connect to after name resolution (see DialContext): a host name
// that resolves to a private address, a DNS answer that changes between a
// check and the connection (rebinding), and a redirect are all caught there.
// CheckURL is the cheaper check to run when a task is created.
//
// IPv6 addresses that carry an IPv4 address are judged by that IPv4
// address: IPv4-mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::/96), 6to4
// (2002::/16) and Teredo (2001::/32, both the server and the client
// address). Other IPv6 addresses must be global unicast (2000::/3) outside
// the documentation and special-purpose blocks.
//
// A Guard is safe for concurrent use.
type Guard struct {
	prefixes []netip.Prefix
	hosts    map[string]bool
	suffixes []string // from "*.example.com": ".example.com"
}

// NewGuard returns a Guard whose allowlist holds the given entries. Each is
// a CIDR ("127.0.0.0/8", "fd00::/8"), an IP address ("10.1.2.3"), a host
// name ("localhost", matched exactly, without regard to case) or a wildcard
// ("*.svc.internal", any name ending in ".svc.internal"). An allowed host
// name may connect to whatever address it resolves to. An IPv4-mapped IPv6
// CIDR is taken as the IPv4 CIDR it maps.
func NewGuard(allow []string) (*Guard, error) {
	g := &Guard{hosts: make(map[string]bool)}
	for _, raw := range allow {
		e := strings.TrimSpace(raw)
		if e == "" {
			return nil, fmt.Errorf("%w: empty allowlist entry", ErrInvalidConfig)
		}
		if strings.Contains(e, "/") {
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return nil, fmt.Errorf("%w: allowlist entry %q: %v", ErrInvalidConfig, raw, err)
			}
			g.prefixes = append(g.prefixes, unmapPrefix(p.Masked()))
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			if a.Zone() != "" {
				return nil, fmt.Errorf("%w: allowlist entry %q: zones are not supported", ErrInvalidConfig, raw)
			}
			a = a.Unmap()
			g.prefixes = append(g.prefixes, netip.PrefixFrom(a, a.BitLen()))
			continue
		}
		name := normalizeHost(e)
		wild := strings.HasPrefix(name, "*.")
		if wild {
			name = name[2:]
		}
		if !validHostName(name) {
			return nil, fmt.Errorf("%w: allowlist entry %q is neither a CIDR, an IP address nor a host name", ErrInvalidConfig, raw)
		}
		if wild {
			g.suffixes = append(g.suffixes, "."+name)
		} else {
			g.hosts[name] = true
		}
	}
	return g, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// normalizeHost lowercases a host name and drops a trailing dot.
func normalizeHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// hostAllowed reports whether the allowlist names host.
func (g *Guard) hostAllowed(host string) bool {
	if host == "" || (len(g.hosts) == 0 && len(g.suffixes) == 0) {
		return false
	}
	h := normalizeHost(host)
	if g.hosts[h] {
		return true
	}
	for _, s := range g.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

func (g *Guard) addrAllowed(a netip.Addr) bool {
	for _, p := range g.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckAddr reports whether a connection to ip, reached through the name
// host ("" when the URL held an IP address), is allowed. It returns nil or
// a *TargetError matching ErrTargetNotAllowed.
func (g *Guard) CheckAddr(host string, ip netip.Addr) error {
	if g.hostAllowed(host) {
		return nil
	}
	if reason := g.refusal(ip); reason != "" {
		return &TargetError{Host: host, Addr: ip.String(), Reason: reason}
	}
	return nil
}

// refusal returns why ip may not be reached, or "" if it may.
func (g *Guard) refusal(ip netip.Addr) string {
	if !ip.IsValid() {
		return "not an IP address"
	}
	ip = ip.WithZone("").Unmap()
	if g.addrAllowed(ip) {
		return ""
	}
	if ip.Is4() {
		for _, r := range blocked4 {
			if r.p.Contains(ip) {
				return r.name
			}
		}
		return ""
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return g.embedded("NAT64", netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		return g.embedded("6to4", netip.AddrFrom4([4]byte(b[2:6])))
	case teredo.Contains(ip):
		if r := g.embedded("Teredo server", netip.AddrFrom4([4]byte(b[4:8]))); r != "" {
			return r
		}
		return g.embedded("Teredo client", netip.AddrFrom4([4]byte{^b[12], ^b[13], ^b[14], ^b[15]}))
	}
	for _, r := range blocked6 {
		if r.p.Contains(ip) {
			return r.name
		}
	}
	if !globalUnicast6.Contains(ip) {
		return "reserved (not IPv6 global unicast)"
	}
	return ""
}

func (g *Guard) embedded(kind string, v4 netip.Addr) string {
	if r := g.refusal(v4); r != "" {
		return fmt.Sprintf("%s address embedding %s (%s)", kind, v4, r)
	}
	return ""
}

type namedPrefix struct {
	p    netip.Prefix
	name string
}

func mustPrefixes(pairs ...string) []namedPrefix {
	out := make([]namedPrefix, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, namedPrefix{netip.MustParsePrefix(pairs[i]), pairs[i+1]})
	}
	return out
}

// The first matching entry names the refusal, so narrower blocks come first.
var (
	blocked4 = mustPrefixes(
		"0.0.0.0/8", "unspecified (this network)",
		"10.0.0.0/8", "private (RFC 1918)",
		"100.64.0.0/10", "shared address space (CGNAT, RFC 6598)",
		"127.0.0.0/8", "loopback",
		"169.254.169.254/32", "link-local (cloud metadata service)",
		"169.254.0.0/16", "link-local",
		"172.16.0.0/12", "private (RFC 1918)",
		"192.0.0.0/24", "IETF protocol assignments",
		"192.0.2.0/24", "documentation (TEST-NET-1)",
		"192.88.99.0/24", "6to4 relay anycast",
		"192.168.0.0/16", "private (RFC 1918)",
		"198.18.0.0/15", "benchmarking",
		"198.51.100.0/24", "documentation (TEST-NET-2)",
		"203.0.113.0/24", "documentation (TEST-NET-3)",
		"224.0.0.0/4", "multicast",
		"255.255.255.255/32", "broadcast",
		"240.0.0.0/4", "reserved",
	)
	blocked6 = mustPrefixes(
		"::/128", "unspecified",
		"::1/128", "loopback",
		"::/96", "IPv4-compatible (deprecated)",
		"64:ff9b:1::/48", "local-use NAT64",
		"100::/64", "discard-only",
		"2001:2::/48", "benchmarking",
		"2001:10::/28", "ORCHID",
		"2001:20::/28", "ORCHIDv2",
		"2001:db8::/32", "documentation",
		"3fff::/20", "documentation",
		"fc00::/7", "unique local (RFC 4193)",
		"fe80::/10", "link-local",
		"fec0::/10", "site-local (deprecated)",
		"ff00::/8", "multicast",
	)
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// CheckURL checks a URL without resolving it: the scheme is http or https,
// there is a host and no user information, the port (if any) is a number
// from 1 to 65535, and a host given as an IP address is allowed. A host
// name is only checked at dial time, on the addresses it resolves to. It
// returns nil, an error matching ErrInvalidRequest, or a *TargetError.
func (g *Guard) CheckURL(u *url.URL) error {
	if err := checkURLSyntax(u); err != nil {
		return err
	}
	host := u.Hostname()
	if g.hostAllowed(host) {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return g.CheckAddr("", ip)
	}
	return nil
}

func checkURLSyntax(u *url.URL) error {
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%w: scheme %q: only http and https are allowed", ErrInvalidRequest, u.Scheme)
	case u.Opaque != "":
		return fmt.Errorf("%w: URL %q is not hierarchical", ErrInvalidRequest, u.Redacted())
	case u.User != nil:
		return fmt.Errorf("%w: URL %q carries user information; send credentials in a header", ErrInvalidRequest, u.Redacted())
	case u.Hostname() == "":
		return fmt.Errorf("%w: URL %q has no host", ErrInvalidRequest, u.Redacted())
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: URL %q: bad port %q", ErrInvalidRequest, u.Redacted(), p)
		}
	}
	return nil
}

// DialContext returns a dial function for an http.Transport that dials with
// d and lets the connection proceed only if the Guard allows the address
// actually being connected to. The check runs in the dialer's
// ControlContext, after the socket is made and before connect(2), once per
// address the dialer tries, so nothing reaches a refused address. A refused
// dial fails with an error wrapping a *TargetError.
func (g *Guard) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("dispatch: dial %q: %w", addr, err)
		}
		if _, err := netip.ParseAddr(host); err == nil {
			host = "" // an IP literal: no name to allow
		}
		dd := *d
		dd.Control = nil
		dd.ControlContext = func(_ context.Context, network, address string, _ syscall.RawConn) error {
			return g.checkDial(host, network, address)
		}
		return dd.DialContext(ctx, network, addr)
	}
}

func (g *Guard) checkDial(host, network, address string) error {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return &TargetError{Host: host, Addr: address, Reason: "network " + network + " is not TCP"}
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &TargetError{Host: host, Addr: address, Reason: "unparsable address"}
	}
	if err := g.CheckAddr(host, ap.Addr()); err != nil {
		te := err.(*TargetError)
		te.Addr = address
		return te
	}
	return nil
}
