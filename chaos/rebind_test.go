package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/dispatch"
)

// TestRebindingResolver is suite 9's resolver case: the dial path of
// htq's URL dispatcher — the target guard's dial function over a
// net.Dialer — with a resolver (a DNS server on loopback) that answers a
// name first with an allowed address and then with a canary's, and
// another name with both at once, in either order. The allowed address
// stands for a public one (the guard allows 127.0.0.2 only; a test may not
// reach a real public address). The guard checks each address as it is
// dialled: the first request reaches the allowed target, every later one
// is refused, and no canary sees a connection.
//
// htq serve uses the system resolver and offers no way to name another,
// so this case drives the guard's dial function directly; the service
// builds its transport on the same function (dispatch.New).
func TestRebindingResolver(t *testing.T) {
	skipShort(t)
	canaries := startCanaries(t)
	port := strconv.Itoa(canaries.port)
	// The allowed target, on the canaries' port at 127.0.0.2.
	var hits int
	var mu sync.Mutex
	l, err := net.Listen("tcp", hostileAddr+":"+port)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		io.WriteString(w, "allowed")
	})}
	go srv.Serve(l)
	defer srv.Close()

	allowed, canary := net.IPv4(127, 0, 0, 2), net.IPv4(127, 0, 0, 1)
	dns := startDNS(t, func(name string, n int) []net.IP {
		switch name {
		case "rebind.test.":
			if n == 1 {
				return []net.IP{allowed}
			}
			return []net.IP{canary}
		case "canary-first.test.":
			return []net.IP{canary, allowed}
		case "allowed-first.test.":
			return []net.IP{net.IPv4(127, 0, 0, 4), canary} // nothing listens on 127.0.0.4
		}
		return nil
	})
	g, err := dispatch.NewGuard([]string{hostileAddr + "/32"})
	if err != nil {
		t.Fatal(err)
	}
	g4, err := dispatch.NewGuard([]string{hostileAddr + "/32", "127.0.0.4/32"})
	if err != nil {
		t.Fatal(err)
	}
	resolver := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", dns)
	}}
	get := func(guard *dispatch.Guard, host string) (string, error) {
		tr := &http.Transport{Proxy: nil, DisableKeepAlives: true,
			DialContext: guard.DialContext(&net.Dialer{Timeout: time.Second, Resolver: resolver})}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+host+":"+port+"/", nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}

	if body, err := get(g, "rebind.test"); err != nil || body != "allowed" {
		t.Fatalf("first request to rebind.test (resolves to the allowed address): %q, %v", body, err)
	}
	for i := range 3 {
		if _, err := get(g, "rebind.test"); !errors.Is(err, dispatch.ErrTargetNotAllowed) {
			t.Errorf("request %d to rebind.test after it rebound to loopback: %v; want ErrTargetNotAllowed", i+2, err)
		}
	}
	// Both addresses in one answer: the canary is refused, the allowed
	// one reached.
	if body, err := get(g, "canary-first.test"); err != nil || body != "allowed" {
		t.Errorf("canary-first.test: %q, %v; want the allowed target", body, err)
	}
	// The allowed address refuses the connection; the dialer falls back
	// to the canary, which the guard refuses (the dialer reports the
	// first address's error).
	if _, err := get(g4, "allowed-first.test"); err == nil {
		t.Error("allowed-first.test: a request succeeded; want the allowed address refused and the fallback to the canary too")
	}
	if n := canaries.conns.Load(); n != 0 {
		t.Errorf("the canaries accepted %d connections", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 2 {
		t.Errorf("the allowed target got %d requests, want 2", hits)
	}
	figure(t, "rebinding resolver: 1 request reached the allowed address, 3 after the rebind refused; mixed answers: canary refused, allowed reached; fallback to the canary refused; canary connections %d", canaries.conns.Load())
}

// startDNS serves DNS over UDP on loopback: an A question for name gets
// answer(name, n) (n counting that name's A questions from 1), any other
// question an empty answer. It returns the server's address.
func startDNS(t *testing.T, answer func(name string, n int) []net.IP) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	asked := map[string]int{}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if reply := dnsReply(buf[:n], asked, answer); reply != nil {
				_, _ = pc.WriteTo(reply, from)
			}
		}
	}()
	return pc.LocalAddr().String()
}

// dnsReply answers one DNS query (RFC 1035 §4): the header with QR, RD
// and RA set, the question copied, and an A record (TTL 0) per address.
func dnsReply(q []byte, asked map[string]int, answer func(string, int) []net.IP) []byte {
	if len(q) < 12 || binary.BigEndian.Uint16(q[4:6]) != 1 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		l := int(q[i])
		if i+1+l > len(q) {
			return nil
		}
		labels = append(labels, strings.ToLower(string(q[i+1:i+1+l])))
		i += 1 + l
	}
	if i+5 > len(q) {
		return nil
	}
	qend := i + 5 // the zero label, QTYPE, QCLASS
	name := strings.Join(labels, ".") + "."
	var ips []net.IP
	if binary.BigEndian.Uint16(q[i+1:i+3]) == 1 { // A
		asked[name]++
		ips = answer(name, asked[name])
	}
	r := make([]byte, 12, 512)
	copy(r, q[:2])
	binary.BigEndian.PutUint16(r[2:], 0x8180) // a response, recursion desired and available, no error
	binary.BigEndian.PutUint16(r[4:], 1)
	binary.BigEndian.PutUint16(r[6:], uint16(len(ips)))
	r = append(r, q[12:qend]...)
	for _, ip := range ips {
		r = append(r, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4) // the name at offset 12, A, IN, TTL 0, 4 bytes
		r = append(r, ip.To4()...)
	}
	return r
}
