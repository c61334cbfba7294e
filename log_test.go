package htq

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logRecorder keeps what a logger wrote (debug and up), one record a
// line, for tests that check what a component said.
type logRecorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *logRecorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

// logger returns a logger that writes to r.
func (r *logRecorder) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// lines returns the records that contain every one of words.
func (r *logRecorder) lines(words ...string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(r.buf.String()), "\n") {
		all := line != ""
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// String returns everything written.
func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}
