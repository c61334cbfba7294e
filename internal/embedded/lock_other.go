//go:build !unix

package embedded

import "os"

// tryLock has no portable advisory lock to take here; bbolt's own lock on the
// data file (see openBolt) still keeps a second process out.
func tryLock(*os.File) (bool, error) { return true, nil }

func unlock(*os.File) error { return nil }
