package rdb

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
)

func TestParseURL(t *testing.T) {
	tests := []struct {
		url      string
		addrs    []string
		db       int
		user     string
		pass     string
		master   string
		tls      bool
		single   bool
		timeout  time.Duration
		call     time.Duration // the timeout parameter
		events   int           // the event_log parameter as URLSettings.EventLogSize
		sentPass string
	}{
		{url: "redis://localhost:6379/0", addrs: []string{"localhost:6379"}, single: true},
		{url: "redis://localhost", addrs: []string{"localhost:6379"}, single: true},
		{url: "redis://localhost/", addrs: []string{"localhost:6379"}, single: true},
		{url: "redis://127.0.0.1:7000/3", addrs: []string{"127.0.0.1:7000"}, db: 3, single: true},
		{url: "redis://:s3cret@h:1/2", addrs: []string{"h:1"}, db: 2, pass: "s3cret", single: true},
		{url: "redis://bob:p%40ss@h:1", addrs: []string{"h:1"}, user: "bob", pass: "p@ss", single: true},
		{url: "redis://[::1]:6380/1", addrs: []string{"[::1]:6380"}, db: 1, single: true},
		{url: "redis://[::1]", addrs: []string{"[::1]:6379"}, single: true},
		{url: "redis://h?dial_timeout=2s", addrs: []string{"h:6379"}, single: true, timeout: 2 * time.Second},
		{url: "redis://h?timeout=1500ms", addrs: []string{"h:6379"}, single: true, call: 1500 * time.Millisecond},
		{url: "redis://h?event_log=0", addrs: []string{"h:6379"}, single: true, events: -1},
		{url: "redis://h?event_log=500", addrs: []string{"h:6379"}, single: true, events: 500},
		{url: "rediss://secure.example:6380/4", addrs: []string{"secure.example:6380"}, db: 4, tls: true, single: true},
		{url: "redis-sentinel://:pw@s1:26379,s2:26380,s3/5?master=mymaster", addrs: []string{"s1:26379", "s2:26380", "s3:26379"}, db: 5, pass: "pw", master: "mymaster"},
		{url: "redis-sentinel://s1?master=m&sentinel_password=sp", addrs: []string{"s1:26379"}, master: "m", sentPass: "sp"},
		{url: "redis-cluster://:pw@n1:7000,n2:7001,n3", addrs: []string{"n1:7000", "n2:7001", "n3:6379"}, pass: "pw"},
		{url: "redis-cluster://n1:7000/", addrs: []string{"n1:7000"}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			co, set, err := ParseURL(tt.url)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			if set.Wait != nil {
				t.Errorf("WaitOptions = %+v, want nil (no wait_* parameter)", *set.Wait)
			}
			if set.EventLogSize != tt.events {
				t.Errorf("EventLogSize = %d, want %d", set.EventLogSize, tt.events)
			}
			if set.Timeout != tt.call {
				t.Errorf("Timeout = %v, want %v", set.Timeout, tt.call)
			}
			if !slices.Equal(co.InitAddress, tt.addrs) {
				t.Errorf("InitAddress = %v, want %v", co.InitAddress, tt.addrs)
			}
			if co.SelectDB != tt.db {
				t.Errorf("SelectDB = %d, want %d", co.SelectDB, tt.db)
			}
			if co.Username != tt.user || co.Password != tt.pass {
				t.Errorf("user/password = %q/%q, want %q/%q", co.Username, co.Password, tt.user, tt.pass)
			}
			if co.Sentinel.MasterSet != tt.master {
				t.Errorf("MasterSet = %q, want %q", co.Sentinel.MasterSet, tt.master)
			}
			if co.Sentinel.Password != tt.sentPass {
				t.Errorf("Sentinel.Password = %q, want %q", co.Sentinel.Password, tt.sentPass)
			}
			if (co.TLSConfig != nil) != tt.tls {
				t.Errorf("TLS = %v, want %v", co.TLSConfig != nil, tt.tls)
			}
			if co.ForceSingleClient != tt.single {
				t.Errorf("ForceSingleClient = %v, want %v", co.ForceSingleClient, tt.single)
			}
			if co.Dialer.Timeout != tt.timeout {
				t.Errorf("Dialer.Timeout = %v, want %v", co.Dialer.Timeout, tt.timeout)
			}
			if !co.DisableCache {
				t.Error("DisableCache is off")
			}
		})
	}
}

// TestParseURLWait reads the wait_* parameters on every scheme.
func TestParseURLWait(t *testing.T) {
	tests := []struct {
		url  string
		want WaitOptions
	}{
		{"redis://h/0?wait_replicas=1&wait_timeout=500ms", WaitOptions{Replicas: 1, Timeout: 500 * time.Millisecond}},
		{"rediss://h?wait_replicas=2", WaitOptions{Replicas: 2}},
		{"redis-sentinel://s1,s2/1?master=m&wait_replicas=1&wait_aof_local=true", WaitOptions{Replicas: 1, AOFLocal: true}},
		{"redis-cluster://n1,n2?wait_aof_local=1&wait_timeout=2s", WaitOptions{AOFLocal: true, Timeout: 2 * time.Second}},
		{"redis://h?wait_replicas=0", WaitOptions{}},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, set, err := ParseURL(tt.url)
			if err != nil {
				t.Fatalf("ParseURL: %v", err)
			}
			if set.Wait == nil || *set.Wait != tt.want {
				t.Fatalf("WaitOptions = %v, want %+v", set.Wait, tt.want)
			}
		})
	}
}

