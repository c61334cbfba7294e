package rdb

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/redistest"
)

// openLogged opens a Broker on addr with a logger writing into the
// returned buffer, and closes it at once: the checks run in Open.
func openLogged(t *testing.T, url string) string {
	t.Helper()
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	b, err := Open(ctx, url, Options{Logger: log})
	if err != nil {
		t.Fatalf("Open %s: %v", url, err)
	}
	b.Close()
	return buf.String()
}

// TestDurabilityWarnings starts real servers with settings that lose or
// evict tasks and checks Open's warnings; a server that keeps its data,
// or one where CONFIG is disabled, gets none and opens all the same.
func TestDurabilityWarnings(t *testing.T) {
	const (
		memOnly = "Redis keeps tasks in memory only"
		rdbOnly = "Redis persists by RDB snapshots only"
		evicts  = "Redis may evict tasks"
		fewRepl = "fewer replicas are connected than wait_replicas asks for"
	)
	tests := []struct {
		name      string
		args      []string
		query     string
		want, not []string
	}{
		{"no persistence, allkeys-lru", []string{"--maxmemory-policy", "allkeys-lru"}, "",
			[]string{"level=WARN msg=\"rdb: " + memOnly, "level=WARN msg=\"rdb: " + evicts, "maxmemory-policy=allkeys-lru"}, []string{rdbOnly}},
		{"RDB only, volatile-lru", []string{"--save", "3600 1", "--maxmemory-policy", "volatile-lru"}, "",
			[]string{"level=INFO msg=\"rdb: " + rdbOnly, "level=WARN msg=\"rdb: " + evicts}, []string{memOnly}},
		{"appendonly, noeviction", []string{"--appendonly", "yes"}, "",
			nil, []string{memOnly, rdbOnly, evicts, "level=WARN"}},
		{"CONFIG disabled", []string{"--rename-command", "CONFIG", "", "--maxmemory-policy", "allkeys-lru"}, "",
			nil, []string{memOnly, rdbOnly, evicts, "level=WARN"}},
		{"wait_replicas without replicas", []string{"--appendonly", "yes"}, "?wait_replicas=2&wait_timeout=100ms",
			[]string{"level=WARN msg=\"rdb: " + fewRepl, "connected_replicas=0", "wait_replicas=2"}, []string{memOnly, evicts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := redistest.Start(t, tt.args...)
			logs := openLogged(t, "redis://"+s.Addr+"/0"+tt.query)
			for _, w := range tt.want {
				if !strings.Contains(logs, w) {
					t.Errorf("log lacks %q:\n%s", w, logs)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(logs, n) {
					t.Errorf("log has %q:\n%s", n, logs)
				}
			}
			if len(tt.want) > 0 && !strings.Contains(logs, "node="+s.Addr) {
				t.Errorf("log does not name the node %s:\n%s", s.Addr, logs)
			}
		})
	}
}

func TestVersionAtLeast(t *testing.T) {
	for v, want := range map[string]bool{"7.2.0": true, "7.2.4": true, "8.0.1": true, "7.0.15": false, "6.2.14": false, "7.1.242": false, "": true, "x.y": true} {
		if got := versionAtLeast(v, 7, 2); got != want {
			t.Errorf("versionAtLeast(%q, 7, 2) = %v, want %v", v, got, want)
		}
	}
}
