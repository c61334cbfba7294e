// Package redistest gives tests a real redis-server. It uses the server at
// HTQ_TEST_REDIS (host:port) when that is set; otherwise it starts
// redis-server from PATH on a free loopback port with persistence off and
// stops it when the test binary's tests are done. A missing redis-server is
// a test failure with a clear message, never a skip.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// EnvAddr names the environment variable that points tests at a running
// Redis instead of starting one.
const EnvAddr = "HTQ_TEST_REDIS"

// Server is a redis-server used by tests.
type Server struct {
	// Addr is host:port.
	Addr string
	cmd  *exec.Cmd
	dir  string
	args []string
}

var (
	mu     sync.Mutex
	shared *Server
	dbNext = 0
)

// Start starts a new redis-server on a free loopback port and registers its
// stop with t.Cleanup. extraArgs are passed to redis-server (e.g.
// "--appendonly", "yes").
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	s, err := StartProcess(extraArgs...)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartProcess starts a redis-server on a free loopback port. The caller
// stops it with Stop.
func StartProcess(extraArgs ...string) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (install it: `apt-get install redis-server`, or run `make test`, or set %s=host:port): %w", EnvAddr, err)
	}
	dir, err := os.MkdirTemp("", "htq-redistest-")
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		args := append([]string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir,
			"--daemonize", "no", "--loglevel", "warning",
		}, extraArgs...)
		cmd := exec.Command(bin, args...)
		cmd.Stdout = nil
		cmd.Stderr = nil
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := waitReady(addr, 5*time.Second); err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			lastErr = err
			continue
		}
		return &Server{Addr: addr, cmd: cmd, dir: dir, args: args}, nil
	}
	return nil, fmt.Errorf("redis-server did not start: %w", lastErr)
}

// Stop stops a server started by Start; it does nothing for HTQ_TEST_REDIS.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = os.RemoveAll(s.dir)
	s.cmd = nil
}

// Crash kills the server with SIGKILL and keeps its data directory, so
// that Restart brings it back with what it had persisted.
func (s *Server) Crash() error {
	if s.cmd == nil {
		return fmt.Errorf("redistest: %s is not a server this test started", s.Addr)
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	return nil
}

// Restart starts a crashed server again on the same port and directory
// with the same arguments, and waits until it answers.
func (s *Server) Restart() error {
	if err := s.respawn(); err != nil {
		return err
	}
	return waitReady(s.Addr, 10*time.Second)
}

// RestartLoading starts a crashed server again as Restart does, but
// returns as soon as it answers PING at all, LOADING included: while it
// reads its data back, commands get "-LOADING". A server started with
// "--key-load-delay", "100" (µs per key, a Redis debug setting) and
// "--loading-process-events-interval-bytes", "1024" (so that it answers
// while it loads) loads N keys in about N×100 µs.
func (s *Server) RestartLoading() error {
	if err := s.respawn(); err != nil {
		return err
	}
	return waitAnswer(s.Addr, 10*time.Second, "-LOADING")
}

func (s *Server) respawn() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, s.args...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart redis-server: %w", err)
	}
	s.cmd = cmd
	return nil
}

// Kill stops the server at once with SIGKILL (for failure tests).
func (s *Server) Kill() { s.Stop() }

// Freeze stops the server's process with SIGSTOP: it keeps its
// connections open but reads and answers nothing (a stalled node, or a
// replica that falls behind) until Thaw. Stop works on a frozen server.
func (s *Server) Freeze() error { return s.signal(syscall.SIGSTOP) }

// Thaw resumes a server stopped by Freeze (SIGCONT).
func (s *Server) Thaw() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	if s.cmd == nil {
		return fmt.Errorf("redistest: %s was not started by this test binary (or is stopped)", s.Addr)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redistest: signal %v to redis-server %s: %w", sig, s.Addr, err)
	}
	return nil
}

// Shared returns a redis-server shared by the tests of one test binary
// (HTQ_TEST_REDIS when set). Call Flush or use a fresh DB per test to
// isolate tests; DB hands out one.
func Shared(t testing.TB) *Server {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		return shared
	}
	if addr := os.Getenv(EnvAddr); addr != "" {
		if err := waitReady(addr, 2*time.Second); err != nil {
			t.Fatalf("redistest: %s=%s does not answer: %v", EnvAddr, addr, err)
		}
		shared = &Server{Addr: addr}
		return shared
	}
	s, err := StartProcess()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	shared = s
	return s
}

// StopShared stops the shared server; call it from TestMain after m.Run.
func StopShared() {
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

// URL returns a redis:// URL for db on the shared server after flushing
// that db, so that a test starts from an empty database. Databases are
// handed out round-robin over 1..15 (0 is left for manual use); tests that
// run in parallel within one package get different databases up to 15.
func URL(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	mu.Lock()
	dbNext = dbNext%15 + 1
	db := dbNext
	mu.Unlock()
	if err := s.FlushDB(db); err != nil {
		t.Fatalf("redistest: flush db %d: %v", db, err)
	}
	return fmt.Sprintf("redis://%s/%d", s.Addr, db)
}

// FlushDB empties one database of the server.
func (s *Server) FlushDB(db int) error {
	conn, err := net.DialTimeout("tcp", s.Addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	dbs := strconv.Itoa(db)
	cmd := fmt.Sprintf("*2\r\n$6\r\nSELECT\r\n$%d\r\n%s\r\n*1\r\n$7\r\nFLUSHDB\r\n", len(dbs), dbs)
	if _, err := conn.Write([]byte(cmd)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	for i := 0; i < 2; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		if len(line) == 0 || line[0] != '+' {
			return fmt.Errorf("unexpected reply %q", line)
		}
	}
	return nil
}

// DataDir returns the server's working directory (empty for HTQ_TEST_REDIS).
func (s *Server) DataDir() string { return s.dir }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func waitReady(addr string, timeout time.Duration) error {
	return waitAnswer(addr, timeout, "")
}

// waitAnswer waits until addr answers PING with +PONG or, when also is
// not empty, a line that starts with it.
func waitAnswer(addr string, timeout time.Duration, also string) error {
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, err = conn.Write([]byte("*1\r\n$4\r\nPING\r\n"))
			if err == nil {
				line, rerr := bufio.NewReader(conn).ReadString('\n')
				conn.Close()
				if rerr == nil && (line == "+PONG\r\n" || also != "" && strings.HasPrefix(line, also)) {
					return nil
				}
				err = fmt.Errorf("PING answered %q (%v)", line, rerr)
			} else {
				conn.Close()
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis at %s not ready after %v: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
