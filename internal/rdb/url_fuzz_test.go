package rdb

import (
	"errors"
	"strings"
	"testing"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/secrettest"
)

// FuzzParseURL checks that ParseURL never panics, that every error wraps
// base.ErrInvalidArgument, and that no error shows any part of a password
// (of the user information or sentinel_password), whatever characters it
// holds; base.RedactURL, which the errors quote, is checked the same way
// by base.FuzzRedactURL.
func FuzzParseURL(f *testing.F) {
	f.Add(uint8(0), "u", []byte{0, 1}, "h:6379/0", "dial_timeout=1s", []byte{2})
	f.Add(uint8(2), "", []byte{8, 9, 0}, "s1,s2", "master=m", []byte{9, 10, 1})
	f.Add(uint8(1), "a", []byte{0, 18, 1}, "h", "wait_replicas=1", []byte{})
	f.Add(uint8(3), "", []byte{3, 4}, "n1:7000,n2", "", []byte{})
	f.Fuzz(func(t *testing.T, scheme uint8, user string, pass []byte, rest, query string, qpass []byte) {
		for _, s := range []string{user, rest, query} {
			if !secrettest.ASCII(s) {
				return
			}
		}
		schemes := []string{"redis", "rediss", "redis-sentinel", "redis-cluster", "http"}
		raw := schemes[int(scheme)%len(schemes)] + "://"
		if user != "" || len(pass) > 0 {
			raw += user + ":" + secrettest.Spell(pass, "") + "@"
		}
		raw += rest
		if query != "" || len(qpass) > 0 {
			// In the query a password cannot hold '&' (it ends the
			// value) or '#'.
			raw += "?" + query + "&sentinel_password=" + secrettest.Spell(qpass, "&#")
		}
		_, _, err := ParseURL(raw)
		if err == nil {
			return
		}
		if !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("ParseURL(%q): %v does not wrap ErrInvalidArgument", raw, err)
		}
		if secrettest.Shows(err.Error()) {
			t.Fatalf("ParseURL(%q): error shows part of a password: %v", raw, err)
		}
	})
}

// The errors FuzzParseURL found quoting part of a password: a host read
// from a password holding '?', and a bad escape in sentinel_password.
func TestParseURLQuotesNoPassword(t *testing.T) {
	for raw, secrets := range map[string][]string{
		"redis://u:pQ?sZ@h:1":                                     {"pQ", "sZ"},
		"redis-sentinel://:α?@0?0":                                {"α"},
		"redis://u:pW?X@h/0?client_name=c":                        {"pW", "?X"},
		"redis-sentinel://s?master=m&sentinel_password=sE%zzcRET": {"sE", "zz", "cRET"},
	} {
		_, _, err := ParseURL(raw)
		if err == nil {
			t.Fatalf("ParseURL(%q) succeeded", raw)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("ParseURL(%q): %v shows %q", raw, err, s)
			}
		}
	}
	// An '@' in a parameter is still read when the URL is otherwise good.
	co, _, err := ParseURL("redis://h?client_name=me@home")
	if err != nil || co.ClientName != "me@home" {
		t.Errorf("client_name with '@': %q, %v", co.ClientName, err)
	}
}
