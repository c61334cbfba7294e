//go:build linux

package embedded

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data (and the metadata needed to read it back).
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// dropCache evicts f's clean pages from the page cache. The log's pages
// read at open or zero-filled come in large folios (up to 1 MiB on ext4
// since Linux 6.16); an append that dirties one makes fdatasync write it
// whole, so the cache is dropped and each append dirties only the pages
// it writes. A failure only costs speed and is ignored.
func dropCache(f *os.File) { _ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) }
