package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/htqueue/htq/internal/service"
	"github.com/spf13/pflag"
)

// A setting is one configuration value of `htq serve`, reachable as a
// flag, an environment variable and a config-file key. The table below is
// the single list of them; docs/configuration.md mirrors it (a test checks
// that every setting is documented).
type setting struct {
	flag string // --flag
	env  string // HTQ_…
	key  string // key in the TOML file
	// old names the setting's former flag, variable and key, still read
	// (after the current ones) with a warning.
	old   *oldNames
	kind  kind
	def   string // default, in the flag's text form
	usage string
	// apply stores the parsed value in the options being built.
	apply func(o *serveOptions, v value) error
}

// oldNames are the names a setting had before it was renamed.
type oldNames struct{ flag, env, key string }

// kind is the type of a setting's value.
type kind string

const (
	kindString   kind = "string"
	kindInt      kind = "int"
	kindDuration kind = "duration"
	kindList     kind = "list"
	kindBool     kind = "bool"
)

// value is a setting's value in text form with where it came from, for
// error messages.
type value struct {
	text   string
	source string // "--addr", "HTQ_ADDR", "config file key addr", "default"
}

// serveOptions is everything `htq serve` is configured with.
type serveOptions struct {
	cfg       service.Config
	logLevel  slog.Level
	logFormat string
	// gc is the garbage collector's configuration, applied by serve.
	gc gcSettings
	// lookupEnv reads the environment resolve read (GOGC, GOMEMLIMIT).
	lookupEnv func(string) (string, bool)
	// warnings are logged once the logger exists (deprecated names used).
	warnings []string
}

func (v value) int() (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v.text))
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a whole number", v.source, v.text)
	}
	return n, nil
}

func (v value) duration() (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v.text))
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a duration (write e.g. 500ms, 30s, 5m)", v.source, v.text)
	}
	return d, nil
}

func (v value) bool() (bool, error) {
	b, err := strconv.ParseBool(strings.TrimSpace(v.text))
	if err != nil {
		return false, fmt.Errorf("%s: %q is not true or false", v.source, v.text)
	}
	return b, nil
}

