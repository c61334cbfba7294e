package api

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
)

// bulkRequest is the body of POST /v1/queues/{queue}/bulk: one action on
// every task of a state (of a group, for aggregating tasks).
type bulkRequest struct {
	Action string `json:"action"`
	State  string `json:"state"`
	Group  string `json:"group"`
}

// bulkResponse says how many tasks the action changed.
type bulkResponse struct {
	Action string `json:"action"`
	State  string `json:"state"`
	Group  string `json:"group,omitempty"`
	Count  int    `json:"count"`
}

// bulkFunc is one of the Inspector's bulk methods, with the group
// argument the aggregating forms take.
type bulkFunc func(i *htq.Inspector, queue, group string) (int, error)

// bulkActions lists, for each action, the states the Inspector offers it
// for: a pair missing here makes no sense (run a pending task, archive an
// archived one, anything on an active task) and is refused.
var bulkActions = map[string]map[base.TaskState]bulkFunc{
	"run": {
		base.StateScheduled:   func(i *htq.Inspector, q, _ string) (int, error) { return i.RunAllScheduledTasks(q) },
		base.StateRetry:       func(i *htq.Inspector, q, _ string) (int, error) { return i.RunAllRetryTasks(q) },
		base.StateArchived:    func(i *htq.Inspector, q, _ string) (int, error) { return i.RunAllArchivedTasks(q) },
		base.StateAggregating: (*htq.Inspector).RunAllAggregatingTasks,
	},
	"archive": {
		base.StatePending:     func(i *htq.Inspector, q, _ string) (int, error) { return i.ArchiveAllPendingTasks(q) },
		base.StateScheduled:   func(i *htq.Inspector, q, _ string) (int, error) { return i.ArchiveAllScheduledTasks(q) },
		base.StateRetry:       func(i *htq.Inspector, q, _ string) (int, error) { return i.ArchiveAllRetryTasks(q) },
		base.StateAggregating: (*htq.Inspector).ArchiveAllAggregatingTasks,
	},
	"delete": {
		base.StatePending:     func(i *htq.Inspector, q, _ string) (int, error) { return i.DeleteAllPendingTasks(q) },
		base.StateScheduled:   func(i *htq.Inspector, q, _ string) (int, error) { return i.DeleteAllScheduledTasks(q) },
		base.StateRetry:       func(i *htq.Inspector, q, _ string) (int, error) { return i.DeleteAllRetryTasks(q) },
		base.StateArchived:    func(i *htq.Inspector, q, _ string) (int, error) { return i.DeleteAllArchivedTasks(q) },
		base.StateCompleted:   func(i *htq.Inspector, q, _ string) (int, error) { return i.DeleteAllCompletedTasks(q) },
		base.StateAggregating: (*htq.Inspector).DeleteAllAggregatingTasks,
	},
}

// bulkStates lists the states an action takes, for error messages.
func bulkStates(action string) string {
	var names []string
	for s := base.StateActive; s <= base.StateAggregating; s++ {
		if _, ok := bulkActions[action][s]; ok {
			names = append(names, s.String())
		}
	}
	return strings.Join(names, ", ")
}

// knownQueue returns the queue the request's path names, or an error
// when the queue does not exist (404) or its name is malformed (400).
func (h *handler) knownQueue(r *http.Request) (string, error) {
	queue := r.PathValue("queue")
	_, _, err := h.lookupQueue(r.Context(), queue)
	return queue, err
}

// bulk: POST /v1/queues/{queue}/bulk runs, archives or deletes every task
// of one state of the queue and answers how many it changed.
func (h *handler) bulk(w http.ResponseWriter, r *http.Request) {
	var req bulkRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	fn, state, err := checkBulk(&req)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	queue, err := h.knownQueue(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	n, err := fn(h.inspector, queue, req.Group)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, bulkResponse{Action: req.Action, State: state.String(), Group: req.Group, Count: n})
}

// checkBulk finds the Inspector method of a bulk request, or says what is
// wrong with it: a malformed request is ErrInvalidArgument (400), an
// action that makes no sense for the state is ErrWrongState (409).
func checkBulk(req *bulkRequest) (bulkFunc, base.TaskState, error) {
	byState, ok := bulkActions[req.Action]
	if !ok {
		return nil, 0, invalid(fmt.Sprintf("action %q: want run, archive or delete", req.Action))
	}
	if req.State == "" {
		return nil, 0, invalid(fmt.Sprintf("state is empty; %s takes %s", req.Action, bulkStates(req.Action)))
	}
	state, err := base.ParseState(req.State)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case state == base.StateAggregating && req.Group == "":
		return nil, 0, invalid("state aggregating needs a group (GET /v1/queues/{queue}/groups lists them)")
	case state != base.StateAggregating && req.Group != "":
		return nil, 0, invalid(fmt.Sprintf("group is only for state aggregating, not %s", state))
	}
	fn, ok := byState[state]
	if !ok {
		why := map[base.TaskState]string{
			base.StateActive:    "active tasks are running; cancel them one by one instead",
			base.StatePending:   "pending tasks are waiting to run already",
			base.StateArchived:  "archived tasks are archived already",
			base.StateCompleted: "completed tasks cannot be " + pastTense(req.Action),
		}[state]
		return nil, 0, fmt.Errorf("%w: cannot %s all %s tasks: %s (%s takes %s)",
			base.ErrWrongState, req.Action, state, why, req.Action, bulkStates(req.Action))
	}
	return fn, state, nil
}

