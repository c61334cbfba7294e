package base

import (
	"testing"

	"github.com/htqueue/htq/internal/secrettest"
)

// FuzzRedactURL checks that RedactURL never panics and never shows any
// part of a password, in the user information or in a query parameter
// whose name holds "password", whatever characters the password holds.
// The host, path and other parameters are ASCII.
func FuzzRedactURL(f *testing.F) {
	f.Add("redis", "u", []byte{0, 1}, "h:6379/0", "master=m", []byte{2})
	f.Add("redis-sentinel", "", []byte{8, 9, 0}, "s1,s2", "", []byte{9, 10, 1})
	f.Add("rediss", "a", []byte{0, 18, 1}, "h", "x=y", []byte{})
	f.Fuzz(func(t *testing.T, scheme, user string, pass []byte, rest, query string, qpass []byte) {
		for _, s := range []string{scheme, user, rest, query} {
			if !secrettest.ASCII(s) {
				return
			}
		}
		raw := scheme + "://" + user + ":" + secrettest.Spell(pass, "") + "@" + rest
		// In the query a password cannot hold '&' (it ends the value)
		// or '#'.
		raw += "?" + query + "&sentinel_password=" + secrettest.Spell(qpass, "&#")
		if got := RedactURL(raw); secrettest.Shows(got) {
			t.Fatalf("RedactURL(%q) = %q shows part of a password", raw, got)
		}
		_ = RedactURL(scheme + user + rest + query) // any text: no panic
	})
}

func TestAmbiguousURL(t *testing.T) {
	for raw, want := range map[string]bool{
		"redis://u:p?ss@h":                         true,
		"redis://h?client_name=me@home":            true,
		"redis://u:p@ss@h?client_name=x":           false,
		"redis-sentinel://s?sentinel_password=a@b": false, // hidden first
		"file:./data@x":                            false,
		"redis://h":                                false,
	} {
		if got := AmbiguousURL(raw); got != want {
			t.Errorf("AmbiguousURL(%q) = %v, want %v", raw, got, want)
		}
	}
}
