package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/model"
	"github.com/htqueue/htq/internal/storage"
	"github.com/jonboulle/clockwork"
)

// enqueueN enqueues n typed tasks into queue with the given options and
// returns their IDs.
func (e *env) enqueueN(queue string, n int, opts map[string]any) []string {
	e.t.Helper()
	ids := make([]string, n)
	for k := range ids {
		var got enqueueResponse
		e.must(http.StatusCreated, "POST", "/v1/queues/"+queue+"/tasks", map[string]any{"type": "work", "options": opts}, &got)
		ids[k] = got.ID
	}
	return ids
}

// enqueueGroup enqueues n tasks into a group of queue through the Go
// library (the HTTP API refuses groups: htq serve runs no aggregator).
func (e *env) enqueueGroup(queue, group string, n int) {
	e.t.Helper()
	c := htq.NewClient(e.st)
	for range n {
		if _, err := c.Enqueue(htq.NewTask("work", nil), htq.Queue(queue), htq.Group(group)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// waitUntil polls cond every 10 ms until it holds or d passes (the state
// it waits for is written by another process's loop, not signalled).
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBulkActions(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		sched := e.enqueueN("jobs", 3, map[string]any{"delay": "1h"})
		e.enqueueN("jobs", 2, nil)
		e.enqueueGroup("jobs", "g1", 2)
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+sched[0]+"/archive", nil, nil)

		var got bulkResponse
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/bulk", map[string]any{"action": "run", "state": "archived"}, &got)
		if got != (bulkResponse{Action: "run", State: "archived", Count: 1}) {
			t.Errorf("run all archived: %+v", got)
		}
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/bulk", map[string]any{"action": "archive", "state": "pending"}, &got)
		if got.Count != 3 {
			t.Errorf("archive all pending: %+v, want 3 (2 + the one run)", got)
		}
		data := e.must(http.StatusOK, "POST", "/v1/queues/jobs/bulk", map[string]any{"action": "run", "state": "aggregating", "group": "g1"}, &got)
		e.conforms("POST", "/v1/queues/{queue}/bulk", 200, data)
		if got != (bulkResponse{Action: "run", State: "aggregating", Group: "g1", Count: 2}) {
			t.Errorf("run all of group g1: %+v", got)
		}
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/bulk", map[string]any{"action": "delete", "state": "scheduled"}, &got)
		if got.Count != 2 {
			t.Errorf("delete all scheduled: %+v", got)
		}
		data = e.must(http.StatusOK, "POST", "/v1/queues/jobs/bulk", map[string]any{"action": "delete", "state": "completed"}, &got)
		e.conforms("POST", "/v1/queues/{queue}/bulk", 200, data)
		if got.Count != 0 {
			t.Errorf("delete all completed: %+v", got)
		}
		info, err := e.insp.GetQueueInfo("jobs")
		if err != nil || info.Archived != 3 || info.Pending != 2 || info.Scheduled != 0 || info.Aggregating != 0 {
			t.Fatalf("queue after the bulk actions: %+v %v", info, err)
		}

		for _, tc := range []struct {
			name, body, code, msg string
			status                int
		}{
			{"unknown action", `{"action":"explode","state":"pending"}`, codeInvalidArgument, "want run, archive or delete", 400},
			{"no state", `{"action":"run"}`, codeInvalidArgument, "run takes scheduled, retry, archived, aggregating", 400},
			{"unknown state", `{"action":"run","state":"done"}`, codeInvalidArgument, "unknown task state", 400},
			{"aggregating without group", `{"action":"delete","state":"aggregating"}`, codeInvalidArgument, "needs a group", 400},
			{"group of another state", `{"action":"delete","state":"pending","group":"g1"}`, codeInvalidArgument, "only for state aggregating", 400},
			{"unknown field", `{"action":"delete","state":"pending","force":true}`, codeInvalidArgument, "unknown field", 400},
			{"run pending", `{"action":"run","state":"pending"}`, codeWrongState, "waiting to run already", 409},
			{"archive archived", `{"action":"archive","state":"archived"}`, codeWrongState, "archived already", 409},
			{"run completed", `{"action":"run","state":"completed"}`, codeWrongState, "cannot be run again", 409},
			{"archive completed", `{"action":"archive","state":"completed"}`, codeWrongState, "cannot be archived", 409},
			{"delete active", `{"action":"delete","state":"active"}`, codeWrongState, "cancel them", 409},
		} {
			status, data := e.call("POST", "/v1/queues/jobs/bulk", tc.body, nil)
			e.conforms("POST", "/v1/queues/{queue}/bulk", status, data)
			if status != tc.status || errCode(data) != tc.code || !strings.Contains(string(data), tc.msg) {
				t.Errorf("%s: %d %s; want %d %s mentioning %q", tc.name, status, data, tc.status, tc.code, tc.msg)
			}
		}
		status, data := e.call("POST", "/v1/queues/nope/bulk", map[string]any{"action": "delete", "state": "pending"}, nil)
		if status != http.StatusNotFound || errCode(data) != codeQueueNotFound {
			t.Errorf("bulk on an unknown queue: %d %s", status, data)
		}
		if info, _ := e.insp.GetQueueInfo("jobs"); info.Archived != 3 || info.Pending != 2 {
			t.Errorf("refused bulk actions changed the queue: %+v", info)
		}
	})
}

