package main

import (
	"bytes"
	"fmt"
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
	if c.Addr != ":5999" || c.Storage != "file:./htq-data" || c.Concurrency != 100 || c.TimeZone != "Local" ||
		c.Token != "" || c.AllowTargets != nil || c.DispatchTimeout != 30*time.Second || o.logFormat != "text" {
		t.Errorf("defaults: %+v", c)
	}
}

// flag > env > file > default, setting by setting.
func TestPrecedence(t *testing.T) {
	file := writeFile(t, `
addr = "127.0.0.1:7001"
storage = "redis://127.0.0.1:6379/3"
concurrency = 7
allow_targets = ["10.0.0.0/8", "localhost"]
tz = "Europe/Paris"
shutdown_timeout = "3s"
log_level = "debug"
`)
	env := map[string]string{
		"HTQ_CONFIG":      file,
		"HTQ_STORAGE":     "redis://127.0.0.1:6379/4",
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
		"storage (env over file)":  {c.Storage, "redis://127.0.0.1:6379/4"},
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
		{[]string{"--redis-wait-replicas", "-1"}, nil, "--redis-wait-replicas"},
		{nil, map[string]string{"HTQ_REDIS_WAIT_REPLICAS": "one"}, "HTQ_REDIS_WAIT_REPLICAS"},
		{[]string{"--redis-wait-timeout", "500"}, nil, "--redis-wait-timeout"},
		{nil, map[string]string{"HTQ_REDIS_WAIT_AOF_LOCAL": "sometimes"}, "HTQ_REDIS_WAIT_AOF_LOCAL"},
	} {
		_, err := parse(t, tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v %v: error %v, want one naming %s", tc.args, tc.env, err, tc.want)
		}
	}
}

// A value the service refuses names where it came from too: the flag, the
// environment variable, or the config file and key.
func TestInvalidSettingsNameTheirSource(t *testing.T) {
	for _, tc := range []struct {
		setting, bad string
	}{
		{"tz", "Mars/Olympus"},
		{"token", "short"},
		{"htq-app-key", "key-without-token"},
		{"write-timeout", "10s"},
		{"storage", "nowhere"},
		{"addr", "localhost"},
		{"concurrency", "lots"},
	} {
		var s setting
		for _, st := range settings {
			if st.flag == tc.setting {
				s = st
			}
		}
		t.Run(tc.setting, func(t *testing.T) {
			if s.flag == "" {
				t.Fatalf("no setting %s", tc.setting)
			}
			path := writeFile(t, fmt.Sprintf("%s = %q\n", s.key, tc.bad))
			if s.kind == kindInt {
				path = writeFile(t, s.key+" = -1\n")
			}
			for _, src := range []struct {
				name string
				args []string
				env  map[string]string
				want string
			}{
				{"flag", []string{"--" + s.flag, tc.bad}, nil, "--" + s.flag + ":"},
				{"environment", nil, map[string]string{s.env: tc.bad}, s.env + ":"},
				{"file", []string{"--config", path}, nil, "config file " + path + ", key " + s.key + ":"},
			} {
				_, err := parse(t, src.args, src.env)
				if err == nil || !strings.Contains(err.Error(), src.want) {
					t.Errorf("%s from the %s: error %v, want one naming %q", tc.setting, src.name, err, src.want)
				}
			}
		})
	}
}

