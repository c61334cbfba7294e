package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command has a one-line summary and an example, and docs/cli.md
// lists it (serve and recover are documented in their own files).
func TestCommandsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCmd(&app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard, lookupEnv: func(string) (string, bool) { return "", false }})
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			n++
			path := sub.CommandPath()
			if sub.Short == "" || sub.Example == "" {
				t.Errorf("%s: no summary or no example", path)
			}
			if sub.Name() != "serve" && sub.Name() != "recover" && !strings.Contains(string(doc), "`"+path) {
				t.Errorf("docs/cli.md does not list `%s`", path)
			}
			walk(sub)
		}
	}
	walk(root)
	if n < 25 {
		t.Errorf("found only %d commands", n)
	}
}