func TestHistoryGroupsAndSeries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		e.enqueueN("jobs", 3, nil)
		e.enqueueGroup("jobs", "g1", 2)
		e.enqueueGroup("jobs", "g0", 1)
		var fr fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"jobs"}, "count": 2}, &fr)
		e.must(http.StatusNoContent, "POST", "/v1/queues/jobs/tasks/"+fr.Tasks[0].ID+"/ack", map[string]any{"token": fr.Tasks[0].Token}, nil)
		e.must(http.StatusOK, "POST", "/v1/queues/jobs/tasks/"+fr.Tasks[1].ID+"/fail", map[string]any{"token": fr.Tasks[1].Token, "skip_retry": true}, nil)

		var hist struct {
			Queue string
			Days  []dayJSON
		}
		e.conforms("GET", "/v1/queues/{queue}/history", 200, e.must(http.StatusOK, "GET", "/v1/queues/jobs/history?days=3", nil, &hist))
		today := time.Now().UTC().Format(time.DateOnly)
		if hist.Queue != "jobs" || len(hist.Days) != 3 || hist.Days[0] != (dayJSON{Date: today, Processed: 2, Failed: 1}) ||
			hist.Days[1].Processed != 0 || hist.Days[1].Date != time.Now().UTC().AddDate(0, 0, -1).Format(time.DateOnly) {
			t.Errorf("history %+v", hist)
		}
		if e.must(http.StatusOK, "GET", "/v1/queues/jobs/history", nil, &hist); len(hist.Days) != 7 {
			t.Errorf("default history has %d days, want 7", len(hist.Days))
		}

		var groups struct{ Groups []groupJSON }
		e.conforms("GET", "/v1/queues/{queue}/groups", 200, e.must(http.StatusOK, "GET", "/v1/queues/jobs/groups", nil, &groups))
		if len(groups.Groups) != 2 || groups.Groups[0] != (groupJSON{"g0", 1}) || groups.Groups[1] != (groupJSON{"g1", 2}) {
			t.Errorf("groups %+v", groups)
		}
		var list taskList
		e.must(http.StatusOK, "GET", "/v1/queues/jobs/tasks?state=aggregating&group=g1", nil, &list)
		if len(list.Tasks) != 2 || list.Tasks[0].Group != "g1" || list.Tasks[0].State != "aggregating" {
			t.Errorf("aggregating tasks of g1: %+v", list)
		}

		e.h.sampler.sample()
		var ser seriesResponse
		e.conforms("GET", "/v1/queues/{queue}/series", 200, e.must(http.StatusOK, "GET", "/v1/queues/jobs/series", nil, &ser))
		if ser.Queue != "jobs" || ser.SampleIntervalS != 10 || ser.Since.IsZero() || len(ser.Points) != 1 {
			t.Fatalf("series %+v", ser)
		}
		if p := ser.Points[0]; p.Pending != 1 || p.Archived != 1 || p.Aggregating != 3 || !p.Time.Equal(time.Now().UTC().Truncate(time.Minute)) && !p.Time.Equal(time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)) {
			t.Errorf("series point %+v", p)
		}

		for _, path := range []string{"/v1/queues/jobs/history?days=0", "/v1/queues/jobs/history?days=91", "/v1/queues/jobs/history?days=x",
			"/v1/queues/jobs/series?minutes=61", "/v1/queues/jobs/series?minutes=0"} {
			if status, data := e.call("GET", path, nil, nil); status != http.StatusBadRequest || errCode(data) != codeInvalidArgument {
				t.Errorf("GET %s: %d %s", path, status, data)
			}
		}
		for _, path := range []string{"/v1/queues/nope/history", "/v1/queues/nope/series", "/v1/queues/nope/groups"} {
			if status, data := e.call("GET", path, nil, nil); status != http.StatusNotFound || errCode(data) != codeQueueNotFound {
				t.Errorf("GET %s: %d %s", path, status, data)
			}
		}
	})
}

