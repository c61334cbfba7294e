package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/embedded"
	"github.com/htqueue/htq/internal/model"
	"github.com/spf13/cobra"
)

// Exit codes of htq (docs/cli.md lists them).
const (
	exitOK          = 0
	exitError       = 1 // anything below does not name: the service failed, a bug
	exitUsage       = 2 // bad command, flag, argument or configuration; input the service refused
	exitAuth        = 3 // the service refused the token
	exitNotFound    = 4 // no such queue, task, workflow or schedule
	exitConflict    = 5 // the task's or queue's state does not allow it (wrong state, not empty, exists, duplicate)
	exitUnavailable = 6 // the service or its storage did not answer; the data directory is in use
)

// exitCodes maps errors to exit codes, first match wins; the sentinels are
// those apiclient maps the API's answers back to.
var exitCodes = []struct {
	err  error
	code int
}{
	{htq.ErrInvalidArgument, exitUsage},
	{htq.ErrPayloadTooLarge, exitUsage},
	{model.ErrTargetNotAllowed, exitUsage},
	{apiclient.ErrUnauthorized, exitAuth},
	{htq.ErrQueueNotFound, exitNotFound},
	{htq.ErrTaskNotFound, exitNotFound},
	{htq.ErrWorkflowNotFound, exitNotFound},
	{base.ErrNotFound, exitNotFound},
	{htq.ErrWrongState, exitConflict},
	{htq.ErrDuplicateTask, exitConflict},
	{htq.ErrTaskIDConflict, exitConflict},
	{htq.ErrWorkflowIDConflict, exitConflict},
	{base.ErrQueueNotEmpty, exitConflict},
	{model.ErrModeMismatch, exitConflict},
	{model.ErrQueueExists, exitConflict},
	{htq.ErrLeaseLost, exitConflict},
	{apiclient.ErrUnreachable, exitUnavailable},
	{apiclient.ErrUnavailable, exitUnavailable},
	{htq.ErrReplicationTimeout, exitUnavailable},
	{embedded.ErrLocked, exitUnavailable},
	{errStorageUnreachable, exitUnavailable},
	{htq.ErrUnknownScheme, exitUsage},
}

// exitCode is the exit code for err.
func exitCode(err error) int {
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	for _, row := range exitCodes {
		if errors.Is(err, row.err) {
			return row.code
		}
	}
	return exitError
}

// markedError is an error whose message is msg alone and which
// errors.Is matches with err (a sentinel that sets the exit code).
type markedError struct {
	msg string
	err error
}

func (e *markedError) Error() string { return e.msg }
func (e *markedError) Unwrap() error { return e.err }

// mark returns an error with the formatted message that wraps sentinel.
func mark(sentinel error, format string, args ...any) error {
	return &markedError{msg: fmt.Sprintf(format, args...), err: sentinel}
}

// errStorageUnreachable means the storage named did not answer.
var errStorageUnreachable = errors.New("storage unreachable")

// noArgs refuses any argument.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q (see %s --help)", name(c), strings.Join(args, " "), c.CommandPath())
	}
	return nil
}

// wantArgs takes exactly the named arguments.
func wantArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) == len(names) {
			for i, a := range args {
				if strings.TrimSpace(a) == "" {
					return usagef("%s: %s is empty", name(c), names[i])
				}
			}
			return nil
		}
		want := strings.Join(names, " ")
		if len(args) < len(names) {
			return usagef("%s: missing %s (usage: %s)", name(c), strings.Join(names[len(args):], " "), c.UseLine())
		}
		return usagef("%s wants %s, got %d arguments: %q (usage: %s)", name(c), want, len(args), strings.Join(args, " "), c.UseLine())
	}
}

// name is a command's path without "htq ", for messages that "htq: "
// starts already.
func name(c *cobra.Command) string {
	return strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
}
