package main

import (
	"bytes"
	"io/fs"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"testing"
)

func TestParseGCPercent(t *testing.T) {
	for text, want := range map[string]int{"400": 400, " 1 ": 1, "off": -1} {
		got, err := parseGCPercent(value{text: text, source: "--gc-percent"})
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", text, got, err, want)
		}
	}
	for _, text := range []string{"0", "-1", "x", "", "1.5", "100%"} {
		_, err := parseGCPercent(value{text: text, source: "HTQ_GC_PERCENT"})
		if err == nil || !strings.Contains(err.Error(), "HTQ_GC_PERCENT") {
			t.Errorf("%q: %v, want an error naming the source", text, err)
		}
	}
}

func TestParseMemoryLimit(t *testing.T) {
	for text, want := range map[string]int64{
		"512MiB": 512 << 20, "2GiB": 2 << 30, "1 TiB": 1 << 40, "64KiB": 64 << 10, "1000B": 1000,
		"123456789": 123456789, "off": math.MaxInt64,
	} {
		got, err := parseMemoryLimit(value{text: text, source: "--memory-limit"})
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", text, got, err, want)
		}
	}
	for _, text := range []string{"0", "-5MiB", "1.5GiB", "5MB", "GiB", "", "9999999TiB", "x"} {
		_, err := parseMemoryLimit(value{text: text, source: "HTQ_MEMORY_LIMIT"})
		if err == nil || !strings.Contains(err.Error(), "HTQ_MEMORY_LIMIT") {
			t.Errorf("%q: %v, want an error naming the source", text, err)
		}
	}
	for n, want := range map[int64]string{512 << 20: "512MiB", 3 << 30: "3GiB", 1000: "1000B", 1<<20 + 1: "1048577B", math.MaxInt64: "off"} {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestSettingsGC(t *testing.T) {
	o, err := parse(t, []string{"--gc-percent", "250"}, map[string]string{"HTQ_MEMORY_LIMIT": "1GiB"})
	if err != nil {
		t.Fatal(err)
	}
	if o.gc.percent == nil || *o.gc.percent != 250 || o.gc.limit == nil || *o.gc.limit != 1<<30 {
		t.Errorf("gc settings: %+v", o.gc)
	}
	o, err = parse(t, nil, nil)
	if err != nil || o.gc.percent != nil || o.gc.limit != nil {
		t.Errorf("unset: %+v, %v", o, err)
	}
	_, err = parse(t, []string{"--gc-percent", "lots", "--memory-limit", "big"}, nil)
	if err == nil || !strings.Contains(err.Error(), "--gc-percent") || !strings.Contains(err.Error(), "--memory-limit") {
		t.Errorf("bad values: %v, want both named", err)
	}
}

// fakeFiles reads from a map, as os.ReadFile.
func fakeFiles(files map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, fs.ErrNotExist
	}
}

func TestDefaultMemoryLimit(t *testing.T) {
	meminfo := "MemFree:         1000 kB\nMemTotal:       8388608 kB\nSwap: 0 kB\n" // 8 GiB
	for name, tc := range map[string]struct {
		files map[string]string
		want  int64
	}{
		"machine":         {map[string]string{"/proc/meminfo": meminfo}, 4 << 30},
		"cgroup":          {map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "2147483648\n"}, 3 << 29},
		"cgroup max":      {map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 4 << 30},
		"cgroup above":    {map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "99999999999999\n"}, 4 << 30},
		"cgroup only":     {map[string]string{"/sys/fs/cgroup/memory.max": "1048576\n"}, 768 << 10},
		"nothing":         {nil, math.MaxInt64},
		"meminfo garbled": {map[string]string{"/proc/meminfo": "MemTotal: lots\n"}, math.MaxInt64},
	} {
		if got := defaultMemoryLimit(fakeFiles(tc.files)); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

func TestPlanGC(t *testing.T) {
	files := fakeFiles(map[string]string{"/proc/meminfo": "MemTotal: 1048576 kB\n"})
	env := func(m map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	p := planGC(gcSettings{}, env(nil), files)
	if p.percent != DefaultGCPercent || p.limit != 512<<20 || p.percentSource != "default" {
		t.Errorf("defaults: %+v", p)
	}
	p = planGC(gcSettings{}, env(map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}), files)
	if p.percent != 0 || p.limit != 0 || p.percentSource != "GOGC" || p.limitSource != "GOMEMLIMIT" {
		t.Errorf("GOGC and GOMEMLIMIT are left to the runtime: %+v", p)
	}
	pct, lim := 50, int64(1<<30)
	p = planGC(gcSettings{percent: &pct, limit: &lim}, env(map[string]string{"GOGC": "150", "GOMEMLIMIT": "2GiB"}), files)
	if p.percent != 50 || p.limit != 1<<30 {
		t.Errorf("the flags win over GOGC and GOMEMLIMIT: %+v", p)
	}
	p = planGC(gcSettings{}, env(map[string]string{"GOGC": ""}), files)
	if p.percent != DefaultGCPercent {
		t.Errorf("an empty GOGC counts as unset: %+v", p)
	}
}

// applyGC sets the runtime's values, logs them, and restores the former.
func TestApplyGC(t *testing.T) {
	before, beforeLimit := gcPercent(), debug.SetMemoryLimit(-1)
	var log bytes.Buffer
	pct, lim := 321, int64(3<<30)
	restore := applyGC(gcSettings{percent: &pct, limit: &lim}, func(string) (string, bool) { return "", false },
		slog.New(slog.NewTextHandler(&log, nil)))
	if got, gotLimit := gcPercent(), debug.SetMemoryLimit(-1); got != 321 || gotLimit != 3<<30 {
		t.Errorf("applied: %d %d", got, gotLimit)
	}
	if !strings.Contains(log.String(), "gc_percent=321") || !strings.Contains(log.String(), "memory_limit=3GiB") {
		t.Errorf("log: %s", log.String())
	}
	restore()
	if got, gotLimit := gcPercent(), debug.SetMemoryLimit(-1); got != before || gotLimit != beforeLimit {
		t.Errorf("restored: %d %d, want %d %d", got, gotLimit, before, beforeLimit)
	}
	off := -1
	restore = applyGC(gcSettings{percent: &off}, func(string) (string, bool) { return "", false }, slog.New(slog.DiscardHandler))
	if got := gcPercent(); got != -1 {
		t.Errorf("off: %d", got)
	}
	restore()
}