func (v value) list() []string {
	var out []string
	for _, s := range strings.Split(v.text, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// settings lists every setting of `htq serve`.
var settings = []setting{
	{flag: "addr", env: "HTQ_ADDR", key: "addr", kind: kindString, def: service.DefaultAddr,
		usage: "TCP address the HTTP API listens on",
		apply: func(o *serveOptions, v value) error { o.cfg.Addr = v.text; return nil }},
	{flag: "storage", env: "HTQ_STORAGE", key: "storage", kind: kindString, def: service.DefaultStorage,
		old:   &oldNames{flag: "broker", env: "HTQ_BROKER", key: "broker"},
		usage: "storage URL: file:DIR (embedded, one process), redis://host:port/db, rediss://, redis-sentinel://, redis-cluster://",
		apply: func(o *serveOptions, v value) error { o.cfg.Storage = v.text; return nil }},
	{flag: "storage-timeout", env: "HTQ_STORAGE_TIMEOUT", key: "storage_timeout", kind: kindDuration,
		usage: "bound on every storage call: a Redis that is down or loading answers 503 with Retry-After within it (default 5s; the URL's timeout=)",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.StorageTimeout, err = positive(v); return err }},
	{flag: "redis-wait-replicas", env: "HTQ_REDIS_WAIT_REPLICAS", key: "redis_wait_replicas", kind: kindInt, def: "0",
		usage: "Redis storage: replicas that must have received each enqueue and task outcome before it succeeds (WAIT; 0: none)",
		apply: func(o *serveOptions, v value) (err error) {
			o.cfg.RedisWaitReplicas, err = v.int()
			if err == nil && o.cfg.RedisWaitReplicas < 0 {
				err = fmt.Errorf("%s: %d is negative", v.source, o.cfg.RedisWaitReplicas)
			}
			return err
		}},
	{flag: "redis-wait-timeout", env: "HTQ_REDIS_WAIT_TIMEOUT", key: "redis_wait_timeout", kind: kindDuration,
		usage: "Redis storage: how long a write waits for its replicas or fsync before it fails (default 1s)",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.RedisWaitTimeout, err = positive(v); return err }},
	{flag: "redis-wait-aof-local", env: "HTQ_REDIS_WAIT_AOF_LOCAL", key: "redis_wait_aof_local", kind: kindBool, def: "false",
		usage: "Redis storage: each enqueue and task outcome waits until the primary fsynced it to its append-only file (WAITAOF, Redis 7.2+)",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.RedisWaitAOFLocal, err = v.bool(); return err }},
	{flag: "token", env: "HTQ_TOKEN", key: "token", kind: kindString,
		usage: "API token (Authorization: Bearer …); unset: generated on the first start and stored with the data",
		apply: func(o *serveOptions, v value) error { o.cfg.Token = v.text; return nil }},
	{flag: "htq-app-key", env: "HTQ_APP_KEY", key: "htq_app_key", kind: kindString,
		usage: "app_key of the HTQ-compatible /api endpoints (unset: they refuse every call)",
		apply: func(o *serveOptions, v value) error { o.cfg.HTQAppKey = v.text; return nil }},
	{flag: "htq-app-token", env: "HTQ_APP_TOKEN", key: "htq_app_token", kind: kindString,
		usage: "app_token of the HTQ-compatible /api endpoints",
		apply: func(o *serveOptions, v value) error { o.cfg.HTQAppToken = v.text; return nil }},
	{flag: "signing-secrets", env: "HTQ_SIGNING_SECRETS", key: "signing_secrets", kind: kindList,
		usage: "webhook signing secrets, whsec_… (comma list; two during a rotation, current first); unset: generated and stored",
		apply: func(o *serveOptions, v value) error { o.cfg.SigningSecrets = v.list(); return nil }},
	{flag: "allow-targets", env: "HTQ_ALLOW_TARGETS", key: "allow_targets", kind: kindList,
		usage: "comma list of CIDRs, IPs, host names or *.domain wildcards URL tasks may reach although not public (e.g. 127.0.0.0/8)",
		apply: func(o *serveOptions, v value) error { o.cfg.AllowTargets = v.list(); return nil }},
	{flag: "cors-origins", env: "HTQ_CORS_ORIGINS", key: "cors_origins", kind: kindList,
		usage: "comma list of origins (https://host[:port], or *) whose browsers may call the /v1 API; unset: none",
		apply: func(o *serveOptions, v value) error { o.cfg.CORSOrigins = v.list(); return nil }},
	{flag: "tz", env: "HTQ_TZ", key: "tz", kind: kindString, def: service.DefaultTimeZone,
		usage: "time zone of HTQ's execute_time and of cron schedules (IANA name, UTC or Local)",
		apply: func(o *serveOptions, v value) error { o.cfg.TimeZone = v.text; return nil }},
	{flag: "concurrency", env: "HTQ_CONCURRENCY", key: "concurrency", kind: kindInt, def: strconv.Itoa(service.DefaultConcurrency),
		usage: "URL tasks the dispatcher runs at once",
		apply: func(o *serveOptions, v value) (err error) {
			o.cfg.Concurrency, err = v.int()
			if err == nil && o.cfg.Concurrency <= 0 {
				err = fmt.Errorf("%s: %d is not a positive number", v.source, o.cfg.Concurrency)
			}
			return err
		}},
	{flag: "dispatch-timeout", env: "HTQ_DISPATCH_TIMEOUT", key: "dispatch_timeout", kind: kindDuration, def: service.DefaultDispatchTimeout.String(),
		usage: "request timeout of a URL task whose task and queue set none",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.DispatchTimeout, err = positive(v); return err }},
	{flag: "completed-retention", env: "HTQ_COMPLETED_RETENTION", key: "completed_retention", kind: kindDuration, def: service.DefaultCompletedRetention.String(),
		usage: "how long a completed task is kept with its result when neither it nor its queue says (0: not kept)",
		apply: func(o *serveOptions, v value) error {
			d, err := v.duration()
			switch {
			case err != nil:
				return err
			case d < 0:
				return fmt.Errorf("%s: %v is negative (0 keeps no completed task)", v.source, d)
			case d == 0:
				d = -1 // the service's "keep none"; its 0 is the default
			}
			o.cfg.CompletedRetention = d
			return nil
		}},
	{flag: "max-body-bytes", env: "HTQ_MAX_BODY_BYTES", key: "max_body_bytes", kind: kindInt, def: strconv.Itoa(service.DefaultMaxBodyBytes),
		usage: "largest API request body in bytes (larger: 413)",
		apply: func(o *serveOptions, v value) error {
			n, err := v.int()
			if err == nil && n <= 0 {
				err = fmt.Errorf("%s: %d is not a positive number", v.source, n)
			}
			o.cfg.MaxBodyBytes = int64(n)
			return err
		}},
	{flag: "shutdown-timeout", env: "HTQ_SHUTDOWN_TIMEOUT", key: "shutdown_timeout", kind: kindDuration, def: service.DefaultShutdownTimeout.String(),
		usage: "how long SIGTERM waits for running dispatches before sending them back to pending",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.ShutdownTimeout, err = positive(v); return err }},
	{flag: "queue-refresh-interval", env: "HTQ_QUEUE_REFRESH_INTERVAL", key: "queue_refresh_interval", kind: kindDuration, def: service.DefaultQueueRefreshInterval.String(),
		usage: "how often the dispatcher re-reads the list of URL queues (new queues are also seen through storage events)",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.QueueRefreshInterval, err = positive(v); return err }},
	{flag: "schedule-reload-interval", env: "HTQ_SCHEDULE_RELOAD_INTERVAL", key: "schedule_reload_interval", kind: kindDuration, def: service.DefaultScheduleReloadInterval.String(),
		usage: "how often the stored schedules are re-read (changes through this process apply at once)",
		apply: func(o *serveOptions, v value) (err error) {
			o.cfg.ScheduleReloadInterval, err = positive(v)
			return err
		}},
	{flag: "read-header-timeout", env: "HTQ_READ_HEADER_TIMEOUT", key: "read_header_timeout", kind: kindDuration, def: service.DefaultReadHeaderTimeout.String(),
		usage: "HTTP server: time to read a request's headers",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.ReadHeaderTimeout, err = positive(v); return err }},
	{flag: "read-timeout", env: "HTQ_READ_TIMEOUT", key: "read_timeout", kind: kindDuration, def: service.DefaultReadTimeout.String(),
		usage: "HTTP server: time to read a whole request",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.ReadTimeout, err = positive(v); return err }},
	{flag: "write-timeout", env: "HTQ_WRITE_TIMEOUT", key: "write_timeout", kind: kindDuration, def: service.DefaultWriteTimeout.String(),
		usage: "HTTP server: time to answer a request (more than the 30 s long poll of /v1/fetch)",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.WriteTimeout, err = positive(v); return err }},
	{flag: "idle-timeout", env: "HTQ_IDLE_TIMEOUT", key: "idle_timeout", kind: kindDuration, def: service.DefaultIdleTimeout.String(),
		usage: "HTTP server: how long an idle keep-alive connection is kept",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.IdleTimeout, err = positive(v); return err }},
	{flag: "metrics-auth", env: "HTQ_METRICS_AUTH", key: "metrics_auth", kind: kindString, def: "auto",
		usage: "whether GET /metrics needs the API token: true, false, or auto (needed unless --addr is a loopback address)",
		apply: func(o *serveOptions, v value) error {
			switch s := strings.TrimSpace(v.text); s {
			case "auto":
				o.cfg.MetricsAuth = nil
			case "true", "false":
				b := s == "true"
				o.cfg.MetricsAuth = &b
			default:
				return fmt.Errorf("%s: %q is not true, false or auto", v.source, v.text)
			}
			return nil
		}},
	{flag: "ui-read-only", env: "HTQ_UI_READ_ONLY", key: "ui_read_only", kind: kindBool, def: "false",
		usage: "make the dashboard (/ui/) read-only: no actions, and the API refuses dashboard sessions anything but GET",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.UIReadOnly, err = v.bool(); return err }},
	{flag: "pprof", env: "HTQ_PPROF", key: "pprof", kind: kindBool, def: "false",
		usage: "serve the Go runtime's profiles under /debug/pprof/ (behind the API token)",
		apply: func(o *serveOptions, v value) (err error) { o.cfg.Pprof, err = v.bool(); return err }},
	{flag: "gc-percent", env: "HTQ_GC_PERCENT", key: "gc_percent", kind: kindString,
		usage: "garbage collector target, as GOGC: a whole number or off (default 400 unless GOGC is set)",
		apply: func(o *serveOptions, v value) error {
			n, err := parseGCPercent(v)
			o.gc.percent = &n
			return err
		}},
	{flag: "memory-limit", env: "HTQ_MEMORY_LIMIT", key: "memory_limit", kind: kindString,
		usage: "soft memory limit of the Go runtime, as GOMEMLIMIT: e.g. 512MiB, 2GiB, or off (default 3/4 of the cgroup's limit, else half the machine's memory, unless GOMEMLIMIT is set)",
		apply: func(o *serveOptions, v value) error {
			n, err := parseMemoryLimit(v)
			o.gc.limit = &n
			return err
		}},
	{flag: "log-level", env: "HTQ_LOG_LEVEL", key: "log_level", kind: kindString, def: "info",
		usage: "debug, info, warn or error",
		apply: func(o *serveOptions, v value) error {
			if err := o.logLevel.UnmarshalText([]byte(strings.TrimSpace(v.text))); err != nil {
				return fmt.Errorf("%s: %q is not a log level (debug, info, warn, error)", v.source, v.text)
			}
			return nil
		}},
	{flag: "log-format", env: "HTQ_LOG_FORMAT", key: "log_format", kind: kindString, def: "text",
		usage: "text or json (logs go to standard error)",
		apply: func(o *serveOptions, v value) error {
			switch f := strings.TrimSpace(v.text); f {
			case "text", "json":
				o.logFormat = f
				return nil
			}
			return fmt.Errorf("%s: %q is not a log format (text, json)", v.source, v.text)
		}},
}

