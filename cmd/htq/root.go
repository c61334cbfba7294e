package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/htqueue/htq/internal/service"
	"github.com/spf13/cobra"
)

// Exit codes of htq.
const (
	exitOK    = 0
	exitError = 1 // the service failed, or could not start
	exitUsage = 2 // bad flags, environment or config file
)

// usageError marks an error in how htq was called or configured.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// run runs htq with args and returns its exit code.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr, os.LookupEnv)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	// Errors of the library already start with "htq: ".
	msg := err.Error()
	if !strings.HasPrefix(msg, "htq: ") {
		msg = "htq: " + msg
	}
	fmt.Fprintln(stderr, msg)
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, service.ErrInvalidConfig) {
		return exitUsage
	}
	return exitError
}

func newRootCmd(stdout, stderr io.Writer, lookupEnv func(string) (string, bool)) *cobra.Command {
	root := &cobra.Command{
		Use:           "htq",
		Short:         "htq: a task queue for every language, over HTTP",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newServeCmd(stdout, stderr, lookupEnv), newVersionCmd(stdout), newRecoverCmd(stdout))
	return root
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
	o.cfg.Stdout = stdout
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	startCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
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

// version is set at build time with -ldflags "-X main.version=…"; without
// it the module version from the build information is shown.
var version = ""

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print htq's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(stdout, "htq %s %s %s/%s\n", versionString(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

func versionString() string {
	if version != "" {
		return version
	}
	v := "(devel)"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if info.Main.Version != "" {
		v = info.Main.Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}
