package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliResult is what one run of the htq binary did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// cliEnv is the environment of the htq command line in a test: only the
// variables given (besides PATH and HOME), and a working directory of its
// own, so that nothing of the machine's HTQ_… settings or ./htq-data
// leaks in.
type cliEnv struct {
	t   *testing.T
	env []string
	dir string
}

func newCLI(t *testing.T, env ...string) *cliEnv {
	return &cliEnv{t: t, env: env, dir: t.TempDir()}
}

// with returns a copy with more variables.
func (c *cliEnv) with(env ...string) *cliEnv {
	return &cliEnv{t: c.t, env: append(append([]string(nil), c.env...), env...), dir: c.dir}
}

// run runs htq with args and standard input stdin.
func (c *cliEnv) run(stdin string, args ...string) cliResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, htqBin, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.dir}, c.env...)
	cmd.Dir = c.dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		c.t.Fatalf("htq %s: %v", strings.Join(args, " "), err)
	}
	return cliResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// ok runs htq and fails the test unless it exits 0 with nothing on stderr.
func (c *cliEnv) ok(args ...string) string {
	c.t.Helper()
	r := c.run("", args...)
	if r.code != 0 || r.stderr != "" {
		c.t.Fatalf("htq %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// okJSON runs htq with --json and decodes its standard output into out.
func (c *cliEnv) okJSON(out any, args ...string) {
	c.t.Helper()
	data := c.ok(append(args, "--json")...)
	if err := json.Unmarshal([]byte(data), out); err != nil {
		c.t.Fatalf("htq %s --json: not one JSON document: %v\n%s", strings.Join(args, " "), err, data)
	}
}

// fails runs htq and checks that it exits with code, prints nothing on
// stdout and one line on stderr that starts with "htq: " and contains
// each of want.
func (c *cliEnv) fails(code int, want []string, args ...string) string {
	c.t.Helper()
	r := c.run("", args...)
	line := strings.TrimSuffix(r.stderr, "\n")
	if r.code != code || r.stdout != "" || strings.Contains(line, "\n") || !strings.HasPrefix(line, "htq: ") {
		c.t.Errorf("htq %s: exit %d (want %d)\nstdout: %q\nstderr: %q", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
		return line
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			c.t.Errorf("htq %s: stderr %q does not say %q", strings.Join(args, " "), line, w)
		}
	}
	return line
}

// jsonQueue is the part of a queue the tests read.
type jsonQueue struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	Paused   bool   `json:"paused"`
	Settings struct {
		MaxConcurrency int     `json:"max_concurrency"`
		RateLimit      float64 `json:"rate_limit"`
		RateBurst      int     `json:"rate_burst"`
	} `json:"settings"`
	Stats map[string]any `json:"stats"`
}

func (q *jsonQueue) count(state string) int {
	n, _ := q.Stats[state].(float64)
	return int(n)
}

type jsonTask struct {
	ID      string          `json:"id"`
	Queue   string          `json:"queue"`
	Type    string          `json:"type"`
	State   string          `json:"state"`
	Payload json.RawMessage `json:"payload"`
	B64     string          `json:"payload_base64"`
	Retry   int             `json:"max_retry"`
}

// Every command that manages queues and tasks, against a real htq serve
// on each backend: the happy paths, and the failures each gives as an
// exit code and one line on stderr.
func TestCLIQueuesAndTasks(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		p := startBinary(t, broker, "--token", binToken, "--signing-secrets", binSecret)
		cli := newCLI(t, "HTQ_SERVER="+p.base, "HTQ_TOKEN="+binToken)

		// enqueue: a typed task now, one later, one at a time, raw bytes,
		// a payload from standard input, and a URL task that is delivered.
		var now, later, at, raw jsonTask
		cli.okJSON(&now, "enqueue", "mail", "--type", "email", "--payload", `{"to":"ada"}`, "--retry", "3")
		if now.State != "pending" || now.Queue != "mail" || now.ID == "" {
			t.Fatalf("enqueue: %+v", now)
		}
		out := cli.ok("enqueue", "mail", "--type", "email", "--in", "1h", "--id", "later-1")
		if !strings.Contains(out, "enqueued task later-1 into mail: scheduled, due ") {
			t.Errorf("enqueue --in: %q", out)
		}
		cli.okJSON(&later, "task", "inspect", "mail", "later-1")
		cli.okJSON(&at, "enqueue", "mail", "--type", "email", "--at", time.Now().Add(2*time.Hour).Format("2006-01-02 15:04"))
		cli.okJSON(&raw, "enqueue", "mail", "--type", "blob", "--payload", "not json", "--unique", "1h")
		if later.State != "scheduled" || at.State != "scheduled" || raw.State != "pending" {
			t.Errorf("enqueue: %+v %+v %+v", later, at, raw)
		}
		cli.okJSON(&raw, "task", "inspect", "mail", raw.ID)
		if raw.B64 != "bm90IGpzb24=" {
			t.Errorf("bytes payload: %+v", raw)
		}
		if r := cli.run(`{"from":"stdin"}`, "enqueue", "mail", "--type", "email", "--payload", "@-", "--json"); r.code != 0 {
			t.Errorf("--payload @-: %+v", r)
		}
		hits := make(chan *http.Request, 10)
		tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits <- r }))
		defer tg.Close()
		cli.ok("enqueue", "hooks", "--url", tg.URL+"/hook", "--method", "put", "--header", "X-One: 1", "--body", "hello")
		select {
		case r := <-hits:
			if r.Method != "PUT" || r.URL.Path != "/hook" || r.Header.Get("X-One") != "1" {
				t.Errorf("target got %s %s %v", r.Method, r.URL, r.Header)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the URL task was not delivered")
		}

		// queue ls, inspect, pause, resume, settings.
		out = cli.ok("queue", "ls")
		if !strings.Contains(out, "QUEUE") || !strings.Contains(out, "mail") || !strings.Contains(out, "hooks") {
			t.Errorf("queue ls:\n%s", out)
		}
		var list struct{ Queues []jsonQueue }
		cli.okJSON(&list, "queue", "ls")
		if len(list.Queues) != 2 || list.Queues[1].Name != "mail" || list.Queues[1].count("scheduled") != 2 || list.Queues[0].Mode != "real_time" {
			t.Errorf("queue ls --json: %+v", list)
		}
		if out := cli.ok("queue", "inspect", "mail"); !strings.Contains(out, "mode") || !strings.Contains(out, "2 scheduled") {
			t.Errorf("queue inspect:\n%s", out)
		}
		if out := cli.ok("queue", "pause", "mail"); out != "queue mail paused\n" {
			t.Errorf("queue pause: %q", out)
		}
		var q jsonQueue
		cli.okJSON(&q, "queue", "inspect", "mail")
		if !q.Paused {
			t.Error("queue not paused")
		}
		cli.ok("queue", "resume", "mail")
		cli.okJSON(&q, "queue", "settings", "mail", "--max-concurrency", "4", "--rate", "2.5", "--burst", "3")
		cli.okJSON(&q, "queue", "inspect", "mail")
		if q.Paused || q.Settings.MaxConcurrency != 4 || q.Settings.RateLimit != 2.5 || q.Settings.RateBurst != 3 {
			t.Errorf("after resume and settings: %+v", q)
		}
		if out := cli.ok("queue", "settings", "mail"); !strings.Contains(out, "max concurrency 4, rate 2.5/s, burst 3") {
			t.Errorf("queue settings: %q", out)
		}

		// task ls (pages), inspect, run, archive, rm, cancel.
		out = cli.ok("task", "ls", "mail", "--state", "scheduled")
		if !strings.Contains(out, "later-1") || !strings.Contains(out, "DUE") {
			t.Errorf("task ls:\n%s", out)
		}
		r := cli.run("", "task", "ls", "mail", "--state", "scheduled", "--size", "1")
		if r.code != 0 || strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stderr, "--page 2") {
			t.Errorf("task ls --size 1: %+v", r)
		}
		var page struct {
			Tasks    []jsonTask `json:"tasks"`
			NextPage int        `json:"next_page"`
		}
		cli.okJSON(&page, "task", "ls", "mail", "--state", "pending", "--size", "2", "--page", "2")
		if len(page.Tasks) != 1 || page.NextPage != 0 {
			t.Errorf("task ls page 2: %+v", page)
		}
		// Priorities and keys: task ls shows their columns when a task
		// of the page has one, pending tasks in fetch order.
		cli.ok("enqueue", "lanes", "--type", "t", "--id", "plain-1")
		cli.ok("enqueue", "lanes", "--type", "t", "--id", "urgent-1", "--priority", "7")
		cli.ok("enqueue", "lanes", "--type", "t", "--id", "tenant-1", "--key", "acme")
		out = cli.ok("task", "ls", "lanes")
		if lines := strings.Split(out, "\n"); len(lines) < 4 || !strings.Contains(lines[0], "PRIO") || !strings.Contains(lines[0], "KEY") ||
			!strings.HasPrefix(lines[1], "urgent-1") || !strings.HasPrefix(lines[2], "plain-1") || !strings.Contains(lines[3], "acme") {
			t.Errorf("task ls of priorities and keys:\n%s", out)
		}
		if out := cli.ok("queue", "keys", "lanes"); !strings.Contains(out, "KEY") || !strings.Contains(out, "acme") {
			t.Errorf("queue keys:\n%s", out)
		}
		if out := cli.ok("task", "inspect", "lanes", "urgent-1"); !strings.Contains(out, "priority") || !strings.Contains(out, "7") {
			t.Errorf("task inspect of a priority task:\n%s", out)
		}
		if out := cli.ok("task", "ls", "mail", "--state", "scheduled"); strings.Contains(out, "PRIO") || strings.Contains(out, "KEY") {
			t.Errorf("task ls without priorities or keys shows their columns:\n%s", out)
		}
		cli.fails(exitUsage, []string{"not both"}, "enqueue", "lanes", "--type", "t", "--priority", "2", "--key", "acme")
		cli.fails(exitUsage, []string{"Priority(10)"}, "enqueue", "lanes", "--type", "t", "--priority", "10")
		if out := cli.ok("queue", "settings", "lanes", "--key-max-concurrency", "2", "--key-rate", "1.5"); !strings.Contains(out, "per key max concurrency 2, per key rate 1.5/s, burst 1") {
			t.Errorf("queue settings per key: %q", out)
		}
		cli.fails(exitUsage, []string{"key_max_concurrency"}, "queue", "settings", "lanes", "--key-max-concurrency", "-1")
		cli.ok("queue", "rm", "lanes", "--force")
		if out := cli.ok("task", "inspect", "mail", now.ID); !strings.Contains(out, `{"to":"ada"}`) || !strings.Contains(out, "0 of 3") {
			t.Errorf("task inspect:\n%s", out)
		}
		if out := cli.ok("task", "run", "mail", "later-1"); out != "queued to run task later-1 in mail\n" {
			t.Errorf("task run: %q", out)
		}
		cli.ok("task", "archive", "mail", "later-1")
		cli.okJSON(&later, "task", "inspect", "mail", "later-1")
		if later.State != "archived" {
			t.Errorf("after archive: %+v", later)
		}
		cli.ok("task", "rm", "mail", "later-1")
		cli.fails(exitNotFound, []string{"task not found"}, "task", "inspect", "mail", "later-1")
		cli.fails(exitConflict, []string{"only an active task can be canceled"}, "task", "cancel", "mail", now.ID)
		cli.fails(exitConflict, []string{"wrong state"}, "task", "run", "mail", now.ID)

		// Bulk: 25 scheduled tasks archived, run again, deleted; no
		// progress bar when stderr is not a terminal.
		batch := map[string]any{"tasks": func() []any {
			var ts []any
			for i := 0; i < 25; i++ {
				ts = append(ts, map[string]any{"type": "bulk", "payload": i, "options": map[string]any{"delay": "1h"}})
			}
			return ts
		}()}
		p.do(t, binToken, "POST", "/v1/queues/bulk/tasks/batch", batch, http.StatusCreated, nil)
		r = cli.run("", "task", "archive", "bulk", "--state", "scheduled", "--all")
		if r.code != 0 || r.stderr != "" || !strings.HasPrefix(r.stdout, "archived 25 scheduled tasks of bulk") {
			t.Errorf("task archive --all: %+v", r)
		}
		var rep bulkReport
		cli.okJSON(&rep, "task", "run", "bulk", "--state", "archived", "--all")
		if rep != (bulkReport{Queue: "bulk", State: "archived", Action: "run", Count: 25}) {
			t.Errorf("task run --all: %+v", rep)
		}
		cli.okJSON(&rep, "task", "rm", "bulk", "--state", "pending", "--all")
		cli.okJSON(&q, "queue", "inspect", "bulk")
		if rep.Count != 25 || q.count("size") != 0 {
			t.Errorf("task rm --all: %+v; queue %+v", rep, q)
		}

		// Schedules.
		var s struct{ ID, Cron, Queue string }
		cli.okJSON(&s, "schedule", "add", "@every 1h", "reports", "--type", "report", "--payload", `{"k":1}`)
		if s.ID == "" || s.Cron != "@every 1h" {
			t.Fatalf("schedule add: %+v", s)
		}
		if out := cli.ok("schedule", "ls"); !strings.Contains(out, s.ID) || !strings.Contains(out, "report") {
			t.Errorf("schedule ls:\n%s", out)
		}
		cli.ok("schedule", "rm", s.ID)
		cli.fails(exitNotFound, []string{s.ID}, "schedule", "rm", s.ID)
		cli.fails(exitUsage, []string{"cron"}, "schedule", "add", "every day", "reports", "--type", "report")

		// stats, printed once when stdout is not a terminal.
		out = cli.ok("stats")
		if !strings.Contains(out, "PROCESSED") || !strings.Contains(out, "total") || !strings.Contains(out, "hooks") {
			t.Errorf("stats:\n%s", out)
		}
		var st struct {
			Server string
			Queues []jsonQueue
		}
		cli.okJSON(&st, "stats")
		if st.Server != p.base || len(st.Queues) != 4 { // bulk, hooks, mail, reports
			t.Errorf("stats --json: %+v", st)
		}

		// Queue deletion.
		cli.fails(exitConflict, []string{"not empty"}, "queue", "rm", "mail")
		cli.ok("queue", "rm", "mail", "--force")
		cli.fails(exitNotFound, []string{"queue not found", "mail"}, "queue", "inspect", "mail")

		// Failures: wrong or missing token, missing queue, bad flags and
		// arguments, an unreachable server.
		cli.with("HTQ_TOKEN=wrong").fails(exitAuth, []string{"refused the token from HTQ_TOKEN", "htq token show"}, "queue", "ls")
		cli.with("HTQ_TOKEN=").fails(exitAuth, []string{"none was given"}, "queue", "ls")
		cli.fails(exitAuth, []string{"refused the token from --token"}, "task", "ls", "hooks", "--token", "nope")
		cli.fails(exitNotFound, []string{"queue not found"}, "task", "ls", "nope")
		cli.fails(exitNotFound, []string{"queue not found"}, "queue", "pause", "nope")
		cli.fails(exitUsage, []string{"unknown flag: --bogus"}, "queue", "ls", "--bogus")
		cli.fails(exitUsage, []string{`--state "bogus"`}, "task", "ls", "hooks", "--state", "bogus")
		cli.fails(exitUsage, []string{"missing QUEUE"}, "task", "ls")
		cli.fails(exitUsage, []string{"--all needs --state"}, "task", "rm", "hooks", "--all")
		cli.fails(exitUsage, []string{"--state", "one of scheduled, retry, archived"}, "task", "run", "hooks", "--all", "--state", "pending")
		cli.fails(exitUsage, []string{"--url", "--type"}, "enqueue", "mail")
		cli.fails(exitUsage, []string{"not both"}, "enqueue", "mail", "--type", "a", "--url", "http://x")
		cli.fails(exitUsage, []string{"--header"}, "enqueue", "hooks", "--url", tg.URL, "--header", "nocolon")
		cli.fails(exitUsage, []string{"--at"}, "enqueue", "mail", "--type", "a", "--at", "tomorrow")
		cli.fails(exitUsage, []string{"--in"}, "enqueue", "mail", "--type", "a", "--in", "soon")
		cli.fails(exitUsage, []string{"MaxRetry(-2) is negative"}, "enqueue", "mail", "--type", "a", "--retry", "-2")
		cli.fails(exitUsage, []string{"unknown command", "did you mean queue"}, "quue", "ls")
		cli.fails(exitUsage, []string{"--server", "http://"}, "queue", "ls", "--server", "ftp://x")
		closed := "http://" + freeAddr(t)
		cli.fails(exitUnavailable, []string{"cannot reach htq serve at " + closed, "connection refused"}, "queue", "ls", "--server", closed)
		cli.fails(exitNotFound, []string{"queue not found"}, "task", "archive", "nope", "--state", "pending", "--all")
		cli.fails(exitNotFound, []string{"queue not found"}, "group", "ls", "nope")
	})
}