func pastTense(action string) string {
	if action == "run" {
		return "run again"
	}
	return action + "d"
}

// MaxHistoryDays bounds days of GET /v1/queues/{queue}/history (the
// storage keeps 90 days of daily counters).
const MaxHistoryDays = 90

// dayJSON is one day of a queue's history.
type dayJSON struct {
	Date      string `json:"date"` // YYYY-MM-DD, UTC
	Processed int    `json:"processed"`
	Failed    int    `json:"failed"`
}

// history: GET /v1/queues/{queue}/history?days=7 answers the processed and
// failed counts of each of the last days days, today (UTC) first.
func (h *handler) history(w http.ResponseWriter, r *http.Request) {
	days, err := intParam(r.URL.Query().Get("days"), "days", 7, 1, MaxHistoryDays)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	queue, err := h.knownQueue(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	stats, err := h.inspector.History(queue, days)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := struct {
		Queue string    `json:"queue"`
		Days  []dayJSON `json:"days"`
	}{Queue: queue, Days: make([]dayJSON, len(stats))}
	for k, d := range stats {
		out.Days[k] = dayJSON{Date: d.Date.UTC().Format(time.DateOnly), Processed: d.Processed, Failed: d.Failed}
	}
	writeJSON(w, http.StatusOK, out)
}

// seriesResponse is a queue's recent per-minute series.
type seriesResponse struct {
	Queue string `json:"queue"`
	// Since is when this process began sampling: the series holds
	// nothing older.
	Since time.Time `json:"since"`
	// SampleIntervalS is how often the queue is sampled (seconds).
	SampleIntervalS int           `json:"sample_interval_s"`
	Points          []seriesPoint `json:"points"`
}

// series: GET /v1/queues/{queue}/series?minutes=60 answers the queue's
// last minutes, as this process sampled them.
func (h *handler) series(w http.ResponseWriter, r *http.Request) {
	minutes, err := intParam(r.URL.Query().Get("minutes"), "minutes", seriesMinutes, 1, seriesMinutes)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	queue, err := h.knownQueue(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	points, since := h.sampler.series(queue, minutes)
	writeJSON(w, http.StatusOK, seriesResponse{Queue: queue, Since: since.UTC(), SampleIntervalS: int(sampleEvery / time.Second), Points: points})
}

// groupJSON is one group of aggregating tasks.
type groupJSON struct {
	Group string `json:"group"`
	Size  int    `json:"size"`
}

// groups: GET /v1/queues/{queue}/groups lists the queue's groups of
// aggregating tasks with their sizes, by name.
func (h *handler) groups(w http.ResponseWriter, r *http.Request) {
	queue, err := h.knownQueue(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	groups, err := h.inspector.Groups(queue)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := struct {
		Groups []groupJSON `json:"groups"`
	}{Groups: make([]groupJSON, len(groups))}
	for k, g := range groups {
		out.Groups[k] = groupJSON{Group: g.Group, Size: g.Size}
	}
	writeJSON(w, http.StatusOK, out)
}

// serverJSON is a running server: a Go Server, htq serve's URL worker, or
// a pull worker (status "pull").
type serverJSON struct {
	ID             string         `json:"id"`
	Host           string         `json:"host"`
	PID            int            `json:"pid"`
	Concurrency    int            `json:"concurrency"`
	Queues         map[string]int `json:"queues"`
	StrictPriority bool           `json:"strict_priority"`
	Started        time.Time      `json:"started"`
	Status         string         `json:"status"`
	ActiveTasks    []workerJSON   `json:"active_tasks"`
}

// workerJSON is one task a server is running.
type workerJSON struct {
	TaskID  string    `json:"task_id"`
	Queue   string    `json:"queue"`
	Type    string    `json:"type"`
	Started time.Time `json:"started"`
}

// servers: GET /v1/servers lists the live servers and the tasks each runs,
// by ID.
func (h *handler) servers(w http.ResponseWriter, r *http.Request) {
	list, err := h.inspector.Servers()
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	out := struct {
		Servers []serverJSON `json:"servers"`
	}{Servers: make([]serverJSON, len(list))}
	for k, s := range list {
		sj := serverJSON{ID: s.ID, Host: s.Host, PID: s.PID, Concurrency: s.Concurrency, Queues: s.Queues,
			StrictPriority: s.StrictPriority, Started: s.Started.UTC(), Status: s.Status,
			ActiveTasks: make([]workerJSON, len(s.ActiveWorkers))}
		if sj.Queues == nil {
			sj.Queues = map[string]int{}
		}
		for j, t := range s.ActiveWorkers {
			sj.ActiveTasks[j] = workerJSON{TaskID: t.TaskID, Queue: t.Queue, Type: t.Type, Started: t.Started.UTC()}
		}
		out.Servers[k] = sj
	}
	slices.SortFunc(out.Servers, func(a, b serverJSON) int { return cmp.Compare(a.ID, b.ID) })
	writeJSON(w, http.StatusOK, out)
}
