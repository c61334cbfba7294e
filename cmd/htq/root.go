package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"

	"github.com/htqueue/htq/internal/service"
)

// usageError marks an error in how htq was called or configured.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// app is what every command is given instead of reaching for package os:
// the standard streams and the environment.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	lookupEnv      func(string) (string, bool)
}

// run runs htq with args and returns its exit code (docs/cli.md lists
// them). Every failure is one line on stderr: "htq: " and what went wrong.
func run(args []string, stdout, stderr io.Writer) int {
	a := &app{stdin: os.Stdin, stdout: stdout, stderr: stderr, lookupEnv: os.LookupEnv}
	root := newRootCmd(a)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	msg := strings.TrimPrefix(err.Error(), "htq: ")
	fmt.Fprintf(stderr, "htq: %s\n", strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " "))
	return exitCode(err)
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "htq",
		Short: "htq: a task queue for every language, over HTTP",
		Long: `htq runs the task-queue service (htq serve) and manages a running one: its
queues, tasks, schedules and token. The commands that talk to a service find
it with --server (env HTQ_SERVER, default http://127.0.0.1:5999) and the
token with --token (env HTQ_TOKEN); on the service's own machine they find
both in htq serve's settings and data (docs/cli.md).`,
		Example: `  htq queue ls
  htq task ls mail --state retry
  htq enqueue hooks --url https://example.com/hook --in 10m
  htq stats`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usagef("%v (see %s --help)", err, c.CommandPath())
	})
	root.AddCommand(newServeCmd(a.stdout, a.stderr, a.lookupEnv), newVersionCmd(a.stdout), newRecoverCmd(a.stdout))
	addRemoteCommands(root, a)
	makeGroup(root)
	return root
}

// makeGroup makes a command that only holds subcommands print its help
// when called alone, and refuse an unknown subcommand in one line (cobra
// would print the help, or several lines of suggestions).
func makeGroup(cmd *cobra.Command) {
	cmd.SuggestionsMinimumDistance = 2
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += " (did you mean " + strings.Join(s, " or ") + "?)"
		}
		return usageError{fmt.Errorf("%s; see %s --help", msg, c.CommandPath())}
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
}

func newServeCmd(stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP API, the URL-task dispatcher and the schedule runner",
		Long: `serve runs htq as a service: the JSON API under /v1, the HTQ-compatible
/api endpoints, the dispatcher of URL tasks and the runner of stored
schedules. Settings come from flags, then HTQ_… environment variables, then
the TOML file given by --config, then the defaults (docs/configuration.md).
SIGTERM or SIGINT drains: the API stops accepting, running dispatches finish
or go back to pending, the storage is closed.`,
		Example: `  htq serve
  htq serve --storage redis://127.0.0.1:6379/0 --addr :5999
  HTQ_CONFIG=/etc/htq.toml htq serve`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := resolve(cmd.Flags(), lookupEnv)
			if err != nil {
				return usageError{err}
			}
			return serve(cmd.Context(), o, stdout, stderr)
		},
	}
	cmd.Flags().String("config", "", "TOML config file (env HTQ_CONFIG); its keys are the flag names with _ for -")
	addSettingFlags(cmd.Flags())
	return cmd
}

// serve runs the service until SIGTERM or SIGINT (a second signal exits at
// once) or a fatal error.
func serve(ctx context.Context, o *serveOptions, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	o.cfg.Logger = o.newLogger(stderr)
	for _, w := range o.warnings {
		o.cfg.Logger.Warn(w)
	}
	// Packages that log through the default logger (the embedded store at
	// open) write in the same format and at the same level.
	slog.SetDefault(o.cfg.Logger)
	lookup := o.lookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	defer applyGC(o.gc, lookup, o.cfg.Logger)()
	defer applyProcs(o.cfg.WithDefaults().Storage, lookup, o.cfg.Logger)()
	o.cfg.Stdout = stdout
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tp, err := service.NewTracerProvider(startCtx, moduleVersion())
	if err != nil {
		return err
	}
	if tp != nil {
		// The exporter's errors (a collector that is down) go to the log.
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			o.cfg.Logger.Warn("OpenTelemetry export failed", "err", err)
		}))
		o.cfg.TracerProvider = tp
		o.cfg.Logger.Info("tracing: spans are exported with OTLP (OTEL_EXPORTER_OTLP_* settings)")
		defer func() {
			// Send the last batch of spans.
			flushCtx, cancelFlush := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancelFlush()
			if err := tp.Shutdown(flushCtx); err != nil {
				o.cfg.Logger.Warn("tracing: the last spans were not exported", "err", err)
			}
		}()
	}
	svc, err := service.Start(startCtx, o.cfg)
	cancel()
	if err != nil {
		return err
	}
	select {
	case sig := <-sigs:
		o.cfg.Logger.Info("signal received; draining (send it again to exit at once)", "signal", sig.String())
	case <-svc.Done():
		return svc.Err()
	case <-ctx.Done():
	}
	go func() {
		<-sigs
		fmt.Fprintln(stderr, "htq: second signal: exiting without draining")
		os.Exit(exitError)
	}()
	timeout := o.cfg.WithDefaults().ShutdownTimeout + 15*time.Second
	shutCtx, cancelShut := context.WithTimeout(context.Background(), timeout)
	defer cancelShut()
	if err := svc.Shutdown(shutCtx); err != nil {
		return err
	}
	return svc.Err()
}
