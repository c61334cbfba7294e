// Package secrettest is test support for the fuzz tests that check no
// error or log line shows a password: it spells fuzzed bytes as a password
// whose every letter stands out, so that any of them in an output is part
// of a password.
package secrettest

import (
	"strings"
	"unicode/utf8"
)

// letters spell the marked part of a password; nothing else in a fuzzed
// URL holds them (see ASCII).
const letters = "αβγδεζηθ"

// alphabet adds the characters that confuse URL parsers.
const alphabet = letters + "?@:/#%=,;& "

// Spell spells b as a password: each byte picks a letter or one of the
// characters ?@:/#%=,;& and space, leaving out the runes in omit (say "&#"
// for a password in a URL's query, where those end it).
func Spell(b []byte, omit string) string {
	runes := []rune(alphabet)
	var s strings.Builder
	for _, c := range b {
		if r := runes[int(c)%len(runes)]; !strings.ContainsRune(omit, r) {
			s.WriteRune(r)
		}
	}
	return s.String()
}

// Shows reports whether s holds a letter of a password that Spell made.
func Shows(s string) bool { return strings.ContainsAny(s, letters) }

// ASCII reports whether s is ASCII, and so holds no letter Spell uses: the
// fuzz tests build the other parts of a URL from such strings.
func ASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
