package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/spf13/cobra"
)

// reconnectAfter is how long `htq events` waits before it reconnects to a
// stream that ended or broke (the service's suggested retry delay).
const reconnectAfter = 2 * time.Second

func newEventsCmd(r *remote) *cobra.Command {
	var queues []string
	var after string
	var limit int
	cmd := &cobra.Command{
		Use:   "events [--queue Q]... [--after ID] [--max N]",
		Short: "Follow the lifecycle events of the queues as they happen (GET /v1/events)",
		Long: `events prints every task enqueued, started, succeeded, failed, retried,
archived or deleted, and every queue paused or resumed, as it happens, one
line per event, until Ctrl-C (or --max events). --queue (repeated) follows
only those queues. Each line ends with the event's ID: --after ID resumes
after it, with what happened meanwhile, as far back as the storage's event
logs go (about the last 1,000 changes of each queue). When the stream ends
or breaks, events reconnects after the last event it printed. A "gap" line
says that events were dropped before they could be read.
With --json each event is one JSON object on a line of its own.`,
		Example: `  htq events
  htq events --queue mail --queue reports
  htq events --after 'mail:1764601200000-0'
  htq events --queue mail --json | jq -c 'select(.kind == "failed")'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usagef("--max %d is negative", limit)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cmd.SetContext(ctx)
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				return r.follow(ctx, c, apiclient.EventsQuery{Queues: queues, After: after}, limit)
			})
		},
	}
	cmd.Flags().StringArrayVar(&queues, "queue", nil, "follow this queue only (repeat for several; default every queue)")
	cmd.Flags().StringVar(&after, "after", "", "resume after the event with this ID (the last column of a line, the id of --json)")
	cmd.Flags().IntVar(&limit, "max", 0, "exit after this many events (0: follow until Ctrl-C)")
	return cmd
}

// errEnough ends a stream once --max events came.
var errEnough = errors.New("enough events")

// follow prints the events of q until ctx ends or limit events came
// (limit 0: no limit), reconnecting after the last event printed when the
// stream ends or breaks. A refused stream (token, queue name, event ID)
// is the error; an interrupt is a normal end.
func (r *remote) follow(ctx context.Context, c *apiclient.Client, q apiclient.EventsQuery, limit int) error {
	n := 0
	for {
		err := c.Events(ctx, q, func(ev *apiclient.Event) error {
			if ev.ID != "" {
				q.After = ev.ID
			}
			if n == 0 && !r.json {
				fmt.Fprintf(r.stdout, "%-23s  %-9s  %-16s  %-36s  %-11s  %s\n", "TIME", "EVENT", "QUEUE", "TASK", "STATE", "ID")
			}
			if err := r.printEvent(ev); err != nil {
				return err
			}
			n++
			if limit > 0 && n >= limit {
				return errEnough
			}
			return nil
		})
		switch {
		case errors.Is(err, errEnough), ctx.Err() != nil:
			return nil
		case err != nil && !errors.Is(err, apiclient.ErrUnreachable):
			return err
		}
		why := "the service ended the stream"
		if err != nil {
			why = err.Error()
		}
		fmt.Fprintf(r.stderr, "htq: %s; reconnecting in %v\n", why, reconnectAfter)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(reconnectAfter):
		}
	}
}

// printEvent writes one event: a JSON line with --json, else a line of
// fixed columns.
func (r *remote) printEvent(ev *apiclient.Event) error {
	if r.json {
		return printJSONLine(r.stdout, ev)
	}
	if ev.Kind == "gap" {
		_, err := fmt.Fprintf(r.stdout, "%-23s  %-9s  %-16s  %s\n", ev.Time.Local().Format("2006-01-02 15:04:05.000"), ev.Kind, dash(ev.Queue), ev.Message)
		return err
	}
	line := fmt.Sprintf("%-23s  %-9s  %-16s  %-36s  %-11s  %s", ev.Time.Local().Format("2006-01-02 15:04:05.000"),
		ev.Kind, ev.Queue, dash(ev.TaskID), dash(ev.State), ev.ID)
	if ev.Error != "" {
		line += "  " + clip(ev.Error, 200)
	}
	_, err := fmt.Fprintln(r.stdout, line)
	return err
}

// dash is s, or "-" for nothing.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
