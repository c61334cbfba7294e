package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/spf13/cobra"
)

func newWorkflowCmd(r *remote) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workflow",
		Short: "Enqueue, show and cancel workflows (tasks with dependencies)",
		Example: `  htq workflow enqueue order-42.json
  htq workflow get order-42
  htq workflow cancel order-42`,
	}
	makeGroup(cmd)
	cmd.AddCommand(
		&cobra.Command{
			Use:   "enqueue FILE",
			Short: "Enqueue the workflow FILE describes (the body of POST /v1/workflows; - reads stdin)",
			Long: `enqueue sends FILE, a JSON object {"id", "retention", "tasks": [...]} as
docs/api.md describes it, to POST /v1/workflows: the workflow is stored
whole or not at all. A refused workflow's error names its tasks.`,
			Example: `  htq workflow enqueue order-42.json
  echo '{"tasks":[{"id":"a","queue":"jobs","type":"a"},{"id":"b","queue":"jobs","type":"b","depends_on":["a"]}]}' | htq workflow enqueue -`,
			Args: wantArgs("FILE"),
			RunE: func(cmd *cobra.Command, args []string) error {
				body, err := readWorkflowFile(args[0], cmd.InOrStdin())
				if err != nil {
					return err
				}
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					return r.showWorkflow(c.EnqueueWorkflow(ctx, body))
				})
			},
		},
		&cobra.Command{
			Use:     "get ID",
			Aliases: []string{"inspect"},
			Short:   "Show a workflow: its state and each task's state and outcome",
			Example: "  htq workflow get order-42",
			Args:    wantArgs("ID"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					return r.showWorkflow(c.Workflow(ctx, args[0]))
				})
			},
		},
		&cobra.Command{
			Use:     "cancel ID",
			Short:   "Cancel every task of a workflow that has not finished",
			Example: "  htq workflow cancel order-42",
			Args:    wantArgs("ID"),
			RunE: func(cmd *cobra.Command, args []string) error {
				return r.call(cmd, func(ctx context.Context, c *apiclient.Client) error {
					n, err := c.CancelWorkflow(ctx, args[0])
					if err != nil {
						return err
					}
					return r.done(map[string]any{"id": args[0], "canceled": n}, "workflow %s canceled: %d tasks archived", args[0], n)
				})
			},
		},
	)
	return cmd
}

// readWorkflowFile reads a workflow's JSON from path ("-": stdin) and
// checks that it is one JSON object.
func readWorkflowFile(path string, stdin io.Reader) (json.RawMessage, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usagef("workflow enqueue: %v", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, usagef("workflow enqueue: %s is not a JSON object: %v", path, err)
	}
	return json.RawMessage(data), nil
}

// showWorkflow prints what a workflow call answered: the workflow as
// JSON (--json) or text, or the call's error.
func (r *remote) showWorkflow(wf *apiclient.Workflow, err error) error {
	if err != nil {
		return err
	}
	if r.json {
		return printJSON(r.stdout, wf)
	}
	return printWorkflow(r.stdout, wf)
}

// printWorkflow writes a workflow and a table of its tasks.
func printWorkflow(w io.Writer, wf *apiclient.Workflow) error {
	if _, err := fmt.Fprintf(w, "workflow %s: %s (created %s, finished %s)\n", wf.ID, wf.State, when(&wf.CreatedAt), when(wf.FinishedAt)); err != nil {
		return err
	}
	t := newTable(w, "TASK", "QUEUE", "TASK ID", "STATE", "OUTCOME", "DEPENDS ON", "LAST ERROR")
	for _, task := range wf.Tasks {
		var deps []string
		for _, d := range task.DependsOn {
			s := d.ID
			if d.OnFailure == "run" {
				s += " (run)"
			}
			deps = append(deps, s)
		}
		state := task.State
		if state == "" {
			state = "gone"
		}
		t.row(task.ID, task.Queue, task.TaskID, state, clip(task.Outcome, 12), clip(strings.Join(deps, ", "), 40), clip(task.LastError, 60))
	}
	return t.flush()
}
