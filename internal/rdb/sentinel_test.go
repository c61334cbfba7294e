package rdb

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

// startSentinel starts a master and one sentinel watching it as
// "mymaster", and returns the sentinel's address.
func startSentinel(t *testing.T) (master *redistest.Server, sentinelAddr string) {
	t.Helper()
	master = redistest.Start(t)
	return master, startSentinels(t, master.Addr, 1, 1)[0]
}

// startSentinels starts n redis-sentinel processes on free loopback ports,
// each watching the master at masterAddr as "mymaster" with quorum, and
// returns their addresses once each knows the master. They are killed at
// the end of the test.
func startSentinels(t *testing.T, masterAddr string, n, quorum int) []string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH (apt-get install redis-server): %v", err)
	}
	mhost, mport, _ := net.SplitHostPort(masterAddr)
	var addrs []string
	for len(addrs) < n {
		for attempt := 0; ; attempt++ {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			dir := t.TempDir()
			conf := filepath.Join(dir, "sentinel.conf")
			cfg := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s %d\n"+
				"sentinel down-after-milliseconds mymaster 2000\nsentinel failover-timeout mymaster 10000\n",
				port, dir, mhost, mport, quorum)
			if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, conf, "--sentinel")
			if err := cmd.Start(); err != nil {
				t.Fatalf("start sentinel: %v", err)
			}
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			err = waitSentinel(addr, "mymaster", 5*time.Second)
			if err == nil {
				t.Cleanup(func() {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				})
				addrs = append(addrs, addr)
				break
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			if attempt == 4 {
				t.Fatalf("sentinel did not start: %v", err)
			}
		}
	}
	return addrs
}

// waitSentinel waits until the sentinel at addr knows master name.
func waitSentinel(addr, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	req := fmt.Sprintf("*3\r\n$8\r\nSENTINEL\r\n$23\r\nget-master-addr-by-name\r\n$%d\r\n%s\r\n", len(name), name)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(time.Second))
			_, err = conn.Write([]byte(req))
			if err == nil {
				var line string
				line, err = bufio.NewReader(conn).ReadString('\n')
				if err == nil && strings.HasPrefix(line, "*2") {
					conn.Close()
					return nil
				}
				if err == nil {
					err = fmt.Errorf("answer %q", line)
				}
			}
			conn.Close()
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond) // polling an external process
	}
}

// TestSentinel reaches a master through a redis-sentinel:// URL and runs
// enqueue, fetch, complete and an event through it.
func TestSentinel(t *testing.T) {
	master, sentinel := startSentinel(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("redis-sentinel://%s/2?master=mymaster", sentinel)
	b, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatalf("Open %s: %v", url, err)
	}
	defer b.Close()
	if mode := b.c.Mode(); mode != "sentinel" {
		t.Fatalf("client mode = %v, want sentinel", mode)
	}
	events, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	select {
	case e := <-events:
		if e.Kind != broker.EventReady || e.Queue != "q" {
			t.Fatalf("event %+v, want ready q", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ready event")
	}
	ls := mustFetch(t, b, "q", 10)
	if len(ls) != 1 {
		t.Fatalf("Fetch: %d tasks, want 1", len(ls))
	}
	if err := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0]; err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// The data went to the master's db 2.
	out, err := exec.Command("redis-cli", "-h", strings.Split(master.Addr, ":")[0], "-p", strings.Split(master.Addr, ":")[1],
		"-n", "2", "GET", "htq:{q}:stat:processed").Output()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("processed counter on the master's db 2 = %q (%v), want 1", out, err)
	}
	checkInvariants(t, b)
}
