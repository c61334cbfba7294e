package redistest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// A Proxy forwards TCP connections from its own loopback address to a
// Redis, and can fail them the ways a network does: cut every connection
// and refuse new ones (Cut, until Restore), or let a command reach Redis
// and lose its answer (DropNextReply).
type Proxy struct {
	// Addr is the proxy's host:port; clients connect here.
	Addr string

	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool // both sides of every open connection
	cut   bool
	drop  chan struct{} // armed by DropNextReply; closed when it dropped one
}

// StartProxy starts a proxy to the Redis at target; it is closed at the
// end of the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Cut closes every connection through the proxy and closes each new one
// at once, until Restore: Redis receives nothing of what is sent
// meanwhile.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Restore ends a Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// DropNextReply makes the proxy discard the next bytes Redis sends back
// on any connection and close that connection: the command they answer
// was received and run by Redis, and its client never hears of it. The
// channel is closed once it happened.
func (p *Proxy) DropNextReply() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = make(chan struct{})
	return p.drop
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[s] = true, true
		p.mu.Unlock()
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(s, c)
			p.closePair(c, s)
		}()
		go func() {
			defer p.wg.Done()
			p.replies(c, s)
			p.closePair(c, s)
		}()
	}
}

// replies copies what Redis sends on s to the client on c, but for the
// reply DropNextReply asked to drop.
func (p *Proxy) replies(c, s net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := s.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := p.drop
			p.drop = nil
			p.mu.Unlock()
			if drop != nil {
				close(drop)
				return
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) closePair(c, s net.Conn) {
	c.Close()
	s.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, s)
	p.mu.Unlock()
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
