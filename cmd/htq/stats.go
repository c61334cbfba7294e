package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func newStatsCmd(r *remote) *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "A live summary of every queue, refreshed like top (q quits)",
		Long: `stats shows every queue's tasks by state, today's processed and failed
counts and its latency (the age of its oldest pending task), refreshed every
--interval on a terminal until q (or Ctrl-C) is pressed. When standard
output is not a terminal, or with --json, it prints the summary once and
exits.`,
		Example: "  htq stats\n  htq stats --interval 5s\n  htq stats --json | jq '.queues[].stats.pending'",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if interval < 100*time.Millisecond {
				return usagef("--interval %v: want at least 100ms", interval)
			}
			out, ok := r.stdout.(*os.File)
			if r.json || !ok || !term.IsTerminal(int(out.Fd())) {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					qs, err := c.Queues(ctx)
					if err != nil {
						return err
					}
					if r.json {
						return printJSON(r.stdout, map[string]any{"server": c.Server(), "time": time.Now().UTC(), "queues": qs})
					}
					return queueTable(r.stdout, qs, true)
				})
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cmd.SetContext(ctx)
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				return r.live(ctx, out, c, interval)
			})
		},
	}
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "time between refreshes")
	return cmd
}

// live redraws the summary on the terminal out every interval until ctx
// ends or q is pressed. The terminal is put back as it was on return.
func (r *remote) live(ctx context.Context, out *os.File, c *apiclient.Client, interval time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Keys: on a terminal stdin, raw mode delivers each key at once (and
	// Ctrl-C as a key: raw mode turns off the signal).
	if in, ok := r.stdin.(*os.File); ok && term.IsTerminal(int(in.Fd())) {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return fmt.Errorf("stats: terminal raw mode: %w", err)
		}
		defer term.Restore(int(in.Fd()), old)
		go readKeys(in, cancel)
	}
	// The alternate screen, as top uses: the shell's screen comes back
	// on exit. The cursor is hidden while drawing.
	fmt.Fprint(out, "\x1b[?1049h\x1b[?25l")
	defer fmt.Fprint(out, "\x1b[?25h\x1b[?1049l")
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		qs, err := c.Queues(ctx)
		if errors.Is(err, apiclient.ErrUnauthorized) || ctx.Err() != nil {
			return err
		}
		var screen bytes.Buffer
		fmt.Fprintf(&screen, "htq stats  %s  %s  (every %v; q quits)\n\n", c.Server(), time.Now().Format("2006-01-02 15:04:05"), interval)
		if err != nil {
			fmt.Fprintf(&screen, "error: %s\n", strings.TrimPrefix(err.Error(), "htq: "))
		} else if err := queueTable(&screen, qs, true); err != nil {
			return err
		}
		draw(out, screen.String())
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// draw replaces the terminal's content with text, cut to its height; in
// raw mode a line ends with \r\n.
func draw(out *os.File, text string) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if _, rows, err := term.GetSize(int(out.Fd())); err == nil && rows > 1 && len(lines) > rows-1 {
		more := len(lines) - (rows - 2)
		lines = append(lines[:rows-2], fmt.Sprintf("… %d more lines (a larger window shows them)", more))
	}
	io.WriteString(out, "\x1b[H\x1b[2J"+strings.Join(lines, "\r\n")+"\r\n")
}

// readKeys calls quit when q, Q, Ctrl-C or Ctrl-D is pressed, or stdin
// ends.
func readKeys(in io.Reader, quit func()) {
	buf := make([]byte, 16)
	for {
		n, err := in.Read(buf)
		for _, b := range buf[:n] {
			switch b {
			case 'q', 'Q', 3, 4:
				quit()
				return
			}
		}
		if err != nil {
			quit()
			return
		}
	}
}
