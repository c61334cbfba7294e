package base

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// secretAlphabet spells the passwords of the URL fuzz tests: Greek letters,
// which nothing else in those URLs holds (so any of them in an output is
// part of a password), and the characters that confuse URL parsers.
const secretAlphabet = "αβγδεζηθ?@:/#%=,;& "

// secret spells b in secretAlphabet, leaving out the runes in omit.
func secret(b []byte, omit string) string {
	runes := []rune(secretAlphabet)
	var s strings.Builder
	for _, c := range b {
		if r := runes[int(c)%len(runes)]; !strings.ContainsRune(omit, r) {
			s.WriteRune(r)
		}
	}
	return s.String()
}

// showsSecret reports whether s holds a letter of a password.
func showsSecret(s string) bool { return strings.ContainsAny(s, "αβγδεζηθ") }

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
			if !isASCII(s) {
				return
			}
		}
		raw := scheme + "://" + user + ":" + secret(pass, "") + "@" + rest
		// In the query a password cannot hold '&' (it ends the value)
		// or '#'.
		raw += "?" + query + "&sentinel_password=" + secret(qpass, "&#")
		if got := RedactURL(raw); showsSecret(got) {
			t.Fatalf("RedactURL(%q) = %q shows part of a password", raw, got)
		}
		_ = RedactURL(scheme + user + rest + query) // any text: no panic
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
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
