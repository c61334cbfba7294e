package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/model"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// taskFlags are the flags that describe a task, shared by `htq enqueue`
// and `htq schedule add`.
type taskFlags struct {
	url, method, body string
	headers           []string
	typ, payload      string

	retry                      int
	unique, timeout, retention time.Duration
	priority                   int
	key                        string
}

func (f *taskFlags) add(fs *pflag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "URL task: the URL htq calls")
	fs.StringVar(&f.method, "method", "", "URL task: the HTTP method (default POST)")
	fs.StringArrayVar(&f.headers, "header", nil, "URL task: a request header as Name:value (repeat for more)")
	fs.StringVar(&f.body, "body", "", "URL task: the request body (@FILE reads a file, @- standard input)")
	fs.StringVar(&f.typ, "type", "", "typed task: its type, which routes it to a handler")
	fs.StringVar(&f.payload, "payload", "", "typed task: its payload, JSON or any bytes (@FILE reads a file, @- standard input)")
	fs.IntVar(&f.retry, "retry", 0, "retries before the task is archived (default 25; a URL queue's max attempts − 1)")
	fs.DurationVar(&f.unique, "unique", 0, "refuse a copy (same type and payload in the queue) for this long, e.g. 1h")
	fs.DurationVar(&f.timeout, "timeout", 0, "bound on one attempt, e.g. 30s")
	fs.DurationVar(&f.retention, "retention", 0, "keep the completed task, with its result, this long, e.g. 24h")
	fs.IntVar(&f.priority, "priority", 0, "0 (default) to 9: a pending task of a higher priority is fetched first")
	fs.StringVar(&f.key, "key", "", "a fair-sharing key (a tenant, a user): the queue serves its keys in turn")
}

// spec builds the task the flags describe. stdin is read for @-.
func (f *taskFlags) spec(fs *pflag.FlagSet, stdin io.Reader) (*model.TaskSpec, error) {
	s := &model.TaskSpec{}
	switch {
	case f.url != "" && f.typ != "":
		return nil, usagef("give --url (a URL task) or --type (a typed task), not both")
	case f.url == "" && f.typ == "":
		return nil, usagef("give --url URL (a URL task that htq calls) or --type TYPE (a typed task for a worker)")
	case f.url != "":
		if fs.Changed("payload") {
			return nil, usagef("--payload is for a typed task; a URL task sends --body")
		}
		s.URL, s.Method = f.url, strings.ToUpper(f.method)
		for _, h := range f.headers {
			name, value, ok := strings.Cut(h, ":")
			if name = strings.TrimSpace(name); !ok || name == "" || strings.ContainsAny(name, " \t") {
				return nil, usagef("--header %q: want Name:value", h)
			}
			if s.Headers == nil {
				s.Headers = make(map[string]string)
			}
			s.Headers[name] = strings.TrimSpace(value)
		}
		if fs.Changed("body") {
			body, err := argBytes("--body", f.body, stdin)
			if err != nil {
				return nil, err
			}
			if utf8.Valid(body) {
				text := string(body)
				s.Body = &text
			} else {
				s.BodyBase64 = base64.StdEncoding.EncodeToString(body)
			}
		}
	default:
		for _, name := range []string{"method", "header", "body"} {
			if fs.Changed(name) {
				return nil, usagef("--%s is for a URL task; a typed task carries --payload", name)
			}
		}
		s.Type = f.typ
		if fs.Changed("payload") {
			p, err := argBytes("--payload", f.payload, stdin)
			if err != nil {
				return nil, err
			}
			if json.Valid(p) {
				s.Payload = json.RawMessage(p)
			} else {
				s.PayloadBase64 = base64.StdEncoding.EncodeToString(p)
			}
		}
	}
	o := &model.TaskOptions{}
	if fs.Changed("retry") {
		o.MaxRetry = &f.retry
	}
	if fs.Changed("priority") {
		o.Priority = &f.priority
	}
	o.Key = f.key
	durations := []struct {
		flag string
		v    time.Duration
		dst  **model.Duration
	}{{"unique", f.unique, &o.Unique}, {"timeout", f.timeout, &o.Timeout}, {"retention", f.retention, &o.Retention}}
	for _, d := range durations {
		if fs.Changed(d.flag) {
			md := model.Duration(d.v)
			*d.dst = &md
		}
	}
	if *o != (model.TaskOptions{}) {
		s.Options = o
	}
	return s, nil
}

