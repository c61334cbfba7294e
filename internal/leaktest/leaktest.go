// Package leaktest ends a test binary with a check that its tests left no
// goroutine running. Every package's TestMain calls Main.
package leaktest

import (
	"testing"

	"go.uber.org/goleak"
)

// Main runs the tests of m, then cleanup (when not nil: stop the shared
// redis-server, remove temporary files, close shared stores), then — when
// every test passed — fails the test binary if a goroutine is still
// running that opts do not ignore. It exits the process and never returns.
//
// An ignore option names a long-lived goroutine of a library that htq
// cannot end; the caller says why next to it. A goroutine of htq's own
// left running is a bug to fix, not to ignore.
func Main(m *testing.M, cleanup func(), opts ...goleak.Option) {
	goleak.VerifyTestMain(cleaningM{m, cleanup}, opts...)
}

// cleaningM runs cleanup after the tests and before goleak looks.
type cleaningM struct {
	m       *testing.M
	cleanup func()
}

func (c cleaningM) Run() int {
	code := c.m.Run()
	if c.cleanup != nil {
		c.cleanup()
	}
	return code
}