func positive(v value) (time.Duration, error) {
	d, err := v.duration()
	if err == nil && d <= 0 {
		err = fmt.Errorf("%s: %v is not a positive duration", v.source, d)
	}
	return d, err
}

// settingValue is a pflag.Value that keeps a setting's text and shows its
// kind in the help.
type settingValue struct {
	text string
	kind kind
}

func (v *settingValue) String() string     { return v.text }
func (v *settingValue) Set(s string) error { v.text = s; return nil }
func (v *settingValue) Type() string       { return string(v.kind) }

// addSettingFlags defines one flag per setting on fs.
func addSettingFlags(fs *pflag.FlagSet) {
	for _, s := range settings {
		usage := s.usage + " (env " + s.env + ")"
		fs.Var(&settingValue{text: s.def, kind: s.kind}, s.flag, usage)
		if s.kind == kindBool {
			fs.Lookup(s.flag).NoOptDefVal = "true" // --flag alone means true
		}
		if s.old != nil {
			fs.Var(&settingValue{text: s.def, kind: s.kind}, s.old.flag, usage)
			_ = fs.MarkDeprecated(s.old.flag, "use --"+s.flag) // the flag was just defined
		}
	}
}

// fileSettings reads a TOML config file into text values by key. A key
// that is not a setting is an error naming it.
func fileSettings(path string) (map[string]value, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	return parseFileSettings(path, data)
}

