package main

import (
	"bytes"
	"log/slog"
	"runtime"
	"strings"
	"testing"
)

func TestPlanProcs(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	env := func(k string) (string, bool) {
		if k == "GOMAXPROCS" {
			return "1", true
		}
		return "", false
	}
	for _, tc := range []struct {
		url     string
		current int
		lookup  func(string) (string, bool)
		want    int
		source  string
	}{
		{"file:./htq-data", 1, noEnv, 2, "embedded store"},
		{"file:///var/lib/htq", 1, noEnv, 2, "embedded store"},
		{"file:./htq-data", 2, noEnv, 0, "default"},
		{"file:./htq-data", 8, noEnv, 0, "default"},
		{"file:./htq-data", 1, env, 0, "GOMAXPROCS"},
		{"redis://127.0.0.1:6379/0", 1, noEnv, 0, "default"},
		{"mem:", 1, noEnv, 0, "default"},
	} {
		if got, source := planProcs(tc.url, tc.current, tc.lookup); got != tc.want || source != tc.source {
			t.Errorf("planProcs(%q, %d) = %d, %q; want %d, %q", tc.url, tc.current, got, source, tc.want, tc.source)
		}
	}
}

// TestApplyProcs raises one P to two for the embedded store, logs it, and
// restores the value it found.
func TestApplyProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	var log bytes.Buffer
	restore := applyProcs("file:"+t.TempDir(), func(string) (string, bool) { return "", false },
		slog.New(slog.NewTextHandler(&log, nil)))
	if n := runtime.GOMAXPROCS(0); n != 2 {
		t.Errorf("GOMAXPROCS = %d after applyProcs, want 2", n)
	}
	if !strings.Contains(log.String(), "gomaxprocs=2 was=1") {
		t.Errorf("log = %q, want the change and the value before it", log.String())
	}
	restore()
	if n := runtime.GOMAXPROCS(0); n != 1 {
		t.Errorf("GOMAXPROCS = %d after restore, want 1", n)
	}
}
