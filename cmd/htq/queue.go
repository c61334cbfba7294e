package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/model"
	"github.com/spf13/cobra"
)

func newQueueCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List, inspect, pause, resume, configure and delete queues",
		Example: `  htq queue ls
  htq queue inspect mail
  htq queue pause mail
  htq queue settings mail --max-concurrency 4 --rate 20`,
	}
	makeGroup(cmd)
	cmd.AddCommand(
		&cobra.Command{
			Use:     "ls",
			Aliases: []string{"list"},
			Short:   "List every queue with its tasks by state",
			Example: "  htq queue ls\n  htq queue ls --json",
			Args:    noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					qs, err := c.Queues(ctx)
					if err != nil {
						return err
					}
					if r.json {
						return printJSON(r.stdout, map[string]any{"queues": qs})
					}
					return queueTable(r.stdout, qs, false)
				})
			},
		},
		&cobra.Command{
			Use:     "inspect QUEUE",
			Short:   "Show a queue: mode, state, settings, policies and tasks by state",
			Example: "  htq queue inspect mail",
			Args:    wantArgs("QUEUE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					q, err := c.Queue(ctx, args[0])
					if err != nil {
						return err
					}
					if r.json {
						return printJSON(r.stdout, q)
					}
					return printQueue(r.stdout, q)
				})
			},
		},
		queueStateCmd(r, "pause", "Pause a queue: no server starts its tasks until it is resumed", true),
		queueStateCmd(r, "resume", "Resume a paused queue", false),
		newQueueRmCmd(r),
		newQueueSettingsCmd(r),
		&cobra.Command{
			Use:     "keys QUEUE",
			Short:   "List the queue's fair-sharing keys that have pending or running tasks",
			Example: "  htq queue keys reports",
			Args:    wantArgs("QUEUE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					keys, err := c.Keys(ctx, args[0])
					if err != nil {
						return err
					}
					if r.json {
						return printJSON(r.stdout, map[string]any{"keys": keys})
					}
					t := newTable(r.stdout, "KEY", "PENDING", "ACTIVE")
					for _, k := range keys {
						t.row(k.Key, itoa(k.Pending), itoa(k.Active))
					}
					return t.flush()
				})
			},
		},
	)
	return cmd
}

// queueStateCmd is `htq queue pause|resume QUEUE`.
func queueStateCmd(r *remote, verb, short string, pause bool) *cobra.Command {
	return &cobra.Command{
		Use:     verb + " QUEUE",
		Short:   short,
		Example: "  htq queue " + verb + " mail",
		Args:    wantArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				act := c.ResumeQueue
				if pause {
					act = c.PauseQueue
				}
				if err := act(ctx, args[0]); err != nil {
					return err
				}
				return r.done(map[string]any{"queue": args[0], "paused": pause}, "queue %s %sd", args[0], verb)
			})
		},
	}
}

func newQueueRmCmd(r *remote) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:     "rm QUEUE",
		Aliases: []string{"delete"},
		Short:   "Delete a queue (with --force, its tasks too)",
		Long: `rm deletes a queue. A queue that holds tasks is refused (exit code 5)
unless --force is given: then its tasks are deleted too, unless some are
running.`,
		Example: "  htq queue rm old-queue\n  htq queue rm mail --force",
		Args:    wantArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				if err := c.DeleteQueue(ctx, args[0], force); err != nil {
					return err
				}
				return r.done(map[string]any{"queue": args[0], "deleted": true}, "queue %s deleted", args[0])
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete the queue's tasks too")
	return cmd
}

func newQueueSettingsCmd(r *remote) *cobra.Command {
	var maxConc, burst, keyConc, keyBurst int
	var rate, keyRate float64
	cmd := &cobra.Command{
		Use:   "settings QUEUE",
		Short: "Show or change a queue's settings (concurrency, rate limit, per key) across all servers",
		Long: `settings shows a queue's storage settings, which every server obeys; with
flags it changes them. --max-concurrency bounds the queue's running tasks
across all servers (0: no bound); --rate bounds the tasks started per second
(0: none), --burst how many may start at once above that rate.
--key-max-concurrency, --key-rate and --key-burst are the same bounds for
the tasks of each fair-sharing key (htq enqueue --key), whose keys the
queue serves in turn.`,
		Example: "  htq queue settings mail\n  htq queue settings mail --max-concurrency 4 --rate 20 --burst 5\n" +
			"  htq queue settings reports --key-max-concurrency 2 --key-rate 1",
		Args: wantArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var change model.QueueChange
			f := cmd.Flags()
			if f.Changed("max-concurrency") {
				change.MaxConcurrency = &maxConc
			}
			if f.Changed("rate") {
				change.RateLimit = &rate
			}
			if f.Changed("burst") {
				change.RateBurst = &burst
			}
			if f.Changed("key-max-concurrency") {
				change.KeyMaxConcurrency = &keyConc
			}
			if f.Changed("key-rate") {
				change.KeyRateLimit = &keyRate
			}
			if f.Changed("key-burst") {
				change.KeyRateBurst = &keyBurst
			}
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				var q *model.QueueView
				var err error
				if change == (model.QueueChange{}) {
					q, err = c.Queue(ctx, args[0])
				} else {
					q, err = c.UpdateQueue(ctx, args[0], &change)
				}
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.stdout, map[string]any{"queue": q.Name, "settings": q.Settings})
				}
				t := newTable(r.stdout)
				t.row("queue", q.Name)
				t.row("settings", settingsText(&q.Settings))
				return t.flush()
			})
		},
	}
	cmd.Flags().IntVar(&maxConc, "max-concurrency", 0, "most tasks of the queue running at once, across all servers (0: no bound)")
	cmd.Flags().Float64Var(&rate, "rate", 0, "most tasks started per second (0: no limit)")
	cmd.Flags().IntVar(&burst, "burst", 0, "tasks that may start at once above the rate")
	cmd.Flags().IntVar(&keyConc, "key-max-concurrency", 0, "most tasks of one fair-sharing key running at once, across all servers (0: no bound)")
	cmd.Flags().Float64Var(&keyRate, "key-rate", 0, "most tasks of one key started per second (0: no limit)")
	cmd.Flags().IntVar(&keyBurst, "key-burst", 0, "tasks of one key that may start at once above the key rate")
	return cmd
}

