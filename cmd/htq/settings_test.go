package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// parse runs the serve command's flag parsing and resolve with the given
// arguments and environment.
func parse(t *testing.T, args []string, env map[string]string) (*serveOptions, error) {
	t.Helper()
	var got *serveOptions
	var resolveErr error
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cmd := newServeCmd(&bytes.Buffer{}, &bytes.Buffer{}, lookup)
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		got, resolveErr = resolve(c.Flags(), lookup)
		return nil
	}
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	return got, resolveErr
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "htq.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	o, err := parse(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	if c.Addr != ":5999" || c.Broker != "file:./htq-data" || c.Concurrency != 100 || c.TimeZone != "Local" ||
		c.Token != "" || c.AllowTargets != nil || c.DispatchTimeout != 30*time.Second || o.logFormat != "text" {
		t.Errorf("defaults: %+v", c)
	}
}

// flag > env > file > default, setting by setting.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
addr = "127.0.0.1:7001"
broker = "redis://127.0.0.1:6379/3"
concurrency = 7
allow_targets = ["10.0.0.0/8", "localhost"]
tz = "Europe/Paris"
shutdown_timeout = "3s"
log_level = "debug"
`)
	env := map[string]string{
		"HTQ_CONFIG":      file,
		"HTQ_BROKER":      "redis://127.0.0.1:6379/4",
		"HTQ_CONCURRENCY": "8",
		"HTQ_TZ":          "UTC",
	}
	o, err := parse(t, []string{"--concurrency", "9", "--allow-targets", "127.0.0.0/8,::1"}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := o.cfg
	for name, pair := range map[string][2]any{
		"addr (file)":              {c.Addr, "127.0.0.1:7001"},
		"broker (env over file)":   {c.Broker, "redis://127.0.0.1:6379/4"},
		"concurrency (flag)":       {c.Concurrency, 9},
		"tz (env over file)":       {c.TimeZone, "UTC"},
		"shutdown_timeout (file)":  {c.ShutdownTimeout, 3 * time.Second},
		"allow-targets (flag)":     {strings.Join(c.AllowTargets, "|"), "127.0.0.0/8|::1"},
		"write timeout (default)":  {c.WriteTimeout, 90 * time.Second},
		"log level (file)":         {o.logLevel.String(), "DEBUG"},
		"max body bytes (default)": {c.MaxBodyBytes, int64(4 << 20)},
	} {
		if pair[0] != pair[1] {
			t.Errorf("%s = %v, want %v", name, pair[0], pair[1])
		}
	}

	// --config beats HTQ_CONFIG.
	other := writeFile(t, `addr = "127.0.0.1:7002"`)
	o, err = parse(t, []string{"--config", other}, env)
	if err != nil {
		t.Fatal(err)
	}
	if o.cfg.Addr != "127.0.0.1:7002" {
		t.Errorf("--config: addr %q", o.cfg.Addr)
	}
}

func TestConfigFileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"unknown key", "addr = \":1\"\nconcurency = 5\n", []string{"unknown key", "concurency"}},
		{"unknown table", "[server]\nport = 5\n", []string{"unknown key", "server"}},
		{"wrong type", "concurrency = \"many\"\n", []string{"concurrency", "whole number"}},
		{"duration as number", "shutdown_timeout = 10\n", []string{"shutdown_timeout", "duration"}},
		{"list of numbers", "allow_targets = [1, 2]\n", []string{"allow_targets", "list of strings"}},
		{"bad toml", "addr = \n", []string{"htq.toml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, []string{"--config", writeFile(t, tc.text)}, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	if _, err := parse(t, []string{"--config", "/nonexistent/htq.toml"}, nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/htq.toml") {
		t.Errorf("missing file: %v", err)
	}
}

// A bad value names where it came from.
func TestBadValuesNameTheirSource(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--concurrency", "lots"}, nil, "--concurrency"},
		{nil, map[string]string{"HTQ_CONCURRENCY": "0"}, "HTQ_CONCURRENCY"},
		{[]string{"--dispatch-timeout", "30"}, nil, "--dispatch-timeout"},
		{nil, map[string]string{"HTQ_LOG_LEVEL": "loud"}, "HTQ_LOG_LEVEL"},
		{[]string{"--log-format", "xml"}, nil, "--log-format"},
		{[]string{"--shutdown-timeout", "-1s"}, nil, "--shutdown-timeout"},
	} {
		_, err := parse(t, tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want one naming %s", tc.args, tc.env, err, tc.want)
		}
	}
}

// Every setting is in docs/configuration.md with its flag, variable and key.
func TestSettingsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, s := range settings {
		for _, want := range []string{"`--" + s.flag + "`", "`" + s.env + "`", "`" + s.key + "`"} {
			if !strings.Contains(text, want) {
				t.Errorf("docs/configuration.md does not mention %s (setting %s)", want, s.flag)
			}
		}
	}
	for _, want := range []string{"`--config`", "`HTQ_CONFIG`"} {
		if !strings.Contains(text, want) {
			t.Errorf("docs/configuration.md does not mention %s", want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"version"}, &out, &errOut); code != exitOK || !strings.HasPrefix(out.String(), "htq ") {
		t.Errorf("version: code %d, output %q", code, out.String())
	}
	errOut.Reset()
	if code := run([]string{"serve", "--no-such-flag"}, &out, &errOut); code != exitUsage {
		t.Errorf("unknown flag: code %d (%s)", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"serve", "--concurrency", "x"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "--concurrency") {
		t.Errorf("bad value: code %d (%s)", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"serve", "--tz", "Nowhere/Else", "--broker", "mem:", "--addr", "127.0.0.1:0"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "tz") {
		t.Errorf("bad tz: code %d (%s)", code, errOut.String())
	}
}

// --ui-read-only is a switch: alone it means true; the variable and the
// file key take true or false; anything else names its source.
func TestUIReadOnlySetting(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want bool
	}{
		{nil, nil, false},
		{[]string{"--ui-read-only"}, nil, true},
		{[]string{"--ui-read-only=false"}, map[string]string{"HTQ_UI_READ_ONLY": "true"}, false},
		{nil, map[string]string{"HTQ_UI_READ_ONLY": "true"}, true},
		{nil, map[string]string{"HTQ_CONFIG": writeFile(t, "ui_read_only = true\n")}, true},
	} {
		o, err := parse(t, tc.args, tc.env)
		if err != nil {
			t.Fatalf("%v %v: %v", tc.args, tc.env, err)
		}
		if o.cfg.UIReadOnly != tc.want {
			t.Errorf("%v %v: UIReadOnly = %v, want %v", tc.args, tc.env, o.cfg.UIReadOnly, tc.want)
		}
	}
	if _, err := parse(t, nil, map[string]string{"HTQ_UI_READ_ONLY": "maybe"}); err == nil || !strings.Contains(err.Error(), "HTQ_UI_READ_ONLY") {
		t.Errorf("bad variable: %v", err)
	}
	if _, err := parse(t, nil, map[string]string{"HTQ_CONFIG": writeFile(t, "ui_read_only = \"yes\"\n")}); err == nil || !strings.Contains(err.Error(), "ui_read_only") {
		t.Errorf("bad file value: %v", err)
	}
}
