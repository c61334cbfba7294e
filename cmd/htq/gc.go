package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
)

// DefaultGCPercent is the garbage collector's target of `htq serve` when
// neither --gc-percent nor GOGC sets one: the heap may grow to five times
// what is live before a collection, against Go's twice (GOGC=100). A
// request allocates a few kilobytes, so on a small live heap Go's default
// collects every few thousand requests; measured (docs/performance.md,
// "htq serve"), 400 cuts the GC's share of a request from 8-30 µs to 3-14
// for up to five times the live heap instead of twice, the soft memory
// limit bounding it.
const DefaultGCPercent = 400

// gcSettings is the garbage collector's configuration of `htq serve`:
// --gc-percent and --memory-limit as resolved (nil: not set).
type gcSettings struct {
	percent *int   // GOGC's value; -1 is off
	limit   *int64 // bytes; math.MaxInt64 is none
}

// parseGCPercent reads --gc-percent: a whole number of at least 1, or off.
func parseGCPercent(v value) (int, error) {
	s := strings.TrimSpace(v.text)
	if s == "off" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s: %q is not a whole number of at least 1 or off", v.source, v.text)
	}
	return n, nil
}

// sizeUnits are the suffixes of a memory size, GOMEMLIMIT's.
var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// parseMemoryLimit reads --memory-limit: a number of bytes with an
// optional suffix B, KiB, MiB, GiB or TiB (as GOMEMLIMIT takes it), or
// off for none.
func parseMemoryLimit(v value) (int64, error) {
	s := strings.TrimSpace(v.text)
	if s == "off" {
		return math.MaxInt64, nil
	}
	num, shift := s, uint(0)
	for _, u := range sizeUnits {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 1 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%s: %q is not a memory size (write e.g. 512MiB, 2GiB, a number of bytes, or off)", v.source, v.text)
	}
	return n << shift, nil
}

// formatSize writes n bytes in the largest unit that divides it.
func formatSize(n int64) string {
	if n == math.MaxInt64 {
		return "off"
	}
	for _, u := range sizeUnits {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// defaultMemoryLimit is the soft memory limit when neither --memory-limit
// nor GOMEMLIMIT sets one, so that the larger heap DefaultGCPercent lets
// grow stays bounded: three quarters of the process's cgroup limit
// (memory.max) when one is set below the machine's memory (a container,
// where htq serve is mostly alone: its heap at Go's default, twice the
// live heap, would come near the limit about when this one binds), else
// half of the machine's memory (MemTotal; shared with the storage and
// others); none when neither can be read.
func defaultMemoryLimit(readFile func(string) ([]byte, error)) int64 {
	total := memTotal(readFile)
	if data, err := readFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			return n / 4 * 3
		}
	}
	if total <= 0 {
		return math.MaxInt64
	}
	return total / 2
}

// memTotal is /proc/meminfo's MemTotal in bytes (0 if unknown).
func memTotal(readFile func(string) ([]byte, error)) int64 {
	data, err := readFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
		if err != nil || kb <= 0 {
			return 0
		}
		return kb << 10
	}
	return 0
}

// gcPlan is what applyGC sets: each value and where it came from.
type gcPlan struct {
	percent       int // -1: off; 0: left as GOGC set it (--gc-percent is at least 1)
	limit         int64
	percentSource string
	limitSource   string
}

// planGC decides the collector's settings: --gc-percent (flag, variable
// or file) over GOGC over DefaultGCPercent; --memory-limit over
// GOMEMLIMIT over defaultMemoryLimit. A value the runtime already took
// from GOGC or GOMEMLIMIT is left to it (percent or limit 0).
func planGC(s gcSettings, lookupEnv func(string) (string, bool), readFile func(string) ([]byte, error)) gcPlan {
	var p gcPlan
	switch env, ok := lookupEnv("GOGC"); {
	case s.percent != nil:
		p.percent, p.percentSource = *s.percent, "--gc-percent"
	case ok && env != "":
		p.percentSource = "GOGC"
	default:
		p.percent, p.percentSource = DefaultGCPercent, "default"
	}
	switch env, ok := lookupEnv("GOMEMLIMIT"); {
	case s.limit != nil:
		p.limit, p.limitSource = *s.limit, "--memory-limit"
	case ok && env != "":
		p.limitSource = "GOMEMLIMIT"
	default:
		p.limit, p.limitSource = defaultMemoryLimit(readFile), "default"
	}
	return p
}

// applyGC sets the collector's target and soft memory limit as planGC
// decides, logs them, and returns a function that restores the former
// values (serve runs in tests' processes too).
func applyGC(s gcSettings, lookupEnv func(string) (string, bool), logger *slog.Logger) (restore func()) {
	p := planGC(s, lookupEnv, os.ReadFile)
	prevPercent, prevLimit := gcPercent(), debug.SetMemoryLimit(-1) // a negative limit only reads it
	if p.percent != 0 {
		debug.SetGCPercent(p.percent)
	}
	if p.limit != 0 {
		debug.SetMemoryLimit(p.limit)
	}
	shown := "off"
	if n := gcPercent(); n >= 0 {
		shown = strconv.Itoa(n)
	}
	logger.Info("garbage collector", "gc_percent", shown, "gc_percent_from", p.percentSource,
		"memory_limit", formatSize(debug.SetMemoryLimit(-1)), "memory_limit_from", p.limitSource)
	return func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}
}

// gcPercent is the collector's current target (-1: off), read from
// runtime/metrics.
func gcPercent() int {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 100 // not reported by this runtime: Go's default
	}
	if n := int64(sample[0].Value.Uint64()); n >= 0 {
		return int(n)
	}
	return -1 // off: the runtime keeps -1

}
