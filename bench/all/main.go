// Command benchtable turns the raw JSON lines of one `make bench` run
// (bench/all/run.sh: bench/peer's htq, htq-file and asynq lines, bench/river's
// River-on-SQLite lines, bench/serve's request-cpu lines of htq serve and of
// the net/http floor) into one table of medians and ratios, each figure
// beside its peer measured in the same run and beside the goal issue 12 sets
// for it. It prints the table as Markdown and writes one JSON line per row.
//
// htq serve's request rows have the floor (bench/serve/floor, measured by
// turns with htq serve in every repetition) as their peer: their ratio is
// the median of the repetitions' own ratios, and a row below each gives
// htq serve's µs above the floor (the median of the repetitions'
// differences), what htq itself spends per request.
//
//	benchtable -out rows.jsonl -md table.md -note "QUICK, 1 repetition" raw1.jsonl raw2.jsonl …
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// line is one raw JSON line of a benchmark program.
type line map[string]any

func (l line) str(k string) string {
	s, _ := l[k].(string)
	return s
}

func (l line) num(k string) (float64, bool) {
	f, ok := l[k].(float64)
	return f, ok
}

// is reports whether every key of want has that value in l (numbers
// compared as float64).
func (l line) is(want map[string]any) bool {
	for k, v := range want {
		switch v := v.(type) {
		case int:
			if f, ok := l.num(k); !ok || f != float64(v) {
				return false
			}
		default:
			if l[k] != v {
				return false
			}
		}
	}
	return true
}

// pick selects the lines a figure is measured from and reads the figure
// from each.
type pick struct {
	where map[string]any
	value func(line) (float64, bool)
}

func field(k string) func(line) (float64, bool) {
	return func(l line) (float64, bool) { return l.num(k) }
}

// perTask is a CPU field in seconds divided by the tasks a line counts, in µs.
func perTask(cpu, count string) func(line) (float64, bool) {
	return func(l line) (float64, bool) {
		c, ok1 := l.num(cpu)
		n, ok2 := l.num(count)
		if !ok1 || !ok2 || n == 0 {
			return 0, false
		}
		return c * 1e6 / n, true
	}
}

// goal is one of issue 12's targets for a row.
type goal struct {
	text      string
	usesRatio bool // judged on htq / peer, so not without the peer's figure
	met       func(htq, ratio float64) bool
}

func ratioAtLeast(x float64) goal {
	return goal{fmt.Sprintf("≥ %g× the peer", x), true, func(_, r float64) bool { return r >= x }}
}

func ratioAtMost(x float64) goal {
	return goal{fmt.Sprintf("≤ %g× the peer", x), true, func(_, r float64) bool { return r > 0 && r <= x }}
}

func atLeast(x float64, unit string) goal {
	return goal{fmt.Sprintf("≥ %s %s", group3(x), unit), false, func(v, _ float64) bool { return v >= x }}
}

func atMost(x float64, unit string) goal {
	return goal{fmt.Sprintf("≤ %s %s", group3(x), unit), false, func(v, _ float64) bool { return v <= x }}
}

// row is one figure of the table.
type row struct {
	group, figure, unit string
	lowerBetter         bool
	htq, peer           pick
	peerName            string // "" when the row has no peer
	// byRun pairs htq and the peer by repetition (their "run" field): the
	// ratio is the median of the repetitions' ratios.
	byRun bool
	// abovePeer makes the row's figure htq minus the peer of the same
	// repetition (the median of the differences), shown with no peer.
	abovePeer bool
	goals     []goal
}

