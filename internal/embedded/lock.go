package embedded

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrLocked means another process (or another Broker in this one) has the
// data directory open. Only one may, so that two writers never share a file.
var ErrLocked = errors.New("htq: data directory already in use")

// lockFileName is the lock file inside the data directory. It holds the PID
// of the process that has the directory open; the lock itself is an advisory
// lock on the file, which the kernel releases when that process dies, so a
// crash never leaves a stale lock behind.
const lockFileName = "LOCK"

// dirLock is a held lock on a data directory.
type dirLock struct{ f *os.File }

// lockDir takes the lock of dir, waiting up to timeout for another holder to
// let go. On failure the error says which PID holds it.
func lockDir(dir string, timeout time.Duration) (*dirLock, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("htq: opening lock file: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		ok, err := tryLock(f)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("htq: locking %s: %w", path, err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			pid := holderPID(f)
			_ = f.Close()
			if pid == "" {
				return nil, fmt.Errorf("%w: %s is already in use by another process (PID unknown)", ErrLocked, dir)
			}
			return nil, fmt.Errorf("%w: %s is already in use by PID %s", ErrLocked, dir, pid)
		}
		// Polling is the only portable way to wait for an advisory lock
		// with a timeout; it runs only while another process holds it.
		time.Sleep(10 * time.Millisecond)
	}
	if err := f.Truncate(0); err != nil {
		_ = unlock(f)
		_ = f.Close()
		return nil, fmt.Errorf("htq: writing lock file: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		_ = unlock(f)
		_ = f.Close()
		return nil, fmt.Errorf("htq: writing lock file: %w", err)
	}
	return &dirLock{f: f}, nil
}

// holderPID reads the PID the holder wrote. The holder writes it just after
// taking the lock, so give it a moment when the file is still empty.
func holderPID(f *os.File) string {
	for range 20 {
		buf := make([]byte, 32)
		n, _ := f.ReadAt(buf, 0)
		if s := strings.TrimSpace(string(buf[:n])); s != "" {
			return s
		}
		time.Sleep(5 * time.Millisecond)
	}
	return ""
}

// release lets the directory go. The PID stays in the file; it means nothing
// without the lock.
func (l *dirLock) release() error {
	err := unlock(l.f)
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
