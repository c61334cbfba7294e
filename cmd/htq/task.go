package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/spf13/cobra"
)

// taskStates lists the states `htq task ls --state` takes.
var taskStates = []string{"pending", "active", "scheduled", "retry", "archived", "completed", "aggregating"}

// taskVerb is a command that acts on tasks: its name, what the API calls
// the action, the past tense for reports, and the states --all applies to
// (none: no --all).
type taskVerb struct {
	name   string
	action apiclient.TaskAction
	done   string
	short  string
	states []string
}

var taskVerbs = []taskVerb{
	{"run", apiclient.ActionRun, "queued to run", "Run a scheduled, retry, archived or aggregating task now (it becomes pending)",
		[]string{"scheduled", "retry", "archived", "aggregating"}},
	{"archive", apiclient.ActionArchive, "archived", "Archive a task that is not running (it stays, without running, until deleted or run)",
		[]string{"pending", "scheduled", "retry", "aggregating"}},
	{"rm", apiclient.ActionDelete, "deleted", "Delete a task that is not running",
		[]string{"pending", "scheduled", "retry", "archived", "completed", "aggregating"}},
	{"cancel", apiclient.ActionCancel, "asked to cancel", "Ask whoever runs an active task to stop it (the worker decides its outcome)", nil},
}

func newTaskCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "task",
		Short: "List, inspect, run, archive, delete and cancel tasks",
		Example: `  htq task ls mail --state retry
  htq task inspect mail 1b0e4c4e-…
  htq task run mail --state archived --all`,
	}
	makeGroup(cmd)
	cmd.AddCommand(newTaskLsCmd(r), newTaskInspectCmd(r))
	for _, v := range taskVerbs {
		cmd.AddCommand(newTaskActCmd(r, v))
	}
	return cmd
}

// stateFlag checks a --state value against the states allowed.
func stateFlag(state string, allowed []string) error {
	if !slices.Contains(allowed, state) {
		return usagef("--state %q: want one of %s", state, strings.Join(allowed, ", "))
	}
	return nil
}

func newTaskLsCmd(r *remote) *cobra.Command {
	var state, group string
	var page, size int
	cmd := &cobra.Command{
		Use:     "ls QUEUE",
		Aliases: []string{"list"},
		Short:   "List a queue's tasks in one state, a page at a time",
		Example: "  htq task ls mail\n  htq task ls mail --state retry --size 100 --page 2\n  htq task ls digest --state aggregating --group user-42",
		Args:    wantArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := stateFlag(state, taskStates); err != nil {
				return err
			}
			if state == "aggregating" && group == "" {
				return usagef("--state aggregating needs --group (htq group ls %s lists them)", args[0])
			}
			if page < 1 {
				return usagef("--page %d: pages count from 1", page)
			}
			if size < 1 || size > 1000 {
				return usagef("--size %d: want 1 to 1000", size)
			}
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				list, err := c.Tasks(ctx, args[0], apiclient.ListQuery{State: state, Group: group, Page: page, PageSize: size})
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.stdout, list)
				}
				if err := taskTable(r.stdout, state, list.Tasks); err != nil {
					return err
				}
				if list.NextPage > 0 {
					fmt.Fprintf(r.stderr, "more: htq task ls %s --state %s --size %d --page %d\n", args[0], state, size, list.NextPage)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&state, "state", "pending", "tasks in this state: "+strings.Join(taskStates, ", "))
	cmd.Flags().StringVar(&group, "group", "", "the group, for --state aggregating")
	cmd.Flags().IntVar(&page, "page", 1, "page number, from 1")
	cmd.Flags().IntVar(&size, "size", 30, "tasks per page (1 to 1000)")
	return cmd
}

