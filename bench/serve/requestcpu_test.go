package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestRequestCPUFloor builds bench/serve/floor, starts it as -backend floor
// does (a real process on a loopback port, no storage) and runs the
// request-cpu scenario against it with a real net/http client: one line
// per kind of request, each marked as the floor's, every request answered
// as htq serve answers it (the refused addTask refused), and the floor's
// CPU counted.
func TestRequestCPUFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the floor")
	}
	bin := filepath.Join(t.TempDir(), "floor")
	build := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "./floor")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./floor: %v\n%s", err, out)
	}
	var out bytes.Buffer
	c := config{floorBin: bin, backend: "floor", scenarios: "request-cpu", client: "raw", run: 2, label: "test",
		nRequestCPU: 500, conns: 4, maxDuration: time.Minute, out: &out}
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	if err := withService(c, 0, func(sv *service) error { return scenarioRequestCPU(c, sv) }); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var l struct {
			Scenario, Impl, Backend, Request string
			Run, N                           int
			CPU                              *float64 `json:"serve_cpu_us_per_unit"`
			Redis                            *float64 `json:"redis_cpu_us_per_unit"`
			Truncated                        bool
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %s: %v", sc.Text(), err)
		}
		if l.Scenario != "serve-request-cpu" || l.Impl != "floor" || l.Backend != "floor" || l.Run != 2 ||
			l.N != 500 || l.Truncated || l.CPU == nil || *l.CPU < 0 || l.Redis != nil {
			t.Errorf("line %s: want the floor's serve-request-cpu line of run 2, 500 requests, its CPU and no Redis", sc.Text())
		}
		kinds = append(kinds, l.Request)
	}
	if got := strings.Join(kinds, ","); got != "v1,addtask,refused" {
		t.Errorf("kinds measured %q, want v1,addtask,refused", got)
	}
}

// TestValidate: -backend floor needs the floor's binary and measures
// request-cpu only; htq's backends need -htq.
func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    config
		want string
	}{
		{config{backend: "floor", scenarios: "request-cpu", client: "raw"}, "needs -floor"},
		{config{backend: "floor", floorBin: "f", scenarios: "enqueue", client: "raw"}, "request-cpu only"},
		{config{backend: "file", scenarios: "request-cpu", client: "raw"}, "-htq is required"},
		{config{backend: "disk", htqBin: "h", client: "raw"}, "want redis, file or floor"},
		{config{backend: "redis", htqBin: "h", client: "curl"}, "want raw or nethttp"},
	} {
		if err := tc.c.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate(%+v) = %v, want an error containing %q", tc.c, err, tc.want)
		}
	}
	if err := (config{backend: "floor", floorBin: "f", scenarios: "request-cpu", client: "raw"}).validate(); err != nil {
		t.Errorf("a floor config: %v", err)
	}
}
