package embedded

import (
	"io"
	"log/slog"
	"os"
	"testing"

	"github.com/htqueue/htq/internal/leaktest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	// closeBig closes the store the 1M benchmarks share.
	leaktest.Main(m, closeBig)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
