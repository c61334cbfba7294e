//go:build linux

package embedded

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the metadata needed to read it back).
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
