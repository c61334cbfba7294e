package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/model"
	"github.com/spf13/cobra"
)

func newScheduleCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "List, inspect, add and remove periodic tasks (cron schedules run by htq serve), and see what they enqueued",
		Example: `  htq schedule ls
  htq schedule add '*/5 * * * *' reports --type report:daily --payload '{"k":1}'
  htq schedule inspect 4f0c2a9d1e…
  htq schedule rm 4f0c2a9d1e…`,
	}
	makeGroup(cmd)
	cmd.AddCommand(
		&cobra.Command{
			Use:     "ls",
			Aliases: []string{"list"},
			Short:   "List the schedules with their next and last runs",
			Example: "  htq schedule ls",
			Args:    noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					list, err := c.Schedules(ctx)
					if err != nil {
						return err
					}
					if r.json {
						return printJSON(r.stdout, map[string]any{"schedules": list})
					}
					t := newTable(r.stdout, "ID", "CRON", "QUEUE", "TASK", "NEXT RUN", "LAST RUN")
					for _, s := range list {
						t.row(s.ID, s.Cron, s.Queue, taskText(&s.Task), when(s.NextRunAt), when(s.PrevRunAt))
					}
					return t.flush()
				})
			},
		},
		newScheduleInspectCmd(r),
		newScheduleHistoryCmd(r),
		newScheduleAddCmd(r),
		&cobra.Command{
			Use:     "rm ID",
			Aliases: []string{"delete"},
			Short:   "Remove a schedule",
			Example: "  htq schedule rm 4f0c2a9d1e7b",
			Args:    wantArgs("ID"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					if err := c.DeleteSchedule(ctx, args[0]); err != nil {
						return err
					}
					return r.done(map[string]any{"id": args[0], "deleted": true}, "schedule %s removed", args[0])
				})
			},
		},
	)
	return cmd
}

func newScheduleAddCmd(r *remote) *cobra.Command {
	var tf taskFlags
	cmd := &cobra.Command{
		Use:   "add SPEC QUEUE (--url URL [--method M] [--header K:V]... [--body B] | --type T [--payload P])",
		Short: "Add a schedule: enqueue a task into QUEUE at every tick of SPEC",
		Long: `add stores a schedule that every htq serve on the storage runs (one enqueue
per tick across all of them). SPEC is a 5-field cron spec ("*/5 * * * *"), a
descriptor (@hourly, @daily) or "@every 30s", in htq serve's time zone (--tz).
Adding the same schedule twice gives back the first.`,
		Example: `  htq schedule add '*/5 * * * *' reports --type report:daily --payload '{"k":1}'
  htq schedule add '@every 1m' pings --url https://example.com/ping --method GET`,
		Args: wantArgs("SPEC", "QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := tf.spec(cmd.Flags(), r.stdin)
			if err != nil {
				return err
			}
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				s, err := c.CreateSchedule(ctx, &apiclient.ScheduleRequest{Cron: args[0], Queue: args[1], Task: *spec})
				if err != nil {
					return err
				}
				return r.done(s, "schedule %s: %s into %s at %s", s.ID, taskText(&s.Task), s.Queue, s.Cron)
			})
		},
	}
	tf.add(cmd.Flags())
	return cmd
}

func newScheduleInspectCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:     "inspect ID",
		Short:   "Show one schedule: its spec, task, next and last runs, and the tasks its last ticks enqueued",
		Example: "  htq schedule inspect 4f0c2a9d1e7b\n  htq schedule inspect 4f0c2a9d1e7b --json",
		Args:    wantArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				s, err := c.Schedule(ctx, args[0])
				if err != nil {
					return err
				}
				runs, err := c.ScheduleHistory(ctx, args[0])
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.stdout, map[string]any{"schedule": s, "history": runs})
				}
				t := newTable(r.stdout)
				t.row("id", s.ID)
				t.row("cron", s.Cron)
				t.row("queue", s.Queue)
				t.row("task", taskText(&s.Task))
				t.row("created", when(&s.CreatedAt))
				t.row("next run", when(s.NextRunAt))
				t.row("last run", when(s.PrevRunAt))
				if err := t.flush(); err != nil {
					return err
				}
				fmt.Fprintln(r.stdout)
				return runsTable(r.stdout, runs)
			})
		},
	}
}

func newScheduleHistoryCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:   "history ID",
		Short: "List the last ticks of a schedule, newest first: the task each enqueued, or why none was",
		Long: `history lists the last 20 ticks of a schedule: when it fired, the task it
enqueued (htq task inspect QUEUE TASK shows it) or the error that kept it
from enqueuing one, and which scheduler fired it. ID may also be the entry
ID of a Go program's Scheduler sharing the storage.`,
		Example: "  htq schedule history 4f0c2a9d1e7b",
		Args:    wantArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				runs, err := c.ScheduleHistory(ctx, args[0])
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.stdout, map[string]any{"history": runs})
				}
				return runsTable(r.stdout, runs)
			})
		},
	}
}

// runsTable writes one row per tick of a schedule.
func runsTable(w io.Writer, runs []*apiclient.ScheduleRun) error {
	if len(runs) == 0 {
		_, err := fmt.Fprintln(w, "no runs yet")
		return err
	}
	t := newTable(w, "TICK", "ENQUEUED", "TASK", "SCHEDULER", "ERROR")
	for _, run := range runs {
		t.row(when(&run.Tick), when(&run.EnqueuedAt), dash(run.TaskID), clip(run.SchedulerID, 24), clip(run.Error, 80))
	}
	return t.flush()
}

// taskText names a task spec: its type, or its method and URL.
func taskText(s *model.TaskSpec) string {
	if s.IsURL() {
		m := s.Method
		if m == "" {
			m = "POST"
		}
		return strings.ToUpper(m) + " " + s.URL
	}
	return s.Type
}
