package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/base"
	"github.com/spf13/cobra"
)

// needsRoute explains a 404 for a route this service does not have yet
// (an older htq serve).
func needsRoute(err error, route string) error {
	var apiErr *apiclient.Error
	if errors.As(err, &apiErr) && apiErr.Code == "not_found" && strings.Contains(apiErr.Message, "no route") {
		return fmt.Errorf("%w: this htq serve has no %s; upgrade it", base.ErrNotFound, route)
	}
	return err
}

func newServersCmd(r *remote) *cobra.Command {
	return &cobra.Command{
		Use:     "servers",
		Short:   "List the running servers (Go Servers, htq serve's URL workers, pull workers) and the tasks each runs",
		Example: "  htq servers\n  htq servers --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				list, err := c.Servers(ctx)
				if err != nil {
					return needsRoute(err, "GET /v1/servers")
				}
				if r.json {
					return printJSON(r.stdout, map[string]any{"servers": list})
				}
				t := newTable(r.stdout, "ID", "HOST", "PID", "STATUS", "STARTED", "BUSY", "QUEUES", "RUNNING")
				for _, s := range list {
					queues := make([]string, 0, len(s.Queues))
					for q, w := range s.Queues {
						queues = append(queues, fmt.Sprintf("%s=%d", q, w))
					}
					slices.Sort(queues)
					running := make([]string, len(s.ActiveTasks))
					for i, at := range s.ActiveTasks {
						running[i] = at.Queue + "/" + at.TaskID
					}
					pid := "-" // a pull worker's is not known
					if s.PID > 0 {
						pid = itoa(s.PID)
					}
					t.row(s.ID, s.Host, pid, s.Status, when(&s.Started),
						fmt.Sprintf("%d/%d", len(s.ActiveTasks), s.Concurrency), clip(strings.Join(queues, ","), 60), clip(strings.Join(running, ", "), 80))
				}
				return t.flush()
			})
		},
	}
}

func newGroupCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "group",
		Short:   "List a queue's groups of aggregating tasks",
		Example: "  htq group ls digest",
	}
	makeGroup(cmd)
	cmd.AddCommand(&cobra.Command{
		Use:     "ls QUEUE",
		Aliases: []string{"list"},
		Short:   "List the groups of QUEUE that hold aggregating tasks, with their sizes",
		Example: "  htq group ls digest\n  htq task ls digest --state aggregating --group user-42",
		Args:    wantArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				list, err := c.Groups(ctx, args[0])
				if err != nil {
					return needsRoute(err, "GET /v1/queues/{queue}/groups")
				}
				if r.json {
					return printJSON(r.stdout, map[string]any{"groups": list})
				}
				t := newTable(r.stdout, "GROUP", "SIZE")
				for _, g := range list {
					t.row(g.Group, itoa(g.Size))
				}
				return t.flush()
			})
		},
	})
	return cmd
}