// done prints the outcome of a change: v as JSON with --json, else the
// formatted line.
func (r *remote) done(v any, format string, args ...any) error {
	if r.json {
		return printJSON(r.stdout, v)
	}
	_, err := fmt.Fprintf(r.stdout, format+"\n", args...)
	return err
}

// queueTable writes one row per queue; live adds today's processed and
// failed counts, the latency and a total row (htq stats).
func queueTable(w io.Writer, qs []*model.QueueView, live bool) error {
	header := []string{"QUEUE", "MODE", "STATE", "SIZE", "PENDING", "ACTIVE", "SCHEDULED", "RETRY", "ARCHIVED", "COMPLETED"}
	if live {
		header = append(header, "PROCESSED", "FAILED", "LATENCY")
	}
	t := newTable(w, header...)
	var total model.StatsView
	for _, q := range qs {
		s := &q.Stats
		cells := []string{q.Name, string(q.Mode), queueState(q), itoa(s.Size), itoa(s.Pending), itoa(s.Active),
			itoa(s.Scheduled), itoa(s.Retry), itoa(s.Archived), itoa(s.Completed)}
		if live {
			cells = append(cells, itoa(s.Processed), itoa(s.Failed), ms(s.LatencyMS))
		}
		t.row(cells...)
		total.Size += s.Size
		total.Pending += s.Pending
		total.Active += s.Active
		total.Scheduled += s.Scheduled
		total.Retry += s.Retry
		total.Archived += s.Archived
		total.Completed += s.Completed
		total.Processed += s.Processed
		total.Failed += s.Failed
	}
	if live {
		t.row("total", "", "", itoa(total.Size), itoa(total.Pending), itoa(total.Active), itoa(total.Scheduled),
			itoa(total.Retry), itoa(total.Archived), itoa(total.Completed), itoa(total.Processed), itoa(total.Failed), "")
	}
	return t.flush()
}

func queueState(q *model.QueueView) string {
	if q.Paused {
		return "paused"
	}
	return "running"
}

func itoa(n int) string { return strconv.Itoa(n) }

// printQueue writes one queue as name-value lines.
func printQueue(w io.Writer, q *model.QueueView) error {
	s := &q.Stats
	t := newTable(w)
	t.row("queue", q.Name)
	t.row("mode", string(q.Mode))
	t.row("state", queueState(q))
	if !q.CreatedAt.IsZero() {
		t.row("created", when(&q.CreatedAt))
	}
	t.row("settings", settingsText(&q.Settings))
	if p := policiesText(q.Queue); p != "" {
		t.row("policies", p)
	}
	t.row("tasks", fmt.Sprintf("%d: %d pending, %d active, %d scheduled, %d retry, %d archived, %d completed, %d aggregating in %d groups",
		s.Size, s.Pending, s.Active, s.Scheduled, s.Retry, s.Archived, s.Completed, s.Aggregating, s.Groups))
	t.row("today", fmt.Sprintf("%d processed, %d failed (all time: %d, %d)", s.Processed, s.Failed, s.ProcessedTotal, s.FailedTotal))
	t.row("latency", ms(s.LatencyMS)+" (age of the oldest pending task)")
	return t.flush()
}

func settingsText(s *model.SettingsView) string {
	parts := []string{"max concurrency " + boundText(s.MaxConcurrency)}
	if s.RateLimit > 0 {
		parts = append(parts, fmt.Sprintf("rate %g/s, burst %d", s.RateLimit, s.RateBurst))
	} else {
		parts = append(parts, "rate no limit")
	}
	if s.LeaseMS > 0 {
		parts = append(parts, "lease "+ms(s.LeaseMS))
	}
	if s.KeyMaxConcurrency > 0 {
		parts = append(parts, "per key max concurrency "+itoa(s.KeyMaxConcurrency))
	}
	if s.KeyRateLimit > 0 {
		parts = append(parts, fmt.Sprintf("per key rate %g/s, burst %d", s.KeyRateLimit, max(s.KeyRateBurst, 1)))
	}
	return strings.Join(parts, ", ")
}

func boundText(n int) string {
	if n <= 0 {
		return "no bound"
	}
	return itoa(n)
}

// policiesText describes a URL queue's policies ("" for a pull queue).
func policiesText(q *model.Queue) string {
	if !q.Mode.IsURL() {
		return ""
	}
	attempts := "default"
	if q.MaxAttempts > 0 {
		attempts = itoa(q.MaxAttempts)
	}
	parts := []string{"max attempts " + attempts,
		"backoff " + ms(q.MinBackoffMS) + " to " + ms(q.MaxBackoffMS),
		"dispatch timeout " + ms(q.DispatchTimeoutMS),
		"retry 4xx " + strconv.FormatBool(q.Retry4xx)}
	if q.Mode == model.ModeVariable {
		parts = append(parts, fmt.Sprintf("stepping %v up to %v", time.Duration(q.SteppingTimeS)*time.Second, time.Duration(q.MaxIntervalS)*time.Second))
	}
	return strings.Join(parts, ", ")
}
