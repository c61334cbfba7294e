package main

import (
	"fmt"
	"io"
	"runtime"
	"sort"
	"strings"
)

// printSummary prints Markdown tables: medians over runs, and for EVALSHA the
// median over runs of each mode's ratio to plain go-redis in the same run at
// the same concurrency.
func printSummary(w io.Writer, recs []record, o options) {
	fmt.Fprintf(w, "Median of %d runs, %v windows, GOMAXPROCS %d, %s.\n\n", o.runs, o.dur, runtime.GOMAXPROCS(0), runtime.Version())

	type key struct {
		mode string
		conc int
	}
	byKey := map[key][]record{}
	byRun := map[[2]int]map[string]record{} // (run, conc) -> mode -> record
	for _, r := range recs {
		if r.Scenario != "evalsha" {
			continue
		}
		k := key{r.Mode, r.Conc}
		byKey[k] = append(byKey[k], r)
		rk := [2]int{r.Run, r.Conc}
		if byRun[rk] == nil {
			byRun[rk] = map[string]record{}
		}
		byRun[rk][r.Mode] = r
	}
	ratio := func(mode string, conc int) float64 {
		var v []float64
		for rk, m := range byRun {
			if rk[1] != conc {
				continue
			}
			a, okA := m[mode]
			b, okB := m["go-redis"]
			if okA && okB && b.OpsPerS > 0 {
				v = append(v, a.OpsPerS/b.OpsPerS)
			}
		}
		return median(v)
	}
	field := func(mode string, conc int, f func(record) float64) float64 {
		var v []float64
		for _, r := range byKey[key{mode, conc}] {
			v = append(v, f(r))
		}
		return median(v)
	}

	hdr := "| mode |"
	sep := "|---|"
	for _, c := range o.concs {
		hdr += fmt.Sprintf(" %d goroutine(s) |", c)
		sep += "---:|"
	}
	fmt.Fprintln(w, "EVALSHA (HSET + RPUSH + LPOP, 100-byte argument), script executions per second; in brackets the ratio to plain go-redis measured in the same run:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, hdr)
	fmt.Fprintln(w, sep)
	for _, m := range o.modes {
		line := "| " + m + " |"
		for _, c := range o.concs {
			line += fmt.Sprintf(" %s (%.2f) |", num(field(m, c, func(r record) float64 { return r.OpsPerS })), ratio(m, c))
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "CPU per script execution, microseconds: client process (getrusage) / redis-server (INFO cpu):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, hdr)
	fmt.Fprintln(w, sep)
	for _, m := range o.modes {
		line := "| " + m + " |"
		for _, c := range o.concs {
			line += fmt.Sprintf(" %.1f / %.1f |",
				field(m, c, func(r record) float64 { return r.ClientCPUus }),
				field(m, c, func(r record) float64 { return r.RedisCPUus }))
		}
		fmt.Fprintln(w, line)
	}

	fmt.Fprintln(w)
	fmt.Fprintln(w, "Pub/sub, one subscription per client; the publishers are the same for every subscriber:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subscriber | latency p50 / p99, ms | intake, messages/s | subscriber CPU per message, us |")
	fmt.Fprintln(w, "|---|---:|---:|---:|")
	for _, s := range subscribers {
		var p50, p99, rate, cpu []float64
		for _, r := range recs {
			if r.Mode != s.name {
				continue
			}
			switch r.Scenario {
			case "pubsub-latency":
				p50, p99 = append(p50, r.P50ms), append(p99, r.P99ms)
			case "pubsub-intake":
				rate, cpu = append(rate, r.OpsPerS), append(cpu, r.ClientCPUus)
			}
		}
		if len(p50) == 0 {
			continue
		}
		fmt.Fprintf(w, "| %s | %.3f / %.3f | %s | %.2f |\n", s.name, median(p50), median(p99), num(median(rate)), median(cpu))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Modes:")
	for _, m := range modes {
		fmt.Fprintf(w, "- %s: %s\n", m.name, m.desc)
	}
	for _, s := range subscribers {
		fmt.Fprintf(w, "- pub/sub %s: %s\n", s.name, s.desc)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// num formats with thousands separators.
func num(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