// TestSeriesPerMinute drives the sampler with a fake clock over an
// in-memory storage: per-minute counts are the differences of the
// all-time counters, sizes the minute's last sample, and minutes without
// a sample are left out.
func TestSeriesPerMinute(t *testing.T) {
	st, err := htq.Open("mem:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC))
	s := newSampler(clock, htq.NewInspector(st), discardLogger())
	client := htq.NewClient(st)
	b := storage.BrokerOf(st)
	process := func(n int) {
		leases, err := b.Fetch(context.Background(), broker.FetchParams{Queue: "q", Max: n, LeaseDuration: time.Minute, ServerID: "s"})
		if err != nil || len(leases) != n {
			t.Fatalf("Fetch: %d leases, %v; want %d", len(leases), err, n)
		}
		refs := make([]broker.LeaseRef, n)
		for k, l := range leases {
			refs[k] = l.Ref()
		}
		for _, err := range b.Complete(context.Background(), refs) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue := func(n int) {
		for range n {
			if _, err := client.Enqueue(htq.NewTask("t", nil), htq.Queue("q")); err != nil {
				t.Fatal(err)
			}
		}
	}
	enqueue(5)
	s.sample() // 10:00:05: 5 pending, nothing processed
	process(2)
	clock.Advance(30 * time.Second)
	s.sample() // 10:00:35: 3 pending, 2 processed this minute
	clock.Advance(40 * time.Second)
	process(3)
	enqueue(1)
	s.sample() // 10:01:15: 1 pending, 3 processed this minute
	clock.Advance(3 * time.Minute)
	s.sample() // 10:04:15: nothing new; 10:02 and 10:03 have no sample

	points, since := s.series("q", 60)
	if !since.Equal(time.Date(2026, 11, 29, 10, 0, 5, 0, time.UTC)) {
		t.Errorf("since %v", since)
	}
	want := []seriesPoint{
		{Time: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), Processed: 2, Pending: 3, Completed: 0},
		{Time: time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC), Processed: 3, Pending: 1},
		{Time: time.Date(2026, 11, 29, 10, 4, 0, 0, time.UTC), Processed: 0, Pending: 1},
	}
	if fmt.Sprint(points) != fmt.Sprint(want) {
		t.Errorf("series\n got %+v\nwant %+v", points, want)
	}
	if points, _ := s.series("q", 1); len(points) != 1 || !points[0].Time.Equal(want[2].Time) {
		t.Errorf("last minute only: %+v", points)
	}
	// An hour later the old minutes have left the ring; a queue that is
	// gone is forgotten.
	clock.Advance(time.Hour)
	if err := htq.NewInspector(st).DeleteQueue("q", true); err != nil {
		t.Fatal(err)
	}
	s.sample()
	if points, _ := s.series("q", 60); len(points) != 0 {
		t.Errorf("series of a deleted queue: %+v", points)
	}
}