// taskTable writes one row per task; the time column is what matters in
// the state listed.
func taskTable(w io.Writer, state string, tasks []*apiclient.Task) error {
	col := map[string]string{"completed": "COMPLETED", "archived": "FAILED AT", "active": "STARTED"}[state]
	if col == "" {
		col = "DUE"
	}
	// The PRIO and KEY columns appear when a task of the page has one.
	var prio, key bool
	for _, task := range tasks {
		prio = prio || task.Priority != 0
		key = key || task.Key != ""
	}
	head := []string{"ID", "TYPE"}
	if prio {
		head = append(head, "PRIO")
	}
	if key {
		head = append(head, "KEY")
	}
	t := newTable(w, append(head, "RETRIED", col, "LAST ERROR")...)
	for _, task := range tasks {
		at := task.NextProcessAt
		switch state {
		case "completed":
			at = task.CompletedAt
		case "archived":
			at = task.LastFailedAt
		case "active":
			at = nil
		}
		cells := []string{task.ID, task.Type}
		if prio {
			cells = append(cells, strconv.Itoa(task.Priority))
		}
		if key {
			cells = append(cells, clip(task.Key, 40))
		}
		t.row(append(cells, fmt.Sprintf("%d/%d", task.Retried, task.MaxRetry), when(at), clip(task.LastError, 60))...)
	}
	return t.flush()
}

// clip shortens s to n runes.
func clip(s string, n int) string {
	if s == "" {
		return "-"
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func newTaskInspectCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:     "inspect QUEUE ID",
		Short:   "Show one task: state, payload, retries, last error, result",
		Example: "  htq task inspect mail 1b0e4c4e-7c1f-4c2e-9d1a-3f2b8e0c5a77",
		Args:    wantArgs("QUEUE", "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				task, err := c.Task(ctx, args[0], args[1])
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.stdout, task)
				}
				return printTask(r.stdout, task)
			})
		},
	}
}

// printTask writes one task as name-value lines; empty fields are left
// out.
func printTask(w io.Writer, task *apiclient.Task) error {
	t := newTable(w)
	opt := func(name, value string) {
		if value != "" && value != "-" {
			t.row(name, value)
		}
	}
	t.row("id", task.ID)
	t.row("queue", task.Queue)
	t.row("type", task.Type)
	t.row("state", task.State)
	opt("payload", bytesText(task.Payload, task.PayloadBase64))
	t.row("retried", fmt.Sprintf("%d of %d", task.Retried, task.MaxRetry))
	opt("last error", task.LastError)
	opt("last failed", when(task.LastFailedAt))
	opt("next run", when(task.NextProcessAt))
	opt("timeout", ms(task.TimeoutMS))
	opt("deadline", when(task.Deadline))
	opt("group", task.Group)
	if task.Priority != 0 {
		t.row("priority", strconv.Itoa(task.Priority))
	}
	opt("key", task.Key)
	if task.Workflow != "" {
		t.row("workflow", task.Workflow+" (task "+task.WorkflowTask+")")
	}
	if task.IsOrphaned {
		t.row("orphaned", "yes: its worker stopped renewing the lease; it will be recovered")
	}
	opt("retention", ms(task.RetentionMS))
	opt("completed", when(task.CompletedAt))
	opt("result", bytesText(task.Result, task.ResultBase64))
	return t.flush()
}

// bytesText shows a payload or result: its JSON, or its base64 marked as
// such.
func bytesText(j json.RawMessage, b64 string) string {
	switch {
	case len(j) > 0:
		return clip(string(j), 2000)
	case b64 != "":
		return "base64 " + clip(b64, 2000)
	}
	return ""
}

