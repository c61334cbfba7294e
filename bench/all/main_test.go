package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTable runs benchtable's reading and measuring on lines shaped as
// bench/peer, bench/river and bench/serve write them: medians of the runs,
// ratios to the peer of the same run, goals met or not, and a figure with
// no lines shown as not measured.
func TestTable(t *testing.T) {
	raw := strings.Join([]string{
		`{"scenario":"machine","nproc":2}`,
		`{"impl":"htq","scenario":"process","label":"noaof","conc":50,"tasks_per_s":90000,"redis_cpu_s":1.0,"processed":50000,"run":1}`,
		`{"impl":"htq","scenario":"process","label":"noaof","conc":50,"tasks_per_s":70000,"redis_cpu_s":1.0,"processed":50000,"run":2}`,
		`{"impl":"htq","scenario":"process","label":"noaof","conc":50,"tasks_per_s":80000,"redis_cpu_s":1.0,"processed":50000,"run":3}`,
		`{"impl":"asynq","scenario":"process","label":"noaof","conc":50,"tasks_per_s":8000,"redis_cpu_s":2.0,"processed":50000,"run":1}`,
		`{"impl":"htq","scenario":"process","label":"noaof","conc":10,"tasks_per_s":30000}`,
		`{"impl":"asynq","scenario":"process","label":"noaof","conc":10,"tasks_per_s":7500}`,
		`{"impl":"htq-file","scenario":"enqueue","label":"noaof","conc":16,"tasks_per_s":24000}`,
		`{"impl":"river-sqlite","scenario":"enqueue","variant":"conc","tasks_per_s":2400}`,
		`{"scenario":"serve-request-cpu","request":"v1","backend":"redis","serve_cpu_us_per_unit":50}`,
	}, "\n")
	lines := readFixture(t, raw)
	got := map[string]result{}
	for _, r := range measure(rows(), lines) {
		got[r.Group+" | "+r.Figure] = r
	}
	find := func(group, figure string) result {
		t.Helper()
		for k, r := range got {
			if strings.Contains(k, group) && strings.HasSuffix(k, " | "+figure) {
				return r
			}
		}
		t.Fatalf("no row %q in %q", figure, group)
		return result{}
	}

	c50 := find("asynq", "process, concurrency 50")
	if c50.HTQ == nil || *c50.HTQ != 80000 || len(c50.HTQRuns) != 3 || c50.Ratio == nil || *c50.Ratio != 10 || c50.Met == nil || !*c50.Met {
		t.Errorf("process c50: %+v, want the median 80,000 of 3 runs, 10× asynq, goal met", c50)
	}
	if c10 := find("asynq", "process, concurrency 10"); c10.Met == nil || *c10.Met {
		t.Errorf("process c10 at 4× asynq: met %v, want not met (goal 5×)", c10.Met)
	}
	if cpu := find("asynq", "Redis CPU per processed task, concurrency 50"); cpu.HTQ == nil || *cpu.HTQ != 20 || *cpu.PeerValue != 40 {
		t.Errorf("Redis CPU per processed task: %+v, want 20 µs against 40", cpu)
	}
	if emb := find("River", "enqueue, 16 goroutines"); emb.Ratio == nil || *emb.Ratio != 10 || emb.Met == nil || *emb.Met {
		t.Errorf("embedded enqueue c16: %+v, want 10× River and the 50,000/s goal not met", emb)
	}
	if v1 := find("CPU per HTTP request", "POST /v1/queues/{q}/tasks (redis)"); v1.HTQ == nil || *v1.HTQ != 50 || v1.Met == nil || !*v1.Met {
		t.Errorf("/v1 on Redis: %+v, want 50 µs, goal met", v1)
	}
	if mem := find("asynq", "Redis memory per pending 100-byte task"); mem.HTQ != nil || mem.Met != nil {
		t.Errorf("memory without lines: %+v, want not measured and no verdict", mem)
	}

	var b strings.Builder
	writeTable(&b, measure(rows(), lines))
	if !strings.Contains(b.String(), "| process, concurrency 50, tasks/s (higher is better) | 80,000 (3 runs) | asynq 8,000 | 10× | ≥ 10× the peer | yes |") ||
		!strings.Contains(b.String(), "not measured") {
		t.Errorf("table:\n%s", b.String())
	}
	out := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := writeJSONLines(out, measure(rows(), lines)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	rowsOut := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(rowsOut) != len(rows()) {
		t.Fatalf("%d JSON lines, want one per row (%d)", len(rowsOut), len(rows()))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(rowsOut[0]), &first); err != nil || first["figure"] == nil {
		t.Errorf("first JSON line %s: %v", rowsOut[0], err)
	}
}

// TestBadLine: a line that is not JSON is an error naming the file and
// line, not a skipped figure.
func TestBadLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raw.jsonl")
	if err := os.WriteFile(path, []byte("{\"impl\":\"htq\"}\nnot json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readLines(path); err == nil || !strings.Contains(err.Error(), "raw.jsonl:2") {
		t.Errorf("readLines of a bad line: %v, want an error naming raw.jsonl:2", err)
	}
}

// TestRequestRowsBesideTheFloor: each request row of htq serve has the
// floor's median as its peer, its ratio is the median of the repetitions'
// own ratios (not the ratio of the medians), the row below it is the
// median of the repetitions' differences, runs without both figures are
// left out of the pairing, the absolute goal is judged as before, and a
// kind the floor was not measured for keeps its absolute figure.
func TestRequestRowsBesideTheFloor(t *testing.T) {
	req := func(impl, backend, request string, run int, us float64) string {
		return fmt.Sprintf(`{"scenario":"serve-request-cpu","impl":%q,"backend":%q,"request":%q,"run":%d,"serve_cpu_us_per_unit":%g}`, impl, backend, request, run, us)
	}
	raw := strings.Join([]string{
		// run 1..3 by turns: floor, file, redis; run 4 has the floor only.
		req("floor", "floor", "v1", 1, 20), req("htq-serve", "file", "v1", 1, 54), req("htq-serve", "redis", "v1", 1, 50),
		req("floor", "floor", "v1", 2, 40), req("htq-serve", "file", "v1", 2, 73), req("htq-serve", "redis", "v1", 2, 60),
		req("floor", "floor", "v1", 3, 25), req("htq-serve", "file", "v1", 3, 48), req("htq-serve", "redis", "v1", 3, 45),
		req("floor", "floor", "v1", 4, 100),
		req("htq-serve", "file", "refused", 1, 36),
	}, "\n")
	lines := readFixture(t, raw)
	got := map[string]result{}
	for _, r := range measure(rows(), lines) {
		got[r.Figure] = r
	}
	v1 := got["POST /v1/queues/{q}/tasks (file)"]
	// floor 20, 40, 25, 100: median 32.5; htq/floor by run 2.7, 1.825, 1.92.
	if v1.HTQ == nil || *v1.HTQ != 54 || v1.Peer != "floor" || v1.PeerValue == nil || *v1.PeerValue != 32.5 ||
		v1.Ratio == nil || *v1.Ratio != 48.0/25 || !v1.RatioByRun || v1.Met == nil || !*v1.Met {
		t.Errorf("/v1 file: %+v, want 54 µs beside the floor's 32.5, ratio 1.92 (median of the runs' ratios), ≤ 60 met", v1)
	}
	above := got["POST /v1/queues/{q}/tasks (file): htq serve above the floor"]
	// differences by run 34, 33, 23.
	if above.HTQ == nil || *above.HTQ != 33 || len(above.HTQRuns) != 3 || above.Peer != "" || above.Ratio != nil || above.Goal != "" {
		t.Errorf("/v1 file above the floor: %+v, want 33 µs over 3 runs, no peer, no goal", above)
	}
	if r := got["POST /v1/queues/{q}/tasks (redis): htq serve above the floor"]; r.HTQ == nil || *r.HTQ != 20 {
		t.Errorf("/v1 redis above the floor: %+v, want 20 µs (30, 20, 20)", r)
	}
	refused := got["addTask refused at once (target not allowed) (file)"]
	if refused.HTQ == nil || *refused.HTQ != 36 || refused.PeerValue != nil || refused.Ratio != nil {
		t.Errorf("refused without a floor line: %+v, want 36 µs and the floor not measured", refused)
	}
	if r := got["addTask refused at once (target not allowed) (file): htq serve above the floor"]; r.HTQ != nil {
		t.Errorf("refused above the floor without a floor line: %+v, want not measured", r)
	}
	if r := got["HTQ /api/addTask, multipart (redis)"]; r.HTQ != nil || r.Met != nil {
		t.Errorf("addTask without lines: %+v, want not measured and no verdict", r)
	}

	var b strings.Builder
	writeTable(&b, measure(rows(), lines))
	for _, want := range []string{
		"| POST /v1/queues/{q}/tasks (file), µs (lower is better) | 54 (3 runs) | floor 32.5 (4 runs) | 1.92× | ≤ 60 µs | yes |",
		"| POST /v1/queues/{q}/tasks (file): htq serve above the floor, µs (lower is better) | 33 (3 runs) | — | — | — | — |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

// readFixture reads raw JSON lines through a file, as benchtable does.
func readFixture(t *testing.T, raw string) []line {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raw.jsonl")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := readLines(path)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}