// argBytes reads a flag's value: the text itself, or a file's content for
// @FILE, standard input for @-.
func argBytes(flag, v string, stdin io.Reader) ([]byte, error) {
	name, ok := strings.CutPrefix(v, "@")
	if !ok {
		return []byte(v), nil
	}
	if name == "-" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("%s @-: read standard input: %w", flag, err)
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, usagef("%s %s: %v", flag, v, err)
	}
	return data, nil
}

func newEnqueueCmd(r *remote) *cobra.Command {
	var tf taskFlags
	var in time.Duration
	var at, id string
	cmd := &cobra.Command{
		Use:   "enqueue QUEUE (--url URL [--method M] [--header K:V]... [--body B] | --type T [--payload P]) [--in 10m | --at TIME]",
		Short: "Enqueue a URL task (htq calls the URL) or a typed task (for a worker)",
		Long: `enqueue adds one task to QUEUE. A URL task (--url) is an HTTP request htq
makes itself, retried with backoff until the target answers 2xx. A typed task
(--type) is fetched by a Go Server or a pull worker; --payload is sent as JSON
when it is JSON, else as bytes. The task runs now, after --in, or at --at
(RFC 3339, or "2006-01-02 15:04[:05]" in local time). A queue that does not
exist is created by its first task (a URL queue, or a pull queue).`,
		Example: `  htq enqueue hooks --url https://example.com/hook --header 'Content-Type: application/json' --body '{"x":1}'
  htq enqueue mail --type email:send --payload '{"to":"ada@example.com"}' --in 10m --retry 3
  htq enqueue reports --type report --payload @report.json --at '2026-12-01 09:30' --unique 1h`,
		Args: wantArgs("QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			spec, err := tf.spec(fs, r.stdin)
			if err != nil {
				return err
			}
			if fs.Changed("in") && fs.Changed("at") {
				return usagef("give --in or --at, not both")
			}
			if fs.Changed("in") || fs.Changed("at") || id != "" {
				if spec.Options == nil {
					spec.Options = &model.TaskOptions{}
				}
				spec.Options.TaskID = id
			}
			if fs.Changed("in") {
				d := model.Duration(in)
				spec.Options.Delay = &d
			}
			if fs.Changed("at") {
				t, err := parseTime(at)
				if err != nil {
					return err
				}
				spec.Options.ProcessAt = &t
			}
			return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
				out, err := c.Enqueue(ctx, args[0], spec)
				if err != nil {
					return err
				}
				if r.json {
					return printJSON(r.stdout, out)
				}
				due := ""
				if out.State == "scheduled" {
					due = ", due " + when(out.NextProcessAt)
				}
				_, err = fmt.Fprintf(r.stdout, "enqueued task %s into %s: %s%s\n", out.ID, out.Queue, out.State, due)
				return err
			})
		},
	}
	tf.add(cmd.Flags())
	cmd.Flags().DurationVar(&in, "in", 0, "run after this long, e.g. 10m")
	cmd.Flags().StringVar(&at, "at", "", "run at this time: RFC 3339, or \"2006-01-02 15:04[:05]\" in local time")
	cmd.Flags().StringVar(&id, "id", "", "the task's ID (default a UUID); an ID the queue holds is refused")
	return cmd
}

// parseTime reads --at: RFC 3339, or a local date and time.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("--at %q: want RFC 3339 (2026-12-01T09:30:00Z) or a local \"2026-12-01 09:30[:00]\"", s)
}
