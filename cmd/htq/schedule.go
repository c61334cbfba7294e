package main

import (
	"context"
	"strings"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/model"
	"github.com/spf13/cobra"
)

func newScheduleCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "List, add and remove periodic tasks (cron schedules run by htq serve)",
		Example: `  htq schedule ls
  htq schedule add '*/5 * * * *' reports --type report:daily --payload '{"k":1}'
  htq schedule rm 4f0c2a9d1e…`,
	}
	makeGroup(cmd)
	cmd.AddCommand(
		&cobra.Command{
			Use:     "ls",
			Aliases: []string{"list"},
			Short:   "List the schedules",
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
					t := newTable(r.stdout, "ID", "CRON", "QUEUE", "TASK", "CREATED")
					for _, s := range list {
						t.row(s.ID, s.Cron, s.Queue, taskText(&s.Task), when(&s.CreatedAt))
					}
					return t.flush()
				})
			},
		},
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