// The token commands on each backend: the token is found without being
// given, shown, rotated with a grace period while htq serve runs, and
// rotated directly in the storage while none runs.
func TestCLIToken(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		p := startBinary(t, broker)
		generated := p.generatedToken(t)
		if generated == "" {
			t.Fatalf("no generated token: %q", p.stdout.String())
		}
		// The command line reads htq serve's settings: HTQ_ADDR gives the
		// server, HTQ_STORAGE the storage, and the storage the token.
		addr := strings.TrimPrefix(p.base, "http://")
		cli := newCLI(t, "HTQ_ADDR="+addr, "HTQ_STORAGE="+broker)
		cli.ok("queue", "ls")
		if tok := strings.TrimSpace(cli.ok("token", "show")); tok != generated {
			t.Fatalf("token show = %q, want %q", tok, generated)
		}

		// Rotation with a grace period, while htq serve runs: through the
		// service on the embedded store, in Redis directly on Redis.
		r := cli.run("", "token", "rotate", "--grace", "1h")
		second := strings.TrimSpace(r.stdout)
		if r.code != 0 || !tokenRE.MatchString(second) || second == generated || !strings.Contains(r.stderr, "accepted until") {
			t.Fatalf("token rotate: %+v", r)
		}
		for _, tok := range []string{generated, second} {
			cli.with("HTQ_TOKEN="+tok).ok("queue", "ls")
		}
		cli.ok("queue", "ls") // finds the new token by itself
		var shown tokenReport
		cli.okJSON(&shown, "token", "show")
		if shown.Token != second {
			t.Errorf("token show after rotation: %+v", shown)
		}

		// Without grace the replaced token stops at once (on Redis, at
		// htq serve's next reload of the set: within 2 s).
		var rotated tokenReport
		cli.okJSON(&rotated, "token", "rotate", "--grace", "0")
		if rotated.PreviousValidUntil != nil || rotated.Token == second {
			t.Errorf("token rotate --grace 0: %+v", rotated)
		}
		cli.with("HTQ_TOKEN="+rotated.Token).ok("queue", "ls")
		deadline := time.Now().Add(5 * time.Second)
		for cli.with("HTQ_TOKEN="+second).run("", "queue", "ls").code != exitAuth {
			if time.Now().After(deadline) {
				t.Fatal("the token replaced without grace is still accepted")
			}
			time.Sleep(100 * time.Millisecond)
		}
		cli.with("HTQ_TOKEN="+second).fails(exitAuth, []string{"refused the token from HTQ_TOKEN"}, "queue", "ls")
		cli.with("HTQ_TOKEN="+generated).ok("queue", "ls") // its hour of grace runs on
		cli.fails(exitUsage, []string{"--grace"}, "token", "rotate", "--grace", "-1s")

		// With --server, through the API with a given token.
		cli.with("HTQ_TOKEN="+rotated.Token).okJSON(&rotated, "token", "rotate", "--server", p.base)
		if rotated.Source != p.base {
			t.Errorf("token rotate --server: %+v", rotated)
		}

		// With htq serve stopped, directly in the storage; the next start
		// takes the new token.
		p.cmd.Process.Signal(os.Interrupt)
		p.wait(t, 15*time.Second)
		if tok := strings.TrimSpace(cli.ok("token", "show")); tok != rotated.Token {
			t.Errorf("token show with htq serve stopped = %q, want %q", tok, rotated.Token)
		}
		r = cli.run("", "token", "rotate", "--grace", "0")
		offline := strings.TrimSpace(r.stdout)
		if r.code != 0 || !tokenRE.MatchString(offline) {
			t.Fatalf("token rotate offline: %+v", r)
		}
		p2 := startBinary(t, broker)
		p2.do(t, offline, "GET", "/v1/queues", nil, http.StatusOK, nil)
		p2.do(t, rotated.Token, "GET", "/v1/queues", nil, http.StatusUnauthorized, nil)

		cli.with("HTQ_STORAGE=file:"+filepath.Join(t.TempDir(), "none")).fails(exitNotFound, []string{"no htq data"}, "token", "show")
		cli.fails(exitUnavailable, []string{"cannot reach the storage"}, "token", "show", "--storage", "redis://"+freeAddr(t)+"/0")
		cli.fails(exitUsage, []string{"mem:"}, "token", "show", "--storage", "mem:")
	})
}