// rows are the figures of the table, in order.
func rows() []row {
	peerLine := func(impl, scenario string, extra map[string]any) map[string]any {
		w := map[string]any{"impl": impl, "scenario": scenario, "label": "noaof"}
		for k, v := range extra {
			w[k] = v
		}
		return w
	}
	vsAsynq := func(figure, unit, scenario string, extra map[string]any, v func(line) (float64, bool), lower bool, goals ...goal) row {
		return row{group: "htq / asynq, one private redis-server, no persistence (bench/peer)", figure: figure, unit: unit, lowerBetter: lower,
			htq: pick{peerLine("htq", scenario, extra), v}, peer: pick{peerLine("asynq", scenario, extra), v}, peerName: "asynq", goals: goals}
	}
	vsRiver := func(figure, scenario string, extra, river map[string]any, goals ...goal) row {
		river["impl"] = "river-sqlite"
		return row{group: "htq embedded (file:) / River on SQLite, durable (bench/peer htq-file, bench/river)", figure: figure, unit: "tasks/s",
			htq: pick{peerLine("htq-file", scenario, extra), field("tasks_per_s")}, peer: pick{river, field("tasks_per_s")}, peerName: "River SQLite", goals: goals}
	}
	// cpuReq is a request row, its peer the floor of the same requests,
	// and the row of htq serve's µs above the floor.
	cpuReq := func(figure, request, backend string, goals ...goal) []row {
		cpu := field("serve_cpu_us_per_unit")
		r := row{group: "htq serve CPU per HTTP request, net/http at c=32, beside the net/http floor measured by turns in each repetition (bench/serve -scenario request-cpu)",
			figure: figure + " (" + backend + ")", unit: "µs", lowerBetter: true,
			htq:  pick{map[string]any{"scenario": "serve-request-cpu", "request": request, "backend": backend}, cpu},
			peer: pick{map[string]any{"scenario": "serve-request-cpu", "request": request, "impl": "floor"}, cpu}, peerName: "floor", byRun: true, goals: goals}
		above := r
		above.figure, above.abovePeer, above.goals = r.figure+": htq serve above the floor", true, nil
		return []row{r, above}
	}
	rs := []row{
		vsAsynq("enqueue, 1 goroutine", "tasks/s", "enqueue", map[string]any{"conc": 1}, field("tasks_per_s"), false),
		vsAsynq("enqueue, 16 goroutines", "tasks/s", "enqueue", map[string]any{"conc": 16}, field("tasks_per_s"), false),
		vsAsynq("process, concurrency 10", "tasks/s", "process", map[string]any{"conc": 10}, field("tasks_per_s"), false, ratioAtLeast(5)),
		vsAsynq("process, concurrency 50", "tasks/s", "process", map[string]any{"conc": 50}, field("tasks_per_s"), false, ratioAtLeast(10)),
		vsAsynq("start latency p50, 500 tasks/s into an idle server", "ms", "latency", nil, field("p50_ms"), true),
		vsAsynq("Redis memory per pending 100-byte task", "B", "memory", nil, field("bytes_per_task"), true, ratioAtMost(0.6), atMost(376, "B")),
		vsAsynq("Redis CPU per enqueued task, 16 goroutines", "µs", "enqueue", map[string]any{"conc": 16}, perTask("redis_cpu_s", "n"), true),
		vsAsynq("Redis CPU per processed task, concurrency 50", "µs", "process", map[string]any{"conc": 50}, perTask("redis_cpu_s", "processed"), true),
		vsAsynq("Redis calls per enqueued task, 16 goroutines", "calls", "enqueue", map[string]any{"conc": 16}, field("redis_calls_per_task"), true),
		vsAsynq("Redis calls per processed task, concurrency 50", "calls", "process", map[string]any{"conc": 50}, field("redis_calls_per_task"), true),
		vsRiver("enqueue, 1 goroutine", "enqueue", map[string]any{"conc": 1}, map[string]any{"scenario": "enqueue", "variant": "seq"}),
		vsRiver("enqueue, 16 goroutines", "enqueue", map[string]any{"conc": 16}, map[string]any{"scenario": "enqueue", "variant": "conc"}, atLeast(50000, "tasks/s")),
		vsRiver("enqueue in batches of 1,000", "enqueue-batch", nil, map[string]any{"scenario": "enqueue", "variant": "many"}),
		vsRiver("process, concurrency 10", "process", map[string]any{"conc": 10}, map[string]any{"scenario": "process", "workers": 10}),
		vsRiver("process, concurrency 50", "process", map[string]any{"conc": 50}, map[string]any{"scenario": "process", "workers": 50}),
	}
	for _, rr := range [][]row{
		cpuReq("POST /v1/queues/{q}/tasks", "v1", "file", atMost(60, "µs")),
		cpuReq("POST /v1/queues/{q}/tasks", "v1", "redis", atMost(60, "µs")),
		cpuReq("HTQ /api/addTask, multipart", "addtask", "file", atMost(80, "µs")),
		cpuReq("HTQ /api/addTask, multipart", "addtask", "redis", atMost(80, "µs")),
		cpuReq("addTask refused at once (target not allowed)", "refused", "file"),
		cpuReq("addTask refused at once (target not allowed)", "refused", "redis"),
	} {
		rs = append(rs, rr...)
	}
	return rs
}

