package dispatch

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestGuardAddresses(t *testing.T) {
	g, err := NewGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{
		"8.8.8.8", "1.1.1.1", "93.184.216.34", "11.0.0.1", "100.63.255.255", "100.128.0.1",
		"126.255.255.255", "128.0.0.1", "169.253.255.255", "169.255.0.1", "172.15.255.255", "172.32.0.1",
		"192.0.1.1", "192.0.3.1", "192.167.255.255", "192.169.0.1", "198.17.255.255", "198.20.0.1",
		"223.255.255.255",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "2a00:1450:4001::1",
		"::ffff:8.8.8.8",            // IPv4-mapped public
		"64:ff9b::808:808",          // NAT64 of 8.8.8.8
		"2002:808:808::1",           // 6to4 of 8.8.8.8
		"2001:0:808:808::fefe:fefe", // Teredo: server 8.8.8.8, client 1.1.1.1
	}
	for _, s := range allowed {
		if err := g.CheckAddr("", netip.MustParseAddr(s)); err != nil {
			t.Errorf("%s refused: %v", s, err)
		}
	}
	refused := map[string]string{
		"0.0.0.0":                   "unspecified",
		"0.1.2.3":                   "unspecified",
		"10.0.0.1":                  "private",
		"10.255.255.255":            "private",
		"100.64.0.1":                "CGNAT",
		"100.127.255.254":           "CGNAT",
		"127.0.0.1":                 "loopback",
		"127.255.255.254":           "loopback",
		"169.254.169.254":           "metadata",
		"169.254.1.1":               "link-local",
		"172.16.0.1":                "private",
		"172.31.255.255":            "private",
		"192.0.0.8":                 "IETF",
		"192.0.2.1":                 "documentation",
		"192.88.99.1":               "6to4 relay",
		"192.168.0.1":               "private",
		"198.18.0.1":                "benchmarking",
		"198.19.255.255":            "benchmarking",
		"198.51.100.7":              "documentation",
		"203.0.113.9":               "documentation",
		"224.0.0.1":                 "multicast",
		"239.255.255.250":           "multicast",
		"240.0.0.1":                 "reserved",
		"255.255.255.255":           "broadcast",
		"::":                        "unspecified",
		"::1":                       "loopback",
		"::127.0.0.1":               "IPv4-compatible",
		"::ffff:127.0.0.1":          "loopback",
		"::ffff:7f00:1":             "loopback",
		"::ffff:10.0.0.1":           "private",
		"::ffff:169.254.169.254":    "metadata",
		"::ffff:0:7f00:1":           "not IPv6 global unicast", // SIIT ::ffff:0:0:0/96
		"64:ff9b::7f00:1":           "NAT64 address embedding 127.0.0.1 (loopback)",
		"64:ff9b::a9fe:a9fe":        "NAT64 address embedding 169.254.169.254",
		"64:ff9b::a00:1":            "NAT64 address embedding 10.0.0.1",
		"64:ff9b:1::1":              "local-use NAT64",
		"100::1":                    "discard",
		"2001:db8::1":               "documentation",
		"3fff::1":                   "documentation",
		"2001:2::1":                 "benchmarking",
		"2001:10::1":                "ORCHID",
		"2001:20::1":                "ORCHIDv2",
		"fc00::1":                   "unique local",
		"fd00::2":                   "unique local",
		"fd00:ec2::254":             "unique local",
		"fe80::1":                   "link-local",
		"fe80::1%eth0":              "link-local",
		"fec0::1":                   "site-local",
		"ff02::1":                   "multicast",
		"2002:7f00:1::1":            "6to4 address embedding 127.0.0.1",
		"2002:a9fe:a9fe::1":         "6to4 address embedding 169.254.169.254",
		"2001:0:808:808::80ff:fffe": "Teredo client address embedding 127.0.0.1",
		"2001:0:a00:1::fefe:fefe":   "Teredo server address embedding 10.0.0.1",
		"4000::1":                   "not IPv6 global unicast",
		"5f00::1":                   "not IPv6 global unicast",
	}
	for s, reason := range refused {
		err := g.CheckAddr("", netip.MustParseAddr(s))
		var te *TargetError
		if !errors.As(err, &te) || !errors.Is(err, ErrTargetNotAllowed) {
			t.Errorf("%s allowed (err %v)", s, err)
			continue
		}
		if !strings.Contains(te.Reason, reason) {
			t.Errorf("%s refused as %q, want %q", s, te.Reason, reason)
		}
	}
}

