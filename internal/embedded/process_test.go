//go:build unix

package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// The tests in this file re-execute the test binary as a child process
// (TestMain runs childMain when childEnv is set), so that a second process
// can hold the lock or be killed with SIGKILL mid-write.
const (
	childEnv    = "HTQ_EMBEDDED_CHILD" // "hold", "enqueue", "fill", "ckptkill", "prealloc" or "tmpfs"
	childDirEnv = "HTQ_EMBEDDED_DIR"
	childArgEnv = "HTQ_EMBEDDED_ARG" // ckptkill: the checkpoint to die at; tmpfs: the mount point
)

// childMain is the child process. "hold" opens the directory, says "ready"
// and keeps it open until stdin closes. "enqueue" opens it and enqueues from
// 16 goroutines while a worker fetches and completes, printing "ack ID" on
// stdout after each Enqueue that returned nil and "done ID" after each
// completion that returned nil, until it is killed; "ckptkill" does the
// same and kills itself right after a checkpoint.
func childMain() int {
	dir := os.Getenv(childDirEnv)
	ctx := context.Background()
	opts := Options{Logger: discardLogger()}
	switch os.Getenv(childEnv) {
	case "prealloc":
		return childPrealloc(ctx, dir)
	case "tmpfs":
		return childTmpfs(ctx, dir, os.Getenv(childArgEnv))
	case "ckptkill":
		// Die by SIGKILL right after the k-th checkpoint's commit, before
		// the committer hears of it or moves the log to its other file.
		k, _ := strconv.Atoi(os.Getenv(childArgEnv))
		n := 0
		opts.walSize = smallLog // the log switches files often
		opts.afterCheckpoint = func() {
			if n++; n == k {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
		}
	}
	b, err := Open(ctx, dir, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	switch os.Getenv(childEnv) {
	case "hold":
		fmt.Println("ready")
		_, _ = io.Copy(io.Discard, os.Stdin)
		if err := b.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return 0
	case "fill":
		// The disk is "full" at 4 MiB: writes past it fail with EFBIG.
		signal.Ignore(syscall.SIGXFSZ)
		lim := syscall.Rlimit{Cur: 4 << 20, Max: 4 << 20}
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
		fmt.Println("ready")
		for n := 0; ; n++ {
			id := fmt.Sprintf("f%06d", n)
			m := &base.TaskMessage{ID: id, Type: "fill", Payload: make([]byte, 1000), Queue: "fill"}
			if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
				fmt.Printf("error %v\n", err)
				// A second try fails too, and does not hang.
				if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err == nil {
					fmt.Println("error-gone")
				}
				return 0
			}
			fmt.Println("ack " + id)
		}
	case "enqueue", "ckptkill":
		var mu sync.Mutex
		say := func(s string) {
			mu.Lock()
			defer mu.Unlock()
			// One write per line: a line that reached the pipe is whole.
			_, _ = os.Stdout.WriteString(s + "\n")
		}
		say("ready")
		go func() {
			for {
				ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "crash", Max: 8, LeaseDuration: time.Minute})
				if err != nil {
					return
				}
				refs := make([]broker.LeaseRef, len(ls))
				for i, l := range ls {
					refs[i] = l.Ref()
				}
				for i, err := range b.Complete(ctx, refs) {
					if err == nil {
						say("done " + ls[i].Msg.ID)
					}
				}
			}
		}()
		pid := os.Getpid()
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					id := fmt.Sprintf("%d-%d-%d", pid, g, n)
					m := &base.TaskMessage{ID: id, Type: "crash:test", Payload: make([]byte, 100), Queue: "crash", Retention: time.Hour}
					if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
						fmt.Fprintln(os.Stderr, err)
						return
					}
					say("ack " + id)
				}
			}()
		}
		wg.Wait()
		return 1
	}
	return 2
}

// child starts the test binary as a child process of the given mode on dir.
func child(t *testing.T, mode, dir string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child %s: got %q, %v; want ready", mode, line, err)
	}
	return cmd, stdin, r
}