func newTaskActCmd(r *remote, v taskVerb) *cobra.Command {
	var state, group string
	var all bool
	cmd := &cobra.Command{
		Use:     v.name + " QUEUE ID",
		Short:   v.short,
		Example: "  htq task " + v.name + " mail 1b0e4c4e-7c1f-4c2e-9d1a-3f2b8e0c5a77",
		RunE: func(cmd *cobra.Command, args []string) error {
			if all {
				if err := wantArgs("QUEUE")(cmd, args); err != nil {
					return usagef("%s --all acts on every task of one queue in one --state: give QUEUE only, not an ID", name(cmd))
				}
				if state == "" {
					return usagef("%s --all needs --state (one of %s)", name(cmd), strings.Join(v.states, ", "))
				}
				if err := stateFlag(state, v.states); err != nil {
					return err
				}
				if state == "aggregating" && group == "" {
					return usagef("--state aggregating needs --group")
				}
				return r.bulk(cmd, v, args[0], state, group)
			}
			if err := wantArgs("QUEUE", "ID")(cmd, args); err != nil {
				return err
			}
			if state != "" || group != "" {
				return usagef("--state and --group select tasks for --all; to %s one task give QUEUE ID only", v.name)
			}
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				if err := c.Act(ctx, v.action, args[0], args[1]); err != nil {
					return err
				}
				return r.done(map[string]any{"queue": args[0], "id": args[1], "action": v.action}, "%s task %s in %s", v.done, args[1], args[0])
			})
		},
	}
	if len(v.states) > 0 {
		cmd.Use = v.name + " QUEUE (ID | --state STATE --all)"
		cmd.Example += fmt.Sprintf("\n  htq task %s mail --state %s --all", v.name, v.states[len(v.states)-2])
		cmd.Flags().BoolVar(&all, "all", false, "act on every task of QUEUE in --state (a progress bar shows on a terminal)")
		cmd.Flags().StringVar(&state, "state", "", "with --all: the state of the tasks, one of "+strings.Join(v.states, ", "))
		cmd.Flags().StringVar(&group, "group", "", "with --all --state aggregating: the group")
	}
	return cmd
}

// bulkReport is what `htq task VERB QUEUE --state S --all` did.
type bulkReport struct {
	Queue  string `json:"queue"`
	State  string `json:"state"`
	Group  string `json:"group,omitempty"`
	Action string `json:"action"`
	// Count is how many tasks the action changed.
	Count int `json:"count"`
}

// bulkPoll is how often the progress bar of a bulk action reads the
// queue's counts.
const bulkPoll = 200 * time.Millisecond

// bulk acts on every task of queue in state (of group, for aggregating
// tasks) with one call, POST /v1/queues/{queue}/bulk: the service moves
// them in atomic batches of 1,000. On a terminal a progress bar on
// stderr follows the state's count while the call runs.
func (r *remote) bulk(cmd *cobra.Command, v taskVerb, queue, state, group string) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd.SetContext(ctx)
	return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
		q, err := c.Queue(ctx, queue)
		if err != nil {
			return err
		}
		before := q.Stats.InState(state)
		bar := newProgress(r.stderr, fmt.Sprintf("%s %s tasks of %s", v.name, state, queue), before)
		stopPoll := make(chan struct{})
		polled := make(chan struct{})
		go func() {
			defer close(polled)
			if !bar.enabled {
				return
			}
			tick := time.NewTicker(bulkPoll)
			defer tick.Stop()
			for {
				select {
				case <-stopPoll:
					return
				case <-tick.C:
				}
				if now, err := c.Queue(ctx, queue); err == nil {
					bar.set(before - now.Stats.InState(state))
				}
			}
		}()
		res, err := c.Bulk(ctx, queue, &apiclient.BulkRequest{Action: string(v.action), State: state, Group: group})
		close(stopPoll)
		<-polled
		if err != nil {
			bar.finish()
			if ctx.Err() != nil {
				return fmt.Errorf("interrupted: the service goes on with the %s it started (htq queue inspect %s shows its progress)", v.name, queue)
			}
			return err
		}
		bar.set(res.Count)
		bar.finish()
		rep := bulkReport{Queue: queue, State: state, Group: group, Action: string(v.action), Count: res.Count}
		return r.done(rep, "%s %d %s tasks of %s", v.done, res.Count, state, queue)
	})
}
