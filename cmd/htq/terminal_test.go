package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// pty is a pseudo-terminal: the program runs on tty, the test reads what
// it draws from (and types into) master.
type pty struct {
	master, tty *os.File
	mu          sync.Mutex
	seen        bytes.Buffer
	done        chan struct{}
}

func openPTY(t *testing.T) *pty {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 160}); err != nil {
		t.Fatal(err)
	}
	p := &pty{master: m, tty: tty, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		buf := make([]byte, 4096)
		for {
			n, err := m.Read(buf)
			p.mu.Lock()
			p.seen.Write(buf[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		tty.Close()
		m.Close()
		<-p.done
	})
	return p
}

func (p *pty) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen.String()
}

// waitFor waits until the terminal has shown all of want.
func (p *pty) waitFor(t *testing.T, d time.Duration, want ...string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		out := p.output()
		missing := ""
		for _, w := range want {
			if !strings.Contains(out, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the terminal did not show %q within %v; it shows:\n%q", missing, d, out)
		}
		time.Sleep(20 * time.Millisecond) // polls what a reader goroutine collected
	}
}

// On a terminal htq stats redraws until q is pressed, on the alternate
// screen, and gives the terminal back as it was.
func TestCLIStatsOnTerminal(t *testing.T) {
	p := startBinary(t, "mem:", "--token", binToken)
	p.do(t, binToken, "POST", "/v1/queues/live/tasks", map[string]any{"type": "x"}, http.StatusCreated, nil)
	term := openPTY(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, htqBin, "stats", "--interval", "200ms")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HTQ_SERVER=" + p.base, "HTQ_TOKEN=" + binToken, "TERM=xterm"}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = term.tty, term.tty, term.tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	term.waitFor(t, 10*time.Second, "\x1b[?1049h", "htq stats", "live", "total")
	// A second frame shows the change.
	p.do(t, binToken, "POST", "/v1/queues/other/tasks", map[string]any{"type": "x"}, http.StatusCreated, nil)
	term.waitFor(t, 10*time.Second, "other")
	if _, err := term.master.Write([]byte("q")); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("htq stats after q: %v\n%q", err, term.output())
	}
	// The last bytes may still be on their way through the terminal.
	term.waitFor(t, 5*time.Second, "\x1b[?25h\x1b[?1049l")
	if out := term.output(); !strings.HasSuffix(strings.TrimRight(out, "\r\n"), "\x1b[?25h\x1b[?1049l") {
		t.Errorf("the terminal was not given back: ends %q", out[max(0, len(out)-40):])
	}
}

// A bulk action draws a progress bar on stderr when it is a terminal, and
// keeps its report on stdout.
func TestCLIProgressBar(t *testing.T) {
	p := startBinary(t, "mem:", "--token", binToken)
	var tasks []any
	for i := 0; i < 40; i++ {
		tasks = append(tasks, map[string]any{"type": "x", "payload": i, "options": map[string]any{"delay": "1h"}})
	}
	p.do(t, binToken, "POST", "/v1/queues/q/tasks/batch", map[string]any{"tasks": tasks}, http.StatusCreated, nil)
	term := openPTY(t)
	cmd := exec.Command(htqBin, "task", "rm", "q", "--state", "scheduled", "--all")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HTQ_SERVER=" + p.base, "HTQ_TOKEN=" + binToken}
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, term.tty
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, term.output())
	}
	term.waitFor(t, 5*time.Second, "\rrm scheduled tasks of q [", "####", "] 40/40 100%")
	if !strings.HasPrefix(stdout.String(), "deleted 40 scheduled tasks of q") {
		t.Errorf("stdout: %q", stdout.String())
	}
}