func TestParseURLTLSServerName(t *testing.T) {
	co, _, err := ParseURL("rediss://cache.example:6380")
	if err != nil {
		t.Fatal(err)
	}
	if co.TLSConfig.ServerName != "cache.example" {
		t.Errorf("ServerName = %q, want cache.example", co.TLSConfig.ServerName)
	}
}

func TestParseURLErrors(t *testing.T) {
	tests := []struct {
		url  string
		want string // part of the message
	}{
		{"", "want scheme://host"},
		{"localhost:6379", "want scheme://host"},
		{"http://localhost", `scheme "http"`},
		{"file:./data", "want scheme://host"},
		{"redis://", "no host"},
		{"redis:///0", "no host"},
		{"redis://h:abc", `bad port "abc"`},
		{"redis://h:0", `bad port "0"`},
		{"redis://h:70000", `bad port "70000"`},
		{"redis://h:", `bad port ""`},
		{"redis://h/x", `database "x"`},
		{"redis://h/-1", `database "-1"`},
		{"redis://h/1/2", `database "1/2"`},
		{"redis://h1,h2", "takes one host"},
		{"redis://::1", "bad host"},
		{"redis://h?foo=1", `unknown parameter "foo"`},
		{"redis://h?master=m", `unknown parameter "master"`},
		{"redis://h?dial_timeout=soon", "dial_timeout"},
		{"redis://h?dial_timeout=-1s", "dial_timeout"},
		{"redis://h?timeout=0", `timeout "0"`},
		{"redis://h?timeout=-1s", `timeout "-1s"`},
		{"redis://h?timeout=5", `timeout "5"`},
		{"redis://h?event_log=off", "event_log"},
		{"redis://h?event_log=-5", "event_log"},
		{"redis://h?event_log=1000001", "event_log"},
		{"redis-sentinel://s1,s2", "needs ?master=NAME"},
		{"redis-sentinel://s1,,s2?master=m", "empty host"},
		{"redis-cluster://n1,n2/1", "only database 0"},
		{"redis://:pa%zz@h", "bad password escape"},
		{"redis://h?wait_replicas=-1", `wait_replicas "-1"`},
		{"redis://h?wait_replicas=one", `wait_replicas "one"`},
		{"redis://h?wait_replicas=1&wait_timeout=0", `wait_timeout "0"`},
		{"redis://h?wait_replicas=1&wait_timeout=500us", `wait_timeout "500us"`},
		{"redis://h?wait_replicas=1&wait_timeout=soon", `wait_timeout "soon"`},
		{"redis://h?wait_timeout=1s", "wait_timeout does nothing"},
		{"redis://h?wait_replicas=0&wait_timeout=1s", "wait_timeout does nothing"},
		{"redis://h?wait_aof_local=maybe", `wait_aof_local "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, _, err := ParseURL(tt.url)
			if err == nil {
				t.Fatal("ParseURL succeeded")
			}
			if !errors.Is(err, base.ErrInvalidArgument) {
				t.Errorf("error %v does not wrap ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
		})
	}
}

func TestParseURLHidesPassword(t *testing.T) {
	_, _, err := ParseURL("redis://:hunter2@h:bad")
	if err == nil {
		t.Fatal("ParseURL succeeded")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
}

func TestPipelineMultiplex(t *testing.T) {
	for conns, want := range map[int]int{0: -1, 1: -1, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 1 << 20: 8} {
		if got := pipelineMultiplex(conns); got != want {
			t.Errorf("pipelineMultiplex(%d) = %d, want %d", conns, got, want)
		}
	}
}

// TestRedactURLHidesWhatParseURLReads checks that base.RedactURL hides
// every password ParseURL reads, whatever characters it holds.
func TestRedactURLHidesWhatParseURLReads(t *testing.T) {
	for _, raw := range []string{
		"redis://:hunter2@h:1/2",
		"redis://u:p@ss@h",
		"redis://u:pa:ss@h",
		"redis://u:pa/ss@h/3",
		"redis://u:p%40ss@h",
		"rediss://u:p@s/s:x@h:6380",
		"redis-sentinel://:m@ster@s1,s2?master=m&sentinel_password=s@nt",
		"redis-cluster://:c/l@n1:7000,n2",
	} {
		co, _, err := ParseURL(raw)
		if err != nil {
			t.Fatalf("ParseURL(%q): %v", raw, err)
		}
		shown := base.RedactURL(raw)
		for _, secret := range []string{co.Password, co.Sentinel.Password} {
			if secret != "" && strings.Contains(shown, secret) {
				t.Errorf("RedactURL(%q) = %q shows the password %q", raw, shown, secret)
			}
		}
		if co.Password == "" {
			t.Errorf("ParseURL(%q) read no password", raw)
		}
	}
}
