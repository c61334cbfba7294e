package redistest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// StartReplicated starts a primary and one replica of it, and returns once
// the replica receives the primary's writes. Both are stopped at the end
// of the test.
func StartReplicated(t testing.TB, extraArgs ...string) (primary, replica *Server) {
	t.Helper()
	// No diskless-sync delay: a replica syncs at once, not after 5 s (the
	// replica too: it may be promoted and get the old primary as its own).
	extraArgs = append([]string{"--repl-diskless-sync-delay", "0"}, extraArgs...)
	primary = Start(t, extraArgs...)
	host, port, _ := net.SplitHostPort(primary.Addr)
	replica = Start(t, append([]string{"--replicaof", host, port}, extraArgs...)...)
	WaitReplicaOnline(t, primary.Addr, 10*time.Second)
	return primary, replica
}

// WaitReplicaOnline waits until a write on the primary at addr reaches a
// replica. INFO says "online" earlier: after a diskless sync, Redis 7.0
// starts streaming writes to the replica only once the replica sent its
// first acknowledgement, up to a second later, and until then the
// replica receives nothing.
func WaitReplicaOnline(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	pc, err := nodeClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	deadline := time.Now().Add(timeout)
	for {
		// One DoMulti holding WAIT runs on one connection: the WAIT
		// covers the SET and DEL before it.
		rs := pc.DoMulti(context.Background(),
			pc.B().Set().Key("redistest:probe").Value("1").Build(),
			pc.B().Del().Key("redistest:probe").Build(),
			pc.B().Wait().Numreplicas(1).Timeout(200).Build())
		if n, err := rs[2].AsInt64(); err == nil && n >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: no replica of %s acknowledged a write within %v", addr, timeout)
		}
	}
}

// StartSentinels starts n redis-sentinel processes on free loopback ports,
// each watching the master at masterAddr as "mymaster" with quorum (down
// after 2 s, failover timeout 10 s), and returns their addresses once
// each knows the master. They are killed at the end of the test.
func StartSentinels(t testing.TB, masterAddr string, n, quorum int) []string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redis-server not found on PATH (apt-get install redis-server): %v", err)
	}
	mhost, mport, _ := net.SplitHostPort(masterAddr)
	var addrs []string
	for len(addrs) < n {
		for attempt := 0; ; attempt++ {
			port, err := freePort()
			if err != nil {
				t.Fatal(err)
			}
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
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
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

// FailoverTimes are the moments of a failover Failover forced, counted
// from the SENTINEL FAILOVER command.
type FailoverTimes struct {
	// Promoted: the sentinels named the replica as the master.
	Promoted time.Duration
	// Resynced: the old primary replicated from the new one.
	Resynced time.Duration
}

// Failover forces a failover of the master "mymaster" from primary to
// replica through the sentinel at sentinelAddr (retrying SENTINEL
// FAILOVER until the sentinel accepts it), waits until the sentinels name
// replica, then turns primary into a replica of it — as the sentinels do
// some 8 s after they see the old primary still claims to be one — and
// waits until it is in sync. ctx bounds the whole.
func Failover(ctx context.Context, sentinelAddr string, primary, replica *Server) (FailoverTimes, error) {
	var ft FailoverTimes
	sc, err := nodeClient(sentinelAddr)
	if err != nil {
		return ft, err
	}
	defer sc.Close()
	start := time.Now()
	for {
		err := sc.Do(ctx, sc.B().Arbitrary("SENTINEL", "FAILOVER", "mymaster").Build()).Error()
		if err == nil {
			break
		}
		if ctx.Err() != nil || time.Since(start) > 10*time.Second {
			return ft, fmt.Errorf("redistest: SENTINEL FAILOVER: %w", err)
		}
		time.Sleep(50 * time.Millisecond) // the sentinel has not yet seen a replica it can promote
	}
	for {
		addr, err := sc.Do(ctx, sc.B().SentinelGetMasterAddrByName().Master("mymaster").Build()).AsStrSlice()
		if err == nil && len(addr) == 2 && net.JoinHostPort(addr[0], addr[1]) == replica.Addr {
			break
		}
		if ctx.Err() != nil {
			return ft, fmt.Errorf("redistest: the sentinels did not promote %s: %v %v", replica.Addr, addr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling external processes
	}
	ft.Promoted = time.Since(start)
	oc, err := nodeClient(primary.Addr)
	if err != nil {
		return ft, err
	}
	defer oc.Close()
	nhost, nportStr, _ := net.SplitHostPort(replica.Addr)
	nport, err := strconv.ParseInt(nportStr, 10, 64)
	if err != nil {
		return ft, fmt.Errorf("redistest: port of %s: %w", replica.Addr, err)
	}
	for {
		// The sentinels disconnect the clients of a node they reconfigure
		// (CLIENT KILL), so a command may fail once.
		err := oc.Do(ctx, oc.B().Replicaof().Host(nhost).Port(nport).Build()).Error()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ft, fmt.Errorf("redistest: REPLICAOF on the old primary: %w", err)
		}
		time.Sleep(20 * time.Millisecond) // retry after a killed connection
	}
	for {
		s, err := oc.Do(ctx, oc.B().Info().Section("replication").Build()).ToString()
		if err == nil && infoField(s, "role") == "slave" && infoField(s, "master_link_status") == "up" {
			break
		}
		if ctx.Err() != nil {
			return ft, fmt.Errorf("redistest: the old primary %s was not turned into a replica of %s", primary.Addr, replica.Addr)
		}
		time.Sleep(20 * time.Millisecond) // polling external processes
	}
	ft.Resynced = time.Since(start)
	return ft, nil
}

// infoField returns the value of key in an INFO reply ("" if absent).
func infoField(info, key string) string {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return v
		}
	}
	return ""
}

// nodeClient connects to one Redis node (or sentinel) at addr.
func nodeClient(addr string) (rueidis.Client, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return nil, fmt.Errorf("redistest: connect to %s: %w", addr, err)
	}
	return c, nil
}