func parseFileSettings(path string, data []byte) (map[string]value, error) {
	// The file is decoded into a struct with one toml.Primitive field per
	// setting, so every key that is not a setting stays undecoded and
	// MetaData.Undecoded names it; each setting's value is decoded after.
	type fileKey struct {
		s   setting
		key string
	}
	var keys []fileKey
	for _, s := range settings {
		keys = append(keys, fileKey{s, s.key})
		if s.old != nil {
			keys = append(keys, fileKey{s, s.old.key})
		}
	}
	fields := make([]reflect.StructField, len(keys))
	for i, k := range keys {
		fields[i] = reflect.StructField{Name: "F" + strconv.Itoa(i), Type: reflect.TypeFor[toml.Primitive](),
			Tag: reflect.StructTag(`toml:"` + k.key + `"`)}
	}
	dst := reflect.New(reflect.StructOf(fields))
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(dst.Interface())
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	out := make(map[string]value)
	for i, k := range keys {
		if !md.IsDefined(k.key) {
			continue
		}
		var v any
		if err := md.PrimitiveDecode(dst.Elem().Field(i).Interface().(toml.Primitive), &v); err != nil {
			return nil, fmt.Errorf("config file %s: key %s: %w", path, k.key, err)
		}
		text, err := fileText(k.s, v)
		if err != nil {
			return nil, fmt.Errorf("config file %s: key %s: %w", path, k.key, err)
		}
		out[k.key] = value{text: text, source: fmt.Sprintf("config file %s, key %s", path, k.key)}
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("config file %s: unknown key(s) %s (every key is listed in docs/configuration.md)", path, strings.Join(keys, ", "))
	}
	return out, nil
}