func TestServers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		started, release := make(chan string, 1), make(chan struct{})
		srv := htq.NewServer(e.st, htq.Config{Concurrency: 2, Queues: map[string]int{"goq": 3}, LeaseDuration: 900 * time.Millisecond, Logger: discardLogger()})
		if err := srv.Start(htq.HandlerFunc(func(ctx context.Context, task *htq.Task) error {
			started <- task.Type()
			<-release
			return nil
		})); err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
		defer close(release)
		var got enqueueResponse
		e.must(http.StatusCreated, "POST", "/v1/queues/goq/tasks", map[string]any{"type": "slow"}, &got)
		<-started

		// A pull worker that names itself is listed with the tasks it holds.
		e.enqueueN("pullq", 2, nil)
		var fr fetchResponse
		e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"pullq", "other"}, "count": 2, "worker_id": "worker-7"}, &fr)
		e.h.workers.flush(context.Background())

		var list struct{ Servers []serverJSON }
		// The Go Server's heartbeat (every 300 ms) adds its running task.
		waitUntil(t, 5*time.Second, "the Go server's running task", func() bool {
			e.must(http.StatusOK, "GET", "/v1/servers", nil, &list)
			for _, s := range list.Servers {
				if s.Status == "active" && len(s.ActiveTasks) == 1 && s.ActiveTasks[0].TaskID == got.ID {
					return true
				}
			}
			return false
		})
		e.conforms("GET", "/v1/servers", 200, e.must(http.StatusOK, "GET", "/v1/servers", nil, &list))
		if len(list.Servers) != 2 {
			t.Fatalf("servers %+v", list.Servers)
		}
		for _, s := range list.Servers {
			switch s.Status {
			case "active":
				if s.Queues["goq"] != 3 || s.Concurrency != 2 || s.PID == 0 || s.ActiveTasks[0].Type != "slow" || s.ActiveTasks[0].Queue != "goq" {
					t.Errorf("Go server %+v", s)
				}
			case "pull":
				if s.ID != "worker-7" || s.Host != "127.0.0.1" || s.Concurrency != 2 || len(s.Queues) != 2 || len(s.ActiveTasks) != 2 ||
					s.ActiveTasks[0].Queue != "pullq" || s.ActiveTasks[0].Type != "work" {
					t.Errorf("pull worker %+v", s)
				}
			default:
				t.Errorf("server of status %q: %+v", s.Status, s)
			}
		}
		// Acked and failed tasks leave the worker's record.
		e.must(http.StatusNoContent, "POST", "/v1/queues/pullq/tasks/"+fr.Tasks[0].ID+"/ack", map[string]any{"token": fr.Tasks[0].Token}, nil)
		e.must(http.StatusOK, "POST", "/v1/queues/pullq/tasks/"+fr.Tasks[1].ID+"/heartbeat", map[string]any{"token": fr.Tasks[1].Token}, nil)
		e.h.workers.flush(context.Background())
		e.must(http.StatusOK, "GET", "/v1/servers", nil, &list)
		for _, s := range list.Servers {
			if s.ID == "worker-7" && (len(s.ActiveTasks) != 1 || s.ActiveTasks[0].TaskID != fr.Tasks[1].ID) {
				t.Errorf("pull worker after an ack: %+v", s)
			}
		}
		e.must(http.StatusOK, "POST", "/v1/queues/pullq/tasks/"+fr.Tasks[1].ID+"/fail", map[string]any{"token": fr.Tasks[1].Token}, nil)
		e.h.workers.flush(context.Background())
		e.must(http.StatusOK, "GET", "/v1/servers", nil, &list)
		for _, s := range list.Servers {
			if s.ID == "worker-7" && len(s.ActiveTasks) != 0 {
				t.Errorf("pull worker after a fail: %+v", s)
			}
		}
		for _, id := range []string{strings.Repeat("w", 129), "a b", "a/b", "tab\t"} {
			body, _ := json.Marshal(map[string]any{"queues": []string{"pullq"}, "worker_id": id})
			if status, data := e.call("POST", "/v1/fetch", body, nil); status != http.StatusBadRequest || errCode(data) != codeInvalidArgument {
				t.Errorf("worker_id %q: %d %s", id, status, data)
			}
		}
	})
}