func TestGuardAllowlist(t *testing.T) {
	g, err := NewGuard([]string{" 127.0.0.0/8", "::1", "LocalHost", "*.svc.internal", "10.1.0.0/16", "::ffff:192.168.0.0/112", "172.16.5.4"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host, ip string
		ok       bool
	}{
		{"", "127.0.0.1", true},
		{"", "::ffff:127.0.0.1", true},
		{"", "64:ff9b::7f00:1", true}, // its IPv4 is allowed
		{"", "::1", true},
		{"", "10.1.2.3", true},
		{"", "10.2.0.1", false},
		{"", "192.168.5.5", true},
		{"", "172.16.5.4", true},
		{"", "172.16.5.5", false},
		{"", "169.254.169.254", false},
		{"", "8.8.8.8", true},
		{"localhost", "10.9.9.9", true},
		{"LOCALHOST.", "169.254.169.254", true},
		{"a.svc.internal", "10.9.9.9", true},
		{"a.b.svc.internal", "10.9.9.9", true},
		{"svc.internal", "10.9.9.9", false},
		{"evil-svc.internal", "10.9.9.9", false},
		{"localhost.evil.com", "10.9.9.9", false},
	}
	for _, tt := range tests {
		err := g.CheckAddr(tt.host, netip.MustParseAddr(tt.ip))
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddr(%q, %s) = %v, want allowed=%v", tt.host, tt.ip, err, tt.ok)
		}
	}
}

func TestGuardCheckURL(t *testing.T) {
	g, _ := NewGuard([]string{"internal.example"})
	tests := map[string]error{
		"http://example.com/":                nil,
		"HTTPS://Example.COM:8443/x?y=1":     nil,
		"http://internal.example/":           nil,
		"http://8.8.8.8/":                    nil,
		"http://[2606:4700:4700::1111]/":     nil,
		"http://localhost/":                  nil, // a name: judged at dial time
		"http://127.0.0.1/":                  ErrTargetNotAllowed,
		"http://[::1]:6379/":                 ErrTargetNotAllowed,
		"http://[::ffff:127.0.0.1]/":         ErrTargetNotAllowed,
		"http://[fe80::1%25eth0]/":           ErrTargetNotAllowed,
		"http://169.254.169.254/latest/":     ErrTargetNotAllowed,
		"http://0.0.0.0:5999/":               ErrTargetNotAllowed,
		"ftp://example.com/":                 ErrInvalidRequest,
		"file:///etc/passwd":                 ErrInvalidRequest,
		"javascript:alert(1)":                ErrInvalidRequest,
		"http://user:pw@example.com/":        ErrInvalidRequest,
		"http://user@example.com/":           ErrInvalidRequest,
		"http:///nohost":                     ErrInvalidRequest,
		"http://example.com:0/":              ErrInvalidRequest,
		"http://example.com:65536/":          ErrInvalidRequest,
		"/relative":                          ErrInvalidRequest,
		"http://example.com@169.254.169.254": ErrInvalidRequest,
	}
	for raw, want := range tests {
		err := g.CheckURL(mustURL(t, raw))
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Errorf("CheckURL(%s) = %v, want %v", raw, err, want)
		}
	}
}