// TestLockSecondProcess: while one process has the directory open, another
// fails at once with an error naming the holder's PID; once it exits, the
// directory opens again.
func TestLockSecondProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, stdin, _ := child(t, "hold", dir)
	start := time.Now()
	_, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	took := time.Since(start)
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while another process holds %s: got %v, want ErrLocked", dir, err)
	}
	if want := fmt.Sprintf("already in use by PID %d", cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if took > time.Second {
		t.Errorf("Open took %v to fail; want well under a second", took)
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatalf("Open after the holder exited: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLockKilledHolder: a holder killed with SIGKILL leaves no stale lock.
func TestLockKilledHolder(t *testing.T) {
	dir := t.TempDir()
	cmd, _, _ := child(t, "hold", dir)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatalf("Open after the holder was killed: %v", err)
	}
	_ = b.Close()
}

// TestLockSameProcess: a second Open in the same process fails too.
func TestLockSameProcess(t *testing.T) {
	dir := t.TempDir()
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = Open(t.Context(), dir, Options{Logger: discardLogger()})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Open: got %v, want ErrLocked naming this PID", err)
	}
}

// TestKill9Durability is issue 3's durability test: a child process enqueues
// from 16 goroutines (and processes) under load, is killed with SIGKILL at a
// random moment, and every task whose Enqueue had returned nil must be there
// after reopening, with the file whole. HTQ_CRASH_ITERATIONS sets the number
// of rounds (default 5; the reliability goal T8 is 100).
func TestKill9Durability(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	rounds := 5
	if s := os.Getenv("HTQ_CRASH_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("HTQ_CRASH_ITERATIONS: %v", err)
		}
		rounds = n
	}
	dir := t.TempDir()
	total := 0
	for round := range rounds {
		cmd, _, out := child(t, "enqueue", dir)
		var acked []string
		done := make(chan error, 1)
		go func() {
			for {
				line, err := out.ReadString('\n')
				if err != nil {
					// A partial last line was never a whole ack.
					done <- err
					return
				}
				if id, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ack "); ok {
					acked = append(acked, id)
				}
			}
		}()
		time.Sleep(time.Duration(20+rand.IntN(400)) * time.Millisecond) // the random moment
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-done
		_ = cmd.Wait()

		b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		if err := b.CheckInvariants(t.Context()); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		missing := 0
		for _, id := range acked {
			if _, err := b.GetTaskInfo(t.Context(), "crash", id); err != nil {
				missing++
				if missing <= 5 {
					t.Errorf("round %d: acknowledged task %s: %v", round, id, err)
				}
			}
		}
		if missing > 0 {
			t.Fatalf("round %d: %d of %d acknowledged tasks lost", round, missing, len(acked))
		}
		// No task is left active with a live lease: the orphans' leases
		// ended at open, so the Recoverer takes them all at once.
		ls, err := b.ExpiredLeases(t.Context(), "crash", 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		active := 0
		if q := b.queues["crash"]; q != nil {
			active = q.active.Len()
		}
		b.mu.Unlock()
		if len(ls) != active {
			t.Errorf("round %d: %d active tasks after reopen, only %d with an expired lease", round, active, len(ls))
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		total += len(acked)
		t.Logf("round %d: %d acknowledged enqueues, all present", round, len(acked))
	}
	if total == 0 {
		t.Fatal("no enqueue was acknowledged in any round")
	}
}

// TestDiskFull: when the disk fills up (here a file-size limit on the child
// process), Enqueue returns an error instead of dropping the task, and every
// task acknowledged before is there after a reopen.
func TestDiskFull(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd, _, out := child(t, "fill", dir)
	var acked []string
	var failure string
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		if id, ok := strings.CutPrefix(line, "ack "); ok {
			acked = append(acked, id)
		} else if msg, ok := strings.CutPrefix(line, "error "); ok {
			failure = msg
		} else if line == "error-gone" {
			t.Error("an Enqueue after the disk filled up succeeded")
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if failure == "" || len(acked) == 0 {
		t.Fatalf("want some acknowledged enqueues then an error; got %d and %q", len(acked), failure)
	}
	t.Logf("%d enqueues acknowledged, then: %s", len(acked), failure)
	if err := holdsAcked(t, dir, "fill", acked, Options{Logger: discardLogger()}); err != nil {
		t.Fatalf("reopen after the disk filled up: %v", err)
	}
}

// holdsAcked opens dir and checks its invariants and that it holds every
// task of queue named in acked.
func holdsAcked(t *testing.T, dir, queue string, acked []string, opts Options) error {
	t.Helper()
	b, err := Open(t.Context(), dir, opts)
	if err != nil {
		return err
	}
	defer b.Close()
	if err := b.CheckInvariants(t.Context()); err != nil {
		return err
	}
	for _, id := range acked {
		if _, err := b.GetTaskInfo(t.Context(), queue, id); err != nil {
			return fmt.Errorf("acknowledged task %s: %w", id, err)
		}
	}
	return nil
}

// TestReadOnlyDataFile: a data file that cannot be written (here made
// immutable with chattr, which binds root too) fails Open with an error
// naming it, rather than opening a store that would drop writes.
func TestReadOnlyDataFile(t *testing.T) {
	dir := t.TempDir()
	file := fillDir(t, dir, 10)
	if out, err := exec.Command("chattr", "+i", file).CombinedOutput(); err != nil {
		t.Skipf("chattr +i not available here: %v %s", err, out)
	}
	defer exec.Command("chattr", "-i", file).Run()
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	if err == nil {
		_ = b.Close()
		t.Fatal("Open of an unwritable data file succeeded")
	}
	if !strings.Contains(err.Error(), file) {
		t.Fatalf("error %q does not name %s", err, file)
	}
	t.Logf("error: %v", err)
}

// childPrealloc opens dir with a file-size limit of 1 MiB, below the
// size the log files are preallocated to, and prints how it failed:
// "error <errors.Is EFBIG> <message>", or "opened".
func childPrealloc(ctx context.Context, dir string) int {
	signal.Ignore(syscall.SIGXFSZ)
	lim := syscall.Rlimit{Cur: 1 << 20, Max: 1 << 20}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 4
	}
	b, err := Open(ctx, dir, Options{Logger: discardLogger()})
	if err == nil {
		_ = b.Close()
		fmt.Println("opened")
		return 0
	}
	fmt.Printf("error %v %v\n", errors.Is(err, syscall.EFBIG), err)
	return 0
}

// TestLogPreallocFails: when the log files cannot be preallocated (here a
// file-size limit on the child process), Open fails with the system's
// error, usable with errors.Is; once there is room, the directory opens
// and works.
func TestLogPreallocFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=prealloc", childDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	line := strings.TrimSpace(string(out))
	if !strings.HasPrefix(line, "error true ") || !strings.Contains(line, "preallocating log") {
		t.Fatalf("Open under a 1 MiB file-size limit: %q; want an error wrapping EFBIG that names the log's preallocation", line)
	}
	t.Logf("child: %s", line)
	b, err := Open(t.Context(), dir, Options{Logger: discardLogger()})
	if err != nil {
		t.Fatalf("Open once there is room: %v", err)
	}
	if err := b.Enqueue(t.Context(), broker.EnqueueParams{Msg: &base.TaskMessage{ID: "a", Type: "x", Queue: "q"}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range WALFileNames {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.Size() < walPrealloc {
			t.Fatalf("%s after the reopen: %v, %v bytes; want %d", name, err, fi, walPrealloc)
		}
	}
}

// TestKill9AtCheckpoint kills a process (SIGKILL, from inside, so that
// the moment is exact) right after a checkpoint's commit to the data file
// and before the committer hears of it and moves the log to its other
// file, with 16 goroutines enqueueing and a worker completing meanwhile.
// Every acknowledged task is there after the reopen, every acknowledged
// completion too (such a task is not handed out again), the file is
// whole, and the next crash round starts from that state.
func TestKill9AtCheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	for round := range 4 {
		k := 2 + rand.IntN(30)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=ckptkill", childDirEnv+"="+dir, childArgEnv+"="+strconv.Itoa(k))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var acked, done []string
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				break // a partial last line was never a whole ack
			}
			line = strings.TrimSuffix(line, "\n")
			if id, ok := strings.CutPrefix(line, "ack "); ok {
				acked = append(acked, id)
			} else if id, ok := strings.CutPrefix(line, "done "); ok {
				done = append(done, id)
			}
		}
		err = cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the child did not die by SIGKILL at checkpoint %d: %v", round, k, err)
		}
		if err := holdsAcked(t, dir, "crash", acked, Options{Logger: discardLogger(), walSize: smallLog}); err != nil {
			t.Fatalf("round %d: reopen after SIGKILL at checkpoint %d: %v", round, k, err)
		}
		// A completion that was acknowledged is not undone: the task is
		// not handed out again.
		b, err := Open(t.Context(), dir, Options{Logger: discardLogger(), walSize: smallLog})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range done {
			info, err := b.GetTaskInfo(t.Context(), "crash", id)
			if err != nil || info.State != base.StateCompleted {
				_ = b.Close()
				t.Fatalf("round %d: task %s, whose completion was acknowledged: %+v, %v; want completed", round, id, info, err)
			}
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after checkpoint %d, %d acknowledged enqueues, all present; %d acknowledged completions, all completed", round, k, len(acked), len(done))
	}
}
