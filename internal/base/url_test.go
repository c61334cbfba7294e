package base

import (
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := []struct {
		raw    string
		want   string
		secret []string // no part of the password may show
	}{
		// Nothing to hide.
		{"file:./htq-data", "file:./htq-data", nil},
		{"file://./data@2024", "file://./data@2024", nil},
		{"mem:", "mem:", nil},
		{"", "", nil},
		{"redis://localhost:6379/0", "redis://localhost:6379/0", nil},
		{"redis://alice@h:6379", "redis://alice@h:6379", nil},
		{"redis-sentinel://s1,s2/0?master=m", "redis-sentinel://s1,s2/0?master=m", nil},

		// Passwords url.Parse reads.
		{"redis://:hunter2@h:6379/0", "redis://:xxxxx@h:6379/0", []string{"hunter2"}},
		{"rediss://alice:hunter2@h", "rediss://alice:xxxxx@h", []string{"hunter2"}},
		{"redis://u:p@ss@host", "redis://u:xxxxx@host", []string{"p@ss", "ss@"}},
		{"redis://u:p@s@s@host/1", "redis://u:xxxxx@host/1", []string{"p@s", "s@s"}},
		{"redis://u:pa:ss@host", "redis://u:xxxxx@host", []string{"pa:ss", ":ss"}},
		{"redis://u:p%40ss@host", "redis://u:xxxxx@host", []string{"p%40ss", "40ss"}},
		{"redis-cluster://:pw0rd@n1:7000,n2:7001", "redis-cluster://:xxxxx@n1:7000,n2:7001", []string{"pw0rd"}},

		// Passwords url.Parse refuses (or misreads).
		{"redis://u:pa/ss@host", "redis://u:xxxxx@host", []string{"pa/ss", "pa", "/ss"}},
		{"redis://u:12/ss@host:6379/0", "redis://u:xxxxx@host:6379/0", []string{"12/ss", "/ss"}},
		{"redis://u:p@ss@host:bad", "redis://u:xxxxx@host:bad", []string{"p@ss", "ss@"}},
		{"redis://:pa%zz@h", "redis://:xxxxx@h", []string{"pa%zz"}},
		{"redis://u:p#ss@[::1", "redis://u:xxxxx@[::1", []string{"p#ss", "#ss"}},
		{"redis://u:p w@h", "redis://u:xxxxx@h", []string{"p w"}},
		{"redis://u:p?ss@host", "redis://xxxxx@host", []string{"p?ss", "?ss"}},
		{"redis://u:12?ss@host/0", "redis://xxxxx@host/0", []string{"12?ss", "?ss"}},

		// Passwords in the query.
		{"redis-sentinel://s1,s2?master=m&sentinel_password=hunter2", "redis-sentinel://s1,s2?master=m&sentinel_password=xxxxx", []string{"hunter2"}},
		{"redis-sentinel://:pw@s1?sentinel_password=p@ss&master=m", "redis-sentinel://:xxxxx@s1?sentinel_password=xxxxx&master=m", []string{"p@ss", "ss&"}},
		{"redis-sentinel://s1?sentinel%5Fpassword=hunter2", "redis-sentinel://s1?sentinel%5Fpassword=xxxxx", []string{"hunter2"}},

		// An '@' in a query value cannot be told from a '?' in a
		// password: everything up to it is hidden.
		{"redis://h?client_name=me@home", "redis://xxxxx@home", nil},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			got := RedactURL(tt.raw)
			if got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.raw, got, tt.want)
			}
			for _, s := range tt.secret {
				if strings.Contains(got, s) {
					t.Errorf("RedactURL(%q) = %q shows %q", tt.raw, got, s)
				}
			}
		})
	}
}
