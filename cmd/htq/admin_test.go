package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
)

// eventLine is an event as `htq events --json` prints it.
type eventLine struct {
	ID, Kind, Queue, State string
	TaskID                 string `json:"task_id"`
}

// The commands over the admin routes, against a real htq serve on each
// backend: servers (a pull worker among them), groups, bulk actions by
// state in one call, schedules with their runs and history, and the event
// stream followed, limited and resumed.
func TestCLIAdmin(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		p := startBinary(t, broker, "--token", binToken)
		cli := newCLI(t, "HTQ_SERVER="+p.base, "HTQ_TOKEN="+binToken)

		// Follow the queue "ev" from now on, in another process.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		follow := exec.CommandContext(ctx, htqBin, "events", "--queue", "ev", "--max", "4", "--json")
		follow.Env = []string{"PATH=" + os.Getenv("PATH"), "HTQ_SERVER=" + p.base, "HTQ_TOKEN=" + binToken}
		out, err := follow.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		follow.Stderr = &stderr
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		// The stream follows from the moment it is open: wait for that by
		// sending events until the follower prints the first one.
		lines := make(chan eventLine, 16)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var ev eventLine
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					t.Errorf("htq events --json printed %q: %v", sc.Text(), err)
					continue
				}
				lines <- ev
			}
		}()
		// Four events of "ev" (and one of another queue, not followed):
		// enqueued, paused, resumed, deleted.
		p.do(t, binToken, "POST", "/v1/queues/other/tasks", map[string]any{"type": "x"}, http.StatusCreated, nil)
		var got []eventLine
		deadline := time.After(20 * time.Second)
		sent := 0 // enqueues e0 … e<sent-1> of "ev"
		for ; len(got) == 0; sent++ {
			p.do(t, binToken, "POST", "/v1/queues/ev/tasks", map[string]any{"type": "x", "options": map[string]any{"task_id": "e" + itoa(sent)}}, http.StatusCreated, nil)
			select {
			case ev := <-lines:
				got = append(got, ev)
			case <-time.After(300 * time.Millisecond):
			case <-deadline:
				t.Fatalf("htq events printed nothing: %s", stderr.String())
			}
		}
		cli.ok("queue", "pause", "ev")
		cli.ok("queue", "resume", "ev")
		first := got[0]
		cli.ok("task", "rm", "ev", first.TaskID)
		for ev := range lines {
			got = append(got, ev)
		}
		if err := follow.Wait(); err != nil || stderr.Len() > 0 {
			t.Fatalf("htq events --max 4: %v, stderr %q", err, stderr.String())
		}
		kinds := make([]string, 0, len(got))
		for _, ev := range got {
			if ev.Queue != "ev" || ev.ID == "" {
				t.Errorf("event %+v: want queue ev and an ID", ev)
			}
			kinds = append(kinds, ev.Kind)
		}
		// Enqueues sent before the follower saw the first one may come
		// before the pause; the last three are the queue's and the delete.
		if len(got) != 4 || first.Kind != "enqueued" || first.State != "pending" {
			t.Fatalf("events: %v", kinds)
		}
		// Resume after the first event: what followed it comes from the
		// log at once — the enqueues sent after it while the follower was
		// slow to print (a loaded machine), then pause, resume and delete.
		firstN, err := strconv.Atoi(strings.TrimPrefix(first.TaskID, "e"))
		if err != nil {
			t.Fatalf("first event's task %q", first.TaskID)
		}
		after := sent - 1 - firstN + 3
		r := cli.run("", "events", "--queue", "ev", "--after", first.ID, "--max", itoa(after))
		if r.code != 0 || !strings.HasPrefix(r.stdout, "TIME") || strings.Count(r.stdout, "\n") != after+1 {
			t.Errorf("htq events --after: %+v", r)
		}
		if !strings.Contains(r.stdout, "paused") || strings.Contains(r.stdout, first.ID+"\n") {
			t.Errorf("htq events --after: %q", r.stdout)
		}
		cli.fails(exitUsage, []string{"Last-Event-ID"}, "events", "--after", "no-colon")
		cli.fails(exitUsage, []string{"queue name"}, "events", "--queue", "bad{name")
		cli.with("HTQ_TOKEN=wrong").fails(exitAuth, []string{"refused the token"}, "events")

		// A pull worker that names itself is listed among the servers,
		// with the task it holds.
		p.do(t, binToken, "POST", "/v1/queues/jobs/tasks", map[string]any{"type": "resize", "options": map[string]any{"task_id": "j1"}}, http.StatusCreated, nil)
		p.do(t, binToken, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "worker_id": "worker-7", "count": 3}, http.StatusOK, nil)
		var servers struct {
			Servers []struct {
				ID, Status  string
				Concurrency int
				ActiveTasks []struct {
					TaskID string `json:"task_id"`
					Queue  string
				} `json:"active_tasks"`
			}
		}
		waitFor(t, 10*time.Second, "worker-7 in htq servers", func() bool {
			cli.okJSON(&servers, "servers")
			for _, s := range servers.Servers {
				if s.ID == "worker-7" && s.Status == "pull" && s.Concurrency == 3 && len(s.ActiveTasks) == 1 && s.ActiveTasks[0].TaskID == "j1" {
					return true
				}
			}
			return false
		})
		out2 := cli.ok("servers")
		if !strings.Contains(out2, "worker-7") || !strings.Contains(out2, "pull") || !strings.Contains(out2, "jobs/j1") || !strings.Contains(out2, "1/3") {
			t.Errorf("htq servers:\n%s", out2)
		}

		// Groups: over HTTP a task cannot join one (htq serve runs no
		// aggregator); a Go program on the same Redis can. The embedded
		// store belongs to htq serve, so there the list is empty.
		want := 0
		if strings.HasPrefix(broker, "redis") {
			st, err := htq.Open(broker)
			if err != nil {
				t.Fatal(err)
			}
			c := htq.NewClient(st)
			for range 3 {
				if _, err := c.Enqueue(htq.NewTask("digest", nil), htq.Queue("jobs"), htq.Group("user-42")); err != nil {
					t.Fatal(err)
				}
			}
			st.Close()
			want = 3
		}
		var groups struct {
			Groups []struct {
				Group string
				Size  int
			}
		}
		cli.okJSON(&groups, "group", "ls", "jobs")
		if want > 0 && (len(groups.Groups) != 1 || groups.Groups[0].Group != "user-42" || groups.Groups[0].Size != want) ||
			want == 0 && len(groups.Groups) != 0 {
			t.Errorf("htq group ls --json: %+v", groups)
		}
		if out := cli.ok("group", "ls", "jobs"); !strings.HasPrefix(out, "GROUP") || want > 0 && !strings.Contains(out, "user-42") {
			t.Errorf("htq group ls:\n%s", out)
		}
		if want > 0 {
			var rep bulkReport
			cli.okJSON(&rep, "task", "archive", "jobs", "--state", "aggregating", "--group", "user-42", "--all")
			if rep != (bulkReport{Queue: "jobs", State: "aggregating", Group: "user-42", Action: "archive", Count: 3}) {
				t.Errorf("archive --all of a group: %+v", rep)
			}
		}

		// A schedule ticking every second: its next and last runs, and
		// the tasks it enqueued.
		var s struct{ ID string }
		cli.okJSON(&s, "schedule", "add", "@every 1s", "ticks", "--type", "tick")
		var hist struct {
			History []struct {
				TaskID string `json:"task_id"`
				Error  string
			}
		}
		waitFor(t, 15*time.Second, "a tick in htq schedule history", func() bool {
			cli.okJSON(&hist, "schedule", "history", s.ID)
			return len(hist.History) > 0
		})
		if h := hist.History[0]; h.TaskID == "" || h.Error != "" {
			t.Errorf("schedule history: %+v", hist)
		}
		var tick jsonTask
		cli.okJSON(&tick, "task", "inspect", "ticks", hist.History[0].TaskID)
		if tick.Type != "tick" {
			t.Errorf("the task of the tick: %+v", tick)
		}
		if out := cli.ok("schedule", "ls"); !strings.Contains(out, "NEXT RUN") || !strings.Contains(out, "LAST RUN") || strings.Contains(out, " - ") {
			t.Errorf("schedule ls shows no runs:\n%s", out)
		}
		out2 = cli.ok("schedule", "inspect", s.ID)
		for _, w := range []string{"next run", "last run", "TICK", hist.History[0].TaskID} {
			if !strings.Contains(out2, w) {
				t.Errorf("schedule inspect does not show %q:\n%s", w, out2)
			}
		}
		var insp struct {
			Schedule struct {
				ID        string
				NextRunAt *time.Time `json:"next_run_at"`
			}
			History []any
		}
		cli.okJSON(&insp, "schedule", "inspect", s.ID)
		if insp.Schedule.ID != s.ID || insp.Schedule.NextRunAt == nil || len(insp.History) == 0 {
			t.Errorf("schedule inspect --json: %+v", insp)
		}
		cli.ok("schedule", "rm", s.ID)
		// The history goes with the schedule; the ID stays known while
		// htq serve's scheduler still holds it (it reloads at once, in the
		// background).
		waitFor(t, 10*time.Second, "schedule history of a removed schedule to fail", func() bool {
			return cli.run("", "schedule", "history", s.ID).code == exitNotFound
		})
		cli.fails(exitNotFound, []string{s.ID}, "schedule", "history", s.ID)
		cli.fails(exitNotFound, []string{"not found"}, "schedule", "inspect", s.ID)
	})
}

// waitFor polls cond every 100 ms until it holds or d passes (what it
// waits for is written by htq serve's own loops, which no signal reaches).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
