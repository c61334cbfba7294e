package chaostest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// BuildWorker compiles internal/chaosworker into dir, with the race
// detector when race is true, and returns the binary's path.
func BuildWorker(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "chaosworker")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/htqueue/htq/internal/chaosworker")
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chaostest: go build chaosworker: %w\n%s", err, out)
	}
	return bin, nil
}

// A Proc is one running incarnation of a worker process.
type Proc struct {
	// Name is the incarnation's name, the Worker of its events.
	Name   string
	cmd    *exec.Cmd
	stderr string
	exited chan struct{}
	err    error // Wait's, once exited is closed
}

// StartProc starts bin with args plus "-name name", sends its stderr to
// name.stderr in dir, and waits (at most 60 s) until it prints "ready".
func StartProc(bin, dir, name string, args ...string) (*Proc, error) {
	cmd := exec.Command(bin, append(args, "-name", name)...)
	errPath := filepath.Join(dir, name+".stderr")
	ef, err := os.Create(errPath)
	if err != nil {
		return nil, fmt.Errorf("chaostest: %w", err)
	}
	defer ef.Close() // the child has its own copy
	cmd.Stderr = ef
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("chaostest: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaostest: start %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, stderr: errPath, exited: make(chan struct{})}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if !ok && sc.Text() == "ready" {
				ok = true
				ready <- true
			}
		}
		if !ok {
			ready <- false
		}
		p.err = cmd.Wait()
		close(p.exited)
	}()
	select {
	case ok := <-ready:
		if ok {
			return p, nil
		}
		<-p.exited
		return nil, fmt.Errorf("chaostest: %s exited before it was ready (%v): %s", name, p.err, p.Stderr())
	case <-time.After(60 * time.Second):
		_ = p.Kill()
		return nil, fmt.Errorf("chaostest: %s not ready after 60 s: %s", name, p.Stderr())
	}
}

// Pid is the process's ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill kills the process with SIGKILL and waits until it is gone.
func (p *Proc) Kill() error {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("chaostest: kill %s: %w", p.Name, err)
	}
	<-p.exited
	return nil
}

// Stop sends SIGSTOP: the process keeps its connections and does nothing.
func (p *Proc) Stop() error { return p.signal(syscall.SIGSTOP) }

// Cont sends SIGCONT to a stopped process.
func (p *Proc) Cont() error { return p.signal(syscall.SIGCONT) }

func (p *Proc) signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("chaostest: signal %v to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Term sends SIGTERM and waits at most d for the process to exit; it
// reports an error if it did not, or exited with an error.
func (p *Proc) Term(d time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("chaostest: SIGTERM to %s: %w", p.Name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(d):
		_ = p.Kill()
		return fmt.Errorf("chaostest: %s still running %v after SIGTERM", p.Name, d)
	}
	if p.err != nil {
		return fmt.Errorf("chaostest: %s exited: %w: %s", p.Name, p.err, p.Stderr())
	}
	return nil
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Stderr returns the last 2,000 bytes the process wrote to stderr.
func (p *Proc) Stderr() string {
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		return err.Error()
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Panicked reports whether the process's stderr shows a panic or a data
// race.
func (p *Proc) Panicked() bool {
	b, err := os.ReadFile(p.stderr)
	if err != nil {
		return false
	}
	s := string(b)
	return strings.Contains(s, "panic:") || strings.Contains(s, "WARNING: DATA RACE")
}
