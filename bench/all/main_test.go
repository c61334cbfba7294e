package main

import (
	"encoding/json"
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
	path := filepath.Join(t.TempDir(), "raw.jsonl")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := readLines(path)
	if err != nil {
		t.Fatal(err)
	}
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
