package embedded

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(closingM{m})
}

// closingM runs the tests, then closes the store the 1M benchmarks share,
// before goleak looks for goroutines left behind.
type closingM struct{ m *testing.M }

func (c closingM) Run() int {
	code := c.m.Run()
	closeBig()
	return code
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
