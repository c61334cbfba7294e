package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/apitoken"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/embedded"
	"github.com/htqueue/htq/internal/storage"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// remote is how a command reaches a running htq serve: the flags every
// such command has (--server, --token, --json) and what they resolve to.
type remote struct {
	*app
	server  string
	token   string
	json    bool
	storage string // --storage, on the token commands only
}

// addRemoteCommands adds every command that talks to a running service.
func addRemoteCommands(root *cobra.Command, a *app) {
	for _, newCmd := range []func(*remote) *cobra.Command{
		newQueueCmd, newTaskCmd, newEnqueueCmd, newWorkflowCmd, newScheduleCmd, newServersCmd, newGroupCmd, newStatsCmd, newEventsCmd, newTokenCmd,
	} {
		r := &remote{app: a}
		cmd := newCmd(r)
		f := cmd.PersistentFlags()
		f.StringVar(&r.server, "server", "", "htq serve's address (env HTQ_SERVER; default http://127.0.0.1:5999, or htq serve's own --addr setting found in HTQ_ADDR or the HTQ_CONFIG file)")
		f.BoolVar(&r.json, "json", false, "print one JSON document on stdout instead of text")
		if cmd.Name() != "token" {
			f.StringVar(&r.token, "token", "", "API token (env HTQ_TOKEN; default: the token htq serve on this machine uses, found through its settings and data)")
		}
		root.AddCommand(cmd)
	}
}

// serveConfig returns htq serve's settings as this environment gives them
// (HTQ_… variables, the HTQ_CONFIG file, the defaults), so that htq finds
// the service, its storage and its token on the service's own machine.
// Settings that do not resolve are left at their defaults.
func (r *remote) serveConfig() (addr, storageURL, token string) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.String("config", "", "")
	addSettingFlags(fs)
	o, err := resolve(fs, r.lookupEnv)
	if err != nil {
		return ":5999", "file:./htq-data", ""
	}
	return o.cfg.Addr, o.cfg.Storage, o.cfg.Token
}

// serverURL is --server, HTQ_SERVER, or the URL of htq serve's listen
// address on this machine; explicit says whether the first two gave it.
func (r *remote) serverURL() (url string, explicit bool) {
	if r.server != "" {
		return r.server, true
	}
	if s, ok := r.lookupEnv("HTQ_SERVER"); ok && s != "" {
		return s, true
	}
	addr, _, _ := r.serveConfig()
	return localURL(addr), false
}

// localURL turns a listen address (":5999", "0.0.0.0:5999",
// "10.0.0.5:8080") into the URL a client on the same machine uses.
func localURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return apiclient.DefaultServer
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// storageURL is --storage, else htq serve's storage setting.
func (r *remote) storageURL() string {
	if r.storage != "" {
		return r.storage
	}
	_, b, _ := r.serveConfig()
	return b
}

// findToken returns the token to send and where it came from: --token,
// HTQ_TOKEN or htq serve's config file, else the token stored with htq
// serve's data (the token file of an embedded store, the record in
// Redis). It returns "" when none is found.
func (r *remote) findToken(ctx context.Context) (tok, source string) {
	if r.token != "" {
		return r.token, "--token"
	}
	if t, ok := r.lookupEnv("HTQ_TOKEN"); ok && t != "" {
		return t, "HTQ_TOKEN"
	}
	_, storageURL, configured := r.serveConfig()
	if configured != "" {
		return configured, "htq serve's config file"
	}
	if dir, ok := storage.DataDir(storageURL); ok {
		if t, err := apitoken.ReadFile(dir); err == nil {
			return t, filepath.Join(dir, apitoken.FileName)
		}
		return "", ""
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	b, err := openMeta(ctx, storageURL)
	if err != nil {
		return "", ""
	}
	defer b.Close()
	set, err := apitoken.Load(ctx, b, time.Now())
	if err != nil {
		return "", ""
	}
	return set.Current, "the token stored in " + storageName(storageURL)
}

// client returns a client of the service with the token found.
func (r *remote) client(ctx context.Context) (*apiclient.Client, *tokenSource, error) {
	server, _ := r.serverURL()
	tok, source := r.findToken(ctx)
	c, err := apiclient.New(server, apiclient.Options{Token: tok, UserAgent: "htq/" + strings.Fields(versionString())[0]})
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("--server: %w", err)}
	}
	return c, &tokenSource{source: source}, nil
}

// tokenSource explains a refused token.
type tokenSource struct{ source string }

// explain rewrites an unauthorized answer into what to do about it.
func (s *tokenSource) explain(err error) error {
	if !errors.Is(err, apiclient.ErrUnauthorized) {
		return err
	}
	if s.source == "" {
		return mark(err, "the service wants a token: none was given and none found here; pass --token or set HTQ_TOKEN (on the service's machine, `htq token show` prints it)")
	}
	return mark(err, "the service refused the token from %s; pass the right one with --token or HTQ_TOKEN (on the service's machine, `htq token show` prints it)", s.source)
}

// call runs fn with a client of the service and explains a refused token.
func (r *remote) call(cmd *cobra.Command, fn func(ctx context.Context, c *apiclient.Client) error) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	c, src, err := r.client(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return src.explain(fn(ctx, c))
}

// openMeta opens the storage named by rawURL for the token commands. An
// embedded data directory must exist (Open would make an empty one) and
// not be held by a running htq serve (an error wrapping
// embedded.ErrLocked).
func openMeta(ctx context.Context, rawURL string) (broker.Broker, error) {
	if dir, ok := storage.DataDir(rawURL); ok {
		if dir == "" {
			return nil, usagef("storage %q names no directory; want e.g. file:./htq-data", rawURL)
		}
		if _, err := os.Stat(filepath.Join(dir, embedded.DataFileName)); err != nil {
			return nil, mark(base.ErrNotFound, "no htq data in %s (name htq serve's storage with --storage or HTQ_STORAGE)", dir)
		}
		return embedded.Open(ctx, dir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	}
	if strings.HasPrefix(rawURL, "mem:") {
		return nil, usagef("storage mem: lives inside one process; htq cannot reach it from outside")
	}
	st, err := storage.Open(ctx, rawURL, slog.New(slog.DiscardHandler))
	if errors.Is(err, base.ErrInvalidArgument) || errors.Is(err, base.ErrUnknownScheme) {
		return nil, usageError{err}
	}
	if err != nil {
		return nil, mark(errStorageUnreachable, "cannot reach the storage: %s", strings.TrimPrefix(err.Error(), "htq: "))
	}
	return storage.BrokerOf(st), nil
}

// storageName names a storage URL without its password.
func storageName(rawURL string) string {
	if dir, ok := storage.DataDir(rawURL); ok {
		return dir
	}
	return base.RedactURL(rawURL)
}

// printJSON writes v as one indented JSON document.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printJSONLine writes v as JSON on one line (a stream of documents).
func printJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes rows aligned in columns; flush writes them out.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// when formats a time for a table: local time, "-" for none.
func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// ms formats milliseconds as a duration, "-" for none.
func ms(n int64) string {
	if n <= 0 {
		return "-"
	}
	return (time.Duration(n) * time.Millisecond).String()
}
