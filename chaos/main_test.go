package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/htqueue/htq/internal/chaostest"
	"github.com/htqueue/htq/internal/leaktest"
)

func TestMain(m *testing.M) {
	leaktest.Main(m, func() {
		if workerBin.path != "" {
			os.RemoveAll(filepath.Dir(workerBin.path))
		}
	})
}

// workerBin is the chaosworker binary, built once per test binary by
// buildWorker (with the race detector, as the tests themselves run).
var workerBin struct {
	once sync.Once
	path string
	err  error
}

func buildWorker(t *testing.T) string {
	t.Helper()
	workerBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "htq-chaos-")
		if err != nil {
			workerBin.err = fmt.Errorf("temp dir: %w", err)
			return
		}
		workerBin.path, workerBin.err = chaostest.BuildWorker(dir, true)
	})
	if workerBin.err != nil {
		t.Fatal(workerBin.err)
	}
	return workerBin.path
}
