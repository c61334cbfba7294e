//go:build !linux

package embedded

import "os"

// fdatasync flushes f to disk (fsync where fdatasync is not available).
func fdatasync(f *os.File) error { return f.Sync() }

// dropCache does nothing here (see the Linux version).
func dropCache(*os.File) {}
