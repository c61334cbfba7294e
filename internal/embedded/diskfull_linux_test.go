package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// childTmpfs runs in its own user and mount namespaces: it mounts a 12 MiB
// tmpfs on mnt and a 1 MiB one inside it, opens a store on the small one
// and prints "prealloc <errors.Is ENOSPC> <message>"; then opens a store
// on the large one and enqueues 1 KB tasks until it is full, printing
// "ack ID" for each acknowledged one and then "error <errors.Is ENOSPC>
// <message>", and copies the directory as the failure left it to dst (on
// the real disk).
// "skip <reason>" means namespaces or tmpfs are not available here.
func childTmpfs(ctx context.Context, dst, mnt string) int {
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fmt.Println("skip making mounts private:", err)
		return 0
	}
	if err := syscall.Mount("htqtest", mnt, "tmpfs", 0, "size=12m"); err != nil {
		fmt.Println("skip mounting a tmpfs:", err)
		return 0
	}
	// A 1 MiB tmpfs inside it: room for the data file, not for the log.
	small := filepath.Join(mnt, "small")
	if err := os.Mkdir(small, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	if err := syscall.Mount("htqtest", small, "tmpfs", 0, "size=1m"); err != nil {
		fmt.Println("skip mounting a tmpfs:", err)
		return 0
	}
	if c, err := Open(ctx, small, Options{Logger: discardLogger()}); err != nil {
		fmt.Printf("prealloc %v %v\n", errors.Is(err, syscall.ENOSPC), err)
	} else {
		_ = c.Close()
		fmt.Println("prealloc opened")
	}
	dir := filepath.Join(mnt, "a")
	b, err := Open(ctx, dir, Options{Logger: discardLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	for n := 0; ; n++ {
		id := fmt.Sprintf("f%06d", n)
		m := &base.TaskMessage{ID: id, Type: "fill", Payload: make([]byte, 1000), Queue: "fill"}
		if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
			fmt.Printf("error %v %v\n", errors.Is(err, syscall.ENOSPC), err)
			break
		}
		fmt.Println("ack " + id)
	}
	// The copy is the directory as a crash would leave it now.
	for _, name := range append([]string{DataFileName}, WALFileNames[:]...) {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, name), data, 0o600)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 4
		}
	}
	fmt.Println("copied")
	return 0
}

// TestDiskFullTmpfs fills a real filesystem (a 12 MiB tmpfs mounted in a
// child process's own namespaces): the checkpoints into the data file
// fail first, the log grows until its write fails with ENOSPC, and
// Enqueue returns that error (errors.Is works); a copy of the directory
// as it was then holds every acknowledged task. Opening a store on the
// filesystem with room for the data file but not for the log fails with
// ENOSPC while preallocating the log.
func TestDiskFullTmpfs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dst, mnt := t.TempDir(), t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=tmpfs", childDirEnv+"="+dst, childArgEnv+"="+mnt)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("no user namespaces here: %v", err)
	}
	var acked []string
	var failure, prealloc string
	copied := false
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "skip "):
			_ = cmd.Wait()
			t.Skip(line)
		case strings.HasPrefix(line, "ack "):
			acked = append(acked, strings.TrimPrefix(line, "ack "))
		case strings.HasPrefix(line, "error "):
			failure = strings.TrimPrefix(line, "error ")
		case line == "copied":
			copied = true
		case strings.HasPrefix(line, "prealloc "):
			prealloc = strings.TrimPrefix(line, "prealloc ")
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if len(acked) == 0 || !strings.HasPrefix(failure, "true ") || !copied {
		t.Fatalf("want acknowledged enqueues, then an error wrapping ENOSPC, then a copy; got %d, %q, %v", len(acked), failure, copied)
	}
	if !strings.HasPrefix(prealloc, "true ") || !strings.Contains(prealloc, "preallocating log") {
		t.Fatalf("Open on the full filesystem: %q; want an error wrapping ENOSPC naming the log's preallocation", prealloc)
	}
	t.Logf("%d enqueues acknowledged, then: %s; a new store: %s", len(acked), failure, prealloc)
	if err := holdsAcked(t, dst, "fill", acked, Options{Logger: discardLogger()}); err != nil {
		t.Fatalf("open of the copy: %v", err)
	}
}