// fileText turns a TOML value into the setting's text form.
func fileText(s setting, v any) (string, error) {
	switch s.kind {
	case kindString, kindDuration:
		str, ok := v.(string)
		if !ok {
			if s.kind == kindDuration {
				return "", fmt.Errorf("want a duration in quotes, such as \"30s\", not %T %v", v, v)
			}
			return "", fmt.Errorf("want a string in quotes, not %T %v", v, v)
		}
		return str, nil
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return "", fmt.Errorf("want true or false, not %T %v", v, v)
		}
		return strconv.FormatBool(b), nil
	case kindInt:
		n, ok := v.(int64)
		if !ok {
			return "", fmt.Errorf("want a whole number, not %T %v", v, v)
		}
		return strconv.FormatInt(n, 10), nil
	case kindList:
		switch l := v.(type) {
		case string:
			return l, nil
		case []any:
			parts := make([]string, len(l))
			for i, e := range l {
				str, ok := e.(string)
				if !ok {
					return "", fmt.Errorf("want a list of strings; element %d is %T %v", i, e, e)
				}
				if strings.Contains(str, ",") {
					return "", fmt.Errorf("element %d %q contains a comma", i, str)
				}
				parts[i] = str
			}
			return strings.Join(parts, ","), nil
		}
		return "", fmt.Errorf("want a list of strings, not %T %v", v, v)
	}
	return "", errors.New("unknown setting kind")
}

// resolve builds the options of `htq serve` from the flags that were set,
// the environment, the config file (flag --config or HTQ_CONFIG) and the
// defaults, in that order of precedence, and validates them. Every error
// names where the bad value came from.
func resolve(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) (*serveOptions, error) {
	var file map[string]value
	path, _ := fs.GetString("config")
	if !fs.Changed("config") {
		if p, ok := lookupEnv("HTQ_CONFIG"); ok && p != "" {
			path = p
		}
	}
	if path != "" {
		var err error
		if file, err = fileSettings(path); err != nil {
			return nil, err
		}
	}
	o := &serveOptions{logLevel: slog.LevelInfo, logFormat: "text", lookupEnv: lookupEnv}
	var errs []error
	sources := make(map[string]string, len(settings)) // flag → value.source
	for _, s := range settings {
		var v value
		var set bool
		names := []oldNames{{s.flag, s.env, s.key}}
		if s.old != nil {
			names = append(names, *s.old)
		}
	lookup:
		for _, n := range names { // flags, then environment, then file; current names first
			if f := fs.Lookup(n.flag); f != nil && f.Changed {
				v, set = value{text: f.Value.String(), source: "--" + n.flag}, true
				break lookup
			}
		}
		for _, n := range names {
			if set {
				break
			}
			if e, ok := lookupEnv(n.env); ok && e != "" {
				v, set = value{text: e, source: n.env}, true
			}
		}
		for _, n := range names {
			if set {
				break
			}
			if fv, ok := file[n.key]; ok {
				v, set = fv, true
			}
		}
		if set && s.old != nil && (v.source == "--"+s.old.flag || v.source == s.old.env || strings.HasSuffix(v.source, "key "+s.old.key)) {
			o.warnings = append(o.warnings, fmt.Sprintf("%s is deprecated: use --%s, %s or the file key %s", v.source, s.flag, s.env, s.key))
		}
		if !set {
			if s.def == "" {
				continue
			}
			v = value{text: s.def, source: "default of --" + s.flag}
		}
		sources[s.flag] = v.source
		if err := s.apply(o, v); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := o.cfg.ValidateFrom(func(setting string) string { return sources[setting] }); err != nil {
		return nil, err
	}
	return o, nil
}

// newLogger returns the logger the options ask for, writing to w.
func (o *serveOptions) newLogger(w io.Writer) *slog.Logger {
	ho := &slog.HandlerOptions{Level: o.logLevel}
	if o.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}