// result is a row measured: the JSON line benchtable writes for it.
type result struct {
	Group       string    `json:"group"`
	Figure      string    `json:"figure"`
	Unit        string    `json:"unit"`
	Better      string    `json:"better"`
	HTQ         *float64  `json:"htq"`
	HTQRuns     []float64 `json:"htq_runs"`
	Peer        string    `json:"peer,omitempty"`
	PeerValue   *float64  `json:"peer_value,omitempty"`
	PeerRuns    []float64 `json:"peer_runs,omitempty"`
	Ratio       *float64  `json:"ratio_htq_to_peer,omitempty"`
	RatioByRun  bool      `json:"ratio_median_of_runs,omitempty"` // the ratio is the median of the repetitions' ratios
	Goal        string    `json:"goal,omitempty"`
	Met         *bool     `json:"met,omitempty"`
	Time        string    `json:"time"`
	RunNote     string    `json:"run"`
	LoadAvgFrom string    `json:"loadavg_start"`
	LoadAvgTo   string    `json:"loadavg_end"`
}

func main() {
	out := flag.String("out", "", "write one JSON line per row to this file")
	md := flag.String("md", "", "also write the Markdown table to this file")
	note := flag.String("note", "", "what run this is (mode, repetitions), printed above the table")
	loadStart := flag.String("loadavg-start", "", "the load average when the run began (/proc/loadavg's first three fields)")
	flag.Parse()
	if flag.NArg() == 0 {
		fatal(fmt.Errorf("no raw JSON lines files given"))
	}
	var lines []line
	for _, p := range flag.Args() {
		ls, err := readLines(p)
		if err != nil {
			fatal(err)
		}
		lines = append(lines, ls...)
	}
	now := time.Now().UTC()
	results := measure(rows(), lines)
	loadEnd := loadavg()
	for i := range results {
		results[i].Time, results[i].RunNote = now.Format(time.RFC3339), *note
		results[i].LoadAvgFrom, results[i].LoadAvgTo = *loadStart, loadEnd
	}
	var b strings.Builder
	fmt.Fprintf(&b, "make bench, %s UTC: %s; load average %s at the start, %s at the end (each figure the median of its runs)\n\n",
		now.Format("2006-01-02 15:04"), *note, *loadStart, loadEnd)
	writeTable(&b, results)
	fmt.Print(b.String())
	if *md != "" {
		if err := os.WriteFile(*md, []byte(b.String()), 0o644); err != nil {
			fatal(err)
		}
	}
	if *out != "" {
		if err := writeJSONLines(*out, results); err != nil {
			fatal(err)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "benchtable:", err)
	os.Exit(1)
}

func readLines(path string) ([]line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ls []line
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		ls = append(ls, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ls, nil
}

// values are the figures of every line p selects.
func values(p pick, lines []line) []float64 {
	var vs []float64
	for _, l := range lines {
		if !l.is(p.where) {
			continue
		}
		if v, ok := p.value(l); ok {
			vs = append(vs, v)
		}
	}
	sort.Float64s(vs)
	return vs
}

func median(vs []float64) *float64 {
	if len(vs) == 0 {
		return nil
	}
	m := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return &m
}

// byRun is the median of the figures p selects in each repetition (the
// lines' "run" field; lines without one are left out).
func byRun(p pick, lines []line) map[float64]float64 {
	runs := map[float64][]float64{}
	for _, l := range lines {
		run, ok := l.num("run")
		if !ok || !l.is(p.where) {
			continue
		}
		if v, ok := p.value(l); ok {
			runs[run] = append(runs[run], v)
		}
	}
	out := make(map[float64]float64, len(runs))
	for run, vs := range runs {
		sort.Float64s(vs)
		out[run] = *median(vs)
	}
	return out
}

// paired is f(htq, peer) for each repetition that has both, sorted.
func paired(r row, lines []line, f func(htq, peer float64) (float64, bool)) []float64 {
	peers := byRun(r.peer, lines)
	var vs []float64
	for run, h := range byRun(r.htq, lines) {
		if p, ok := peers[run]; ok {
			if v, ok := f(h, p); ok {
				vs = append(vs, v)
			}
		}
	}
	sort.Float64s(vs)
	return vs
}

func measure(rs []row, lines []line) []result {
	out := make([]result, 0, len(rs))
	for _, r := range rs {
		res := result{Group: r.group, Figure: r.figure, Unit: r.unit, Better: "higher"}
		if r.lowerBetter {
			res.Better = "lower"
		}
		if r.abovePeer {
			res.HTQRuns = paired(r, lines, func(h, p float64) (float64, bool) { return h - p, true })
		} else {
			res.HTQRuns = values(r.htq, lines)
		}
		res.HTQ = median(res.HTQRuns)
		if r.peerName != "" && !r.abovePeer {
			res.Peer = r.peerName
			res.PeerRuns = values(r.peer, lines)
			res.PeerValue = median(res.PeerRuns)
			switch {
			case r.byRun:
				res.RatioByRun = true
				res.Ratio = median(paired(r, lines, func(h, p float64) (float64, bool) { return h / p, p != 0 }))
			case res.HTQ != nil && res.PeerValue != nil && *res.PeerValue != 0:
				ratio := *res.HTQ / *res.PeerValue
				res.Ratio = &ratio
			}
		}
		var texts []string
		usesRatio := false
		for _, g := range r.goals {
			texts = append(texts, g.text)
			usesRatio = usesRatio || g.usesRatio
		}
		res.Goal = strings.Join(texts, " and ")
		if len(r.goals) > 0 && res.HTQ != nil && (!usesRatio || res.Ratio != nil) {
			met := true
			ratio := 0.0
			if res.Ratio != nil {
				ratio = *res.Ratio
			}
			for _, g := range r.goals {
				met = met && g.met(*res.HTQ, ratio)
			}
			res.Met = &met
		}
		out = append(out, res)
	}
	return out
}

func writeTable(w io.Writer, rs []result) {
	group := ""
	for _, r := range rs {
		if r.Group != group {
			group = r.Group
			fmt.Fprintf(w, "\n%s\n\n", group)
			fmt.Fprintln(w, "| figure | htq | peer | htq / peer | goal (issue 12) | met |")
			fmt.Fprintln(w, "|---|---:|---:|---:|---|---|")
		}
		better := "higher is better"
		if r.Better == "lower" {
			better = "lower is better"
		}
		peer, ratio := "—", "—"
		if r.Peer != "" {
			peer = r.Peer + " " + cell(r.PeerValue, len(r.PeerRuns))
			if r.Ratio != nil {
				ratio = strconv.FormatFloat(*r.Ratio, 'g', 3, 64) + "×"
			}
		}
		goalText, met := r.Goal, "—"
		if goalText == "" {
			goalText = "—"
		}
		if r.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*r.Met]
		}
		fmt.Fprintf(w, "| %s, %s (%s) | %s | %s | %s | %s | %s |\n", r.Figure, r.Unit, better, cell(r.HTQ, len(r.HTQRuns)), peer, ratio, goalText, met)
	}
}

// cell is a median with the number of runs it is the median of, or
// "not measured".
func cell(v *float64, runs int) string {
	if v == nil {
		return "not measured"
	}
	s := group3(*v)
	if runs > 1 {
		s += fmt.Sprintf(" (%d runs)", runs)
	}
	return s
}

// group3 formats a figure: whole with thousands separators from 100 up,
// three significant digits below.
func group3(f float64) string {
	if math.Abs(f) < 100 {
		return strconv.FormatFloat(f, 'g', 3, 64)
	}
	s := strconv.FormatFloat(math.Round(f), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func writeJSONLines(path string, rs []result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	enc.SetEscapeHTML(false)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	return f.Close()
}

// loadavg is /proc/loadavg's first three fields, or "unknown".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