// TestGuardRefusesAtDial sends tasks to refused addresses, some with a
// canary server listening, some with nothing there. Every one must fail
// with ErrTargetNotAllowed raised by the dialer (a *net.OpError "dial"
// around the *TargetError, so the check ran on the address being connected
// to), quickly (nothing waits on a connection), and no canary may see a
// connection.
func TestGuardRefusesAtDial(t *testing.T) {
	canary4 := newTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	port4 := canary4.Listener.Addr().(*net.TCPAddr).Port
	var conns6 atomic.Int64
	port6 := 0
	if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
		srv := &http.Server{
			Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
			ConnState: func(_ net.Conn, s http.ConnState) { conns6.Add(1) },
		}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		port6 = ln.Addr().(*net.TCPAddr).Port
	}

	p4 := ":" + strconv.Itoa(port4)
	targets := []string{
		"http://127.0.0.1" + p4 + "/",
		"http://localhost" + p4 + "/", // a name resolving to loopback: the DNS-rebinding shape
		"http://[::ffff:127.0.0.1]" + p4 + "/",
		"http://[::ffff:7f00:1]" + p4 + "/",
		"http://[64:ff9b::7f00:1]" + p4 + "/",
		"http://0.0.0.0" + p4 + "/",
		"http://127.0.0.2" + p4 + "/",
		"http://10.1.2.3:81/",
		"http://169.254.169.254/latest/meta-data/",
		"http://192.168.1.1/",
		"http://172.16.0.1/",
		"http://100.64.0.1/",
		"https://127.0.0.1" + p4 + "/",
		"http://[fd00::1]/",
		"http://[fe80::1%25lo]/",
	}
	if port6 != 0 {
		targets = append(targets, "http://[::1]:"+strconv.Itoa(port6)+"/", "http://[::]:"+strconv.Itoa(port6)+"/")
	}
	d := newDispatcher(t, Config{Timeout: 5 * time.Second})
	for _, u := range targets {
		t.Run(u, func(t *testing.T) {
			var err error
			within(t, time.Second, func() { _, err = d.Dispatch(bg, task(u)) })
			var te *TargetError
			if !errors.Is(err, ErrTargetNotAllowed) || !errors.As(err, &te) {
				t.Fatalf("err = %v, want ErrTargetNotAllowed", err)
			}
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "dial" {
				t.Errorf("err = %v, want it raised while dialing", err)
			}
			if _, perr := netip.ParseAddrPort(te.Addr); perr != nil {
				t.Errorf("TargetError.Addr = %q, want the ip:port dialed", te.Addr)
			}
			if !strings.Contains(err.Error(), te.Addr) {
				t.Errorf("the message does not name the address: %v", err)
			}
			if o := (Policy{}).Classify(err); o != Archive {
				t.Errorf("Classify = %v, want archive", o)
			}
		})
	}

	// Other spellings of loopback: the resolver may refuse them or turn
	// them into 127.0.0.1; either way no connection may be made.
	for _, u := range []string{
		"http://127.1" + p4 + "/", "http://2130706433" + p4 + "/", "http://0x7f000001" + p4 + "/",
		"http://017700000001" + p4 + "/", "http://127.0.0.1.nip.io" + p4 + "/", "http://LOCALHOST." + p4 + "/",
	} {
		_, err := d.Dispatch(bg, task(u))
		if err == nil {
			t.Errorf("%s: no error", u)
		}
	}

	if n := canary4.conns.Load(); n != 0 {
		t.Errorf("the IPv4 canary accepted %d connections", n)
	}
	if n := conns6.Load(); n != 0 {
		t.Errorf("the IPv6 canary accepted %d connections", n)
	}

	// The canary counts: once allowed, it is reached.
	da := newDispatcher(t, Config{Allow: []string{"localhost"}})
	if _, err := da.Dispatch(bg, task("http://localhost"+p4+"/")); err != nil {
		t.Fatalf("allowlisted localhost: %v", err)
	}
	if canary4.conns.Load() == 0 {
		t.Error("the canary does not count connections")
	}
}