// A service given --token keeps no token file; htq token rotate through
// it is refused, and token show says where the token comes from.
func TestCLITokenConfigured(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := startBinary(t, "file:"+dir, "--token", binToken)
	cli := newCLI(t, "HTQ_SERVER="+p.base, "HTQ_STORAGE=file:"+dir)
	cli.fails(exitUnavailable, []string{"in use", "no readable token file", "--token or HTQ_TOKEN"}, "token", "show")
	cli.with("HTQ_TOKEN="+binToken).fails(exitUsage, []string{"--token or HTQ_TOKEN", "change it there"}, "token", "rotate")
}

// htq --version and htq version print the same line: the module version,
// the Go version and the platform.
func TestCLIVersion(t *testing.T) {
	cli := newCLI(t)
	a, b := cli.ok("--version"), cli.ok("version")
	if a != b || !strings.HasPrefix(a, "htq ") || !strings.Contains(a, " go1.") {
		t.Errorf("--version %q, version %q", a, b)
	}
	cli.fails(exitUsage, []string{"no arguments"}, "version", "extra")
}

// A build from a tagged commit prints the tag and the commit, never just
// "(devel)": the tree is cloned (the worktree's own .git is a file, which
// go build does not stamp) and tagged, and htq is built there.
func TestCLIVersionTagged(t *testing.T) {
	if testing.Short() {
		t.Skip("builds htq from a clone")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "htq")
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "advice.detachedHead=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("", "clone", "-q", "--shared", "--no-checkout", strings.TrimSpace(string(root)), clone)
	git(clone, "checkout", "-q", "HEAD")
	git(clone, "tag", "v1.8.7")
	commit := git(clone, "rev-parse", "HEAD")
	bin := filepath.Join(t.TempDir(), "htq")
	// Without -trimpath the dependencies come from the build cache.
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/htq")
	build.Dir = clone
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	want := fmt.Sprintf("htq v1.8.7 (commit %s) go", commit[:12])
	if err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("--version of a tagged build = %q, %v; want %q…", out, err, want)
	}
}