// The redis-wait-* settings from a flag, the environment and the file,
// the bool one included.
func TestRedisWaitSettings(t *testing.T) {
	file := writeFile(t, "storage = \"redis://127.0.0.1:6379/0\"\nredis_wait_replicas = 2\nredis_wait_timeout = \"250ms\"\nredis_wait_aof_local = true\n")
	o, err := parse(t, []string{"--config", file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := o.cfg; c.RedisWaitReplicas != 2 || c.RedisWaitTimeout != 250*time.Millisecond || !c.RedisWaitAOFLocal {
		t.Errorf("from the file: %d, %v, %v", c.RedisWaitReplicas, c.RedisWaitTimeout, c.RedisWaitAOFLocal)
	}
	o, err = parse(t, []string{"--redis-wait-aof-local", "--redis-wait-timeout", "2s"}, map[string]string{"HTQ_REDIS_WAIT_REPLICAS": "1", "HTQ_STORAGE": "redis://127.0.0.1:6379/0"})
	if err != nil {
		t.Fatal(err)
	}
	if c := o.cfg; c.RedisWaitReplicas != 1 || c.RedisWaitTimeout != 2*time.Second || !c.RedisWaitAOFLocal {
		t.Errorf("from flags and env: %d, %v, %v", c.RedisWaitReplicas, c.RedisWaitTimeout, c.RedisWaitAOFLocal)
	}
	o, err = parse(t, []string{"--redis-wait-aof-local=false"}, nil)
	if err != nil || o.cfg.RedisWaitAOFLocal {
		t.Errorf("--redis-wait-aof-local=false: %v, %v", o.cfg.RedisWaitAOFLocal, err)
	}
	if _, err := parse(t, []string{"--config", writeFile(t, "redis_wait_aof_local = \"yes\"\n")}, nil); err == nil || !strings.Contains(err.Error(), "redis_wait_aof_local") {
		t.Errorf("string for a bool in the file: %v", err)
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
	if code := run([]string{"serve", "--tz", "Nowhere/Else", "--storage", "mem:", "--addr", "127.0.0.1:0"}, &out, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "tz") {
		t.Errorf("bad tz: code %d (%s)", code, errOut.String())
	}
}

// An error is printed with one "htq: ", whether it comes from the command
// line or from the library (whose errors start with "htq: " already).
func TestErrorPrefixedOnce(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--concurrency", "x"},
		{"serve", "--token", "short", "--storage", "mem:", "--addr", "127.0.0.1:0"},
	} {
		var out, errOut bytes.Buffer
		run(args, &out, &errOut)
		if msg := errOut.String(); !strings.HasPrefix(msg, "htq: ") || strings.Contains(msg, "htq: htq:") {
			t.Errorf("%v printed %q", args, msg)
		}
	}
}

// The storage setting's former names (--broker, HTQ_BROKER, the file key
// broker) still work, after the current ones, with a warning each.
func TestOldStorageNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"flag", []string{"--broker", "mem:"}, nil, "--broker is deprecated"},
		{"environment", nil, map[string]string{"HTQ_BROKER": "mem:"}, "HTQ_BROKER is deprecated"},
		{"file", []string{"--config", writeFile(t, "broker = \"mem:\"\n")}, nil, "key broker is deprecated"},
	} {
		o, err := parse(t, tc.args, tc.env)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if o.cfg.Storage != "mem:" || len(o.warnings) != 1 || !strings.Contains(o.warnings[0], tc.want) {
			t.Errorf("%s: storage %q, warnings %q", tc.name, o.cfg.Storage, o.warnings)
		}
	}
	// The current name wins over the old one in the same layer.
	o, err := parse(t, []string{"--broker", "mem:", "--storage", "file:x"}, nil)
	if err != nil || o.cfg.Storage != "file:x" || len(o.warnings) != 0 {
		t.Errorf("both flags: %q %q %v", o.cfg.Storage, o.warnings, err)
	}
}

// --ui-read-only and --pprof are switches: alone each means true; the
// variable and the file key take true or false; anything else names its
// source.
func TestSwitchSettings(t *testing.T) {
	for _, sw := range []struct {
		flag, env, key string
		get            func(o *serveOptions) bool
	}{
		{"ui-read-only", "HTQ_UI_READ_ONLY", "ui_read_only", func(o *serveOptions) bool { return o.cfg.UIReadOnly }},
		{"pprof", "HTQ_PPROF", "pprof", func(o *serveOptions) bool { return o.cfg.Pprof }},
	} {
		for _, tc := range []struct {
			args []string
			env  map[string]string
			want bool
		}{
			{nil, nil, false},
			{[]string{"--" + sw.flag}, nil, true},
			{[]string{"--" + sw.flag + "=false"}, map[string]string{sw.env: "true"}, false},
			{nil, map[string]string{sw.env: "true"}, true},
			{nil, map[string]string{"HTQ_CONFIG": writeFile(t, sw.key+" = true\n")}, true},
		} {
			o, err := parse(t, tc.args, tc.env)
			if err != nil {
				t.Fatalf("%v %v: %v", tc.args, tc.env, err)
			}
			if got := sw.get(o); got != tc.want {
				t.Errorf("%v %v: %s = %v, want %v", tc.args, tc.env, sw.flag, got, tc.want)
			}
		}
		if _, err := parse(t, nil, map[string]string{sw.env: "maybe"}); err == nil || !strings.Contains(err.Error(), sw.env) {
			t.Errorf("bad variable %s: %v", sw.env, err)
		}
		if _, err := parse(t, nil, map[string]string{"HTQ_CONFIG": writeFile(t, sw.key+" = \"yes\"\n")}); err == nil || !strings.Contains(err.Error(), sw.key) {
			t.Errorf("bad file value %s: %v", sw.key, err)
		}
	}
}