// TestPullWorkerPresenceExpires: a worker that stops calling is dropped
// after workerTTL, and a task whose lease ran out leaves its record.
func TestPullWorkerPresenceExpires(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := newEnv(t, "embedded", func(o *Options) { o.clock = clock })
	e.enqueueN("pullq", 1, nil)
	var fr fetchResponse
	e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"pullq"}, "worker_id": "w1", "lease_s": 5}, &fr)
	// Leases are timed by the process clock; the fake one is far behind.
	e.h.workers.mu.Lock()
	for _, held := range e.h.workers.m["w1"].tasks {
		held.until = clock.Now().Add(5 * time.Second)
	}
	e.h.workers.mu.Unlock()
	servers := func() []*htq.ServerInfo {
		e.h.workers.flush(context.Background())
		list, err := e.insp.Servers()
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	if list := servers(); len(list) != 1 || len(list[0].ActiveWorkers) != 1 {
		t.Fatalf("servers after the fetch: %+v", list)
	}
	clock.Advance(6 * time.Second)
	if list := servers(); len(list) != 1 || len(list[0].ActiveWorkers) != 0 {
		t.Fatalf("servers after the lease ran out: %+v", list)
	}
	clock.Advance(workerTTL)
	servers()
	e.h.workers.mu.Lock()
	n := len(e.h.workers.m)
	e.h.workers.mu.Unlock()
	if n != 0 {
		t.Errorf("%d workers remembered after %v of silence", n, workerTTL)
	}
}

func TestScheduleRunsAndHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var s model.Schedule
		e.must(http.StatusCreated, "POST", "/v1/schedules", map[string]any{"cron": "@every 1s", "queue": "reports",
			"task": map[string]any{"type": "report", "payload": map[string]any{"k": 1}}}, &s)
		var sj model.ScheduleView
		e.must(http.StatusOK, "GET", "/v1/schedules/"+s.ID, nil, &sj)
		if sj.ID != s.ID || sj.NextRunAt != nil || sj.PrevRunAt != nil {
			t.Errorf("schedule before any scheduler holds it: %+v", sj)
		}
		// The service's scheduler would hold it; here a Scheduler of our own.
		fired := make(chan string, 10)
		sched := htq.NewScheduler(e.st, &htq.SchedulerOpts{Logger: discardLogger(), PostEnqueueFunc: func(info *htq.TaskInfo, err error) {
			if err == nil {
				fired <- info.ID
			}
		}})
		task, opts, err := s.Build()
		if err != nil {
			t.Fatal(err)
		}
		if id, err := sched.Register(s.Cron, task, opts...); err != nil || id != s.ID {
			t.Fatalf("Register = %s, %v; want %s", id, err, s.ID)
		}
		if err := sched.Start(); err != nil {
			t.Fatal(err)
		}
		defer sched.Shutdown()
		first, second := <-fired, <-fired // the entries were written after the first

		e.conforms("GET", "/v1/schedules/{id}", 200, e.must(http.StatusOK, "GET", "/v1/schedules/"+s.ID, nil, &sj))
		if sj.NextRunAt == nil || sj.PrevRunAt == nil || !sj.NextRunAt.After(*sj.PrevRunAt) {
			t.Errorf("schedule with a scheduler: next %v prev %v", sj.NextRunAt, sj.PrevRunAt)
		}
		var all struct{ Schedules []model.ScheduleView }
		if e.must(http.StatusOK, "GET", "/v1/schedules", nil, &all); len(all.Schedules) != 1 || all.Schedules[0].NextRunAt == nil {
			t.Errorf("schedules %+v", all)
		}
		var entries struct{ Entries []entryJSON }
		e.conforms("GET", "/v1/scheduler-entries", 200, e.must(http.StatusOK, "GET", "/v1/scheduler-entries", nil, &entries))
		if len(entries.Entries) != 1 || entries.Entries[0].ID != s.ID || entries.Entries[0].Spec != "@every 1s" ||
			entries.Entries[0].Type != "report" || string(entries.Entries[0].Payload) != `{"k":1}` || entries.Entries[0].SchedulerID == "" {
			t.Errorf("scheduler entries %+v", entries)
		}
		var hist struct{ History []enqueueJSON }
		e.conforms("GET", "/v1/schedules/{id}/history", 200, e.must(http.StatusOK, "GET", "/v1/schedules/"+s.ID+"/history", nil, &hist))
		if len(hist.History) < 2 || hist.History[0].TaskID == first || hist.History[1].TaskID != first && hist.History[0].TaskID != second ||
			!hist.History[0].Tick.After(hist.History[1].Tick) {
			t.Errorf("history %+v (enqueued %s then %s)", hist, first, second)
		}
		for _, path := range []string{"/v1/schedules/nope/history"} {
			if status, data := e.call("GET", path, nil, nil); status != http.StatusNotFound || errCode(data) != codeNotFound {
				t.Errorf("GET %s: %d %s", path, status, data)
			}
		}
		// Deleting the schedule deletes its history.
		sched.Shutdown()
		e.must(http.StatusNoContent, "DELETE", "/v1/schedules/"+s.ID, nil, nil)
		if status, _ := e.call("GET", "/v1/schedules/"+s.ID+"/history", nil, nil); status != http.StatusNotFound {
			t.Errorf("history of a deleted schedule: %d", status)
		}
		if events, err := e.insp.ListSchedulerEnqueueEvents(s.ID); err != nil || len(events) != 0 {
			t.Errorf("history left after the delete: %v %v", events, err)
		}
	})
}

// TestGoSchedulerHistory: the history of a Go program's scheduler entry
// (not stored through the API) stays readable after its scheduler stops.
func TestGoSchedulerHistory(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		fired := make(chan string, 10)
		sched := htq.NewScheduler(e.st, &htq.SchedulerOpts{Logger: discardLogger(), PostEnqueueFunc: func(info *htq.TaskInfo, err error) {
			if err == nil {
				fired <- info.ID
			}
		}})
		id, err := sched.Register("@every 1s", htq.NewTask("tick", nil), htq.Queue("cron"))
		if err != nil {
			t.Fatal(err)
		}
		if err := sched.Start(); err != nil {
			t.Fatal(err)
		}
		task := <-fired
		sched.Shutdown()
		var hist struct{ History []enqueueJSON }
		e.must(http.StatusOK, "GET", "/v1/schedules/"+id+"/history", nil, &hist)
		if len(hist.History) == 0 || hist.History[len(hist.History)-1].TaskID != task {
			t.Errorf("history %+v, want it to end with %s", hist, task)
		}
		if status, data := e.call("GET", "/v1/schedules/"+id, nil, nil); status != http.StatusNotFound || errCode(data) != codeNotFound {
			t.Errorf("GET of an entry that is not a stored schedule: %d %s", status, data)
		}
	})
}