// The workflow commands against a real htq serve: enqueue from a file and
// from stdin, get, cancel, and the exit codes of a refused workflow and of
// an unknown one.
func TestCLIWorkflow(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		p := startBinary(t, broker, "--token", binToken, "--signing-secrets", binSecret)
		cli := newCLI(t, "HTQ_SERVER="+p.base, "HTQ_TOKEN="+binToken)
		file := filepath.Join(cli.dir, "order.json")
		if err := os.WriteFile(file, []byte(`{"id":"order-42","tasks":[{"id":"charge","queue":"shop","type":"charge"},
			{"id":"mail","queue":"shop","type":"mail","depends_on":["charge"],"on_dependency_failure":"run"}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		out := cli.ok("workflow", "enqueue", file)
		for _, want := range []string{"workflow order-42: running", "charge  shop   order-42.charge  pending", "mail    shop   order-42.mail    waiting", "charge (run)"} {
			if !strings.Contains(out, want) {
				t.Errorf("workflow enqueue printed %q, not %q", out, want)
			}
		}
		var wf struct {
			State string `json:"state"`
			Tasks []struct {
				State   string `json:"state"`
				Outcome string `json:"outcome"`
			} `json:"tasks"`
		}
		cli.okJSON(&wf, "workflow", "get", "order-42")
		if wf.State != "running" || len(wf.Tasks) != 2 || wf.Tasks[1].State != "waiting" {
			t.Errorf("workflow get: %+v", wf)
		}
		if out := cli.ok("workflow", "cancel", "order-42"); out != "workflow order-42 canceled: 2 tasks archived\n" {
			t.Errorf("workflow cancel: %q", out)
		}
		cli.okJSON(&wf, "workflow", "get", "order-42")
		if wf.State != "canceled" || wf.Tasks[0].Outcome != "canceled" {
			t.Errorf("workflow get after cancel: %+v", wf)
		}
		if r := cli.run(`{"tasks":[{"id":"a","queue":"shop","type":"a"}]}`, "workflow", "enqueue", "-", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"state": "pending"`) {
			t.Errorf("workflow enqueue -: %+v", r)
		}
		cycle := filepath.Join(cli.dir, "cycle.json")
		if err := os.WriteFile(cycle, []byte(`{"tasks":[{"id":"a","queue":"shop","type":"t","depends_on":["b"]},{"id":"b","queue":"shop","type":"t","depends_on":["a"]}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		cli.fails(exitUsage, []string{"cycle", `"a" → "b" → "a"`}, "workflow", "enqueue", cycle)
		cli.fails(exitNotFound, []string{"workflow not found"}, "workflow", "get", "nope")
		cli.fails(exitUsage, []string{"no such file"}, "workflow", "enqueue", file+".missing")
		if err := os.WriteFile(cycle, []byte(`[1]`), 0o600); err != nil {
			t.Fatal(err)
		}
		cli.fails(exitUsage, []string{"not a JSON object"}, "workflow", "enqueue", cycle)
	})
}
