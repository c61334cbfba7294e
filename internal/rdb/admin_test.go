package rdb

import (
	"regexp"
	"strings"
	"testing"
)

// TestAdminScripts loads every script of the management operations into
// Redis and checks their headers as TestScriptHeaders does for the others.
func TestAdminScripts(t *testing.T) {
	b := newTestBroker(t, nil)
	keyUse := regexp.MustCompile(`KEYS\[(\d+)\]`)
	for _, s := range adminScripts {
		if err := b.c.Do(t.Context(), b.c.B().ScriptLoad().Script(s.src).Build()).Error(); err != nil {
			t.Errorf("%s.lua: %v", s.name, err)
		}
		body, err := luaFiles.ReadFile("lua/" + s.name + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		src := string(body)
		var header strings.Builder
		for _, line := range strings.Split(src, "\n") {
			if !strings.HasPrefix(line, "--") {
				break
			}
			header.WriteString(line + "\n")
		}
		h := header.String()
		if !strings.HasPrefix(h, "-- "+s.name+".lua: ") {
			t.Errorf("%s.lua: header does not start with its name", s.name)
		}
		if !strings.Contains(h, "Returns") {
			t.Errorf("%s.lua: header does not say what it returns", s.name)
		}
		declared := map[string]bool{}
		for _, m := range keyUse.FindAllStringSubmatch(h, -1) {
			declared[m[1]] = true
		}
		for _, m := range keyUse.FindAllStringSubmatch(src[len(h):], -1) {
			if !declared[m[1]] {
				t.Errorf("%s.lua uses KEYS[%s], which its header does not name", s.name, m[1])
			}
		}
		if strings.Contains(src[len(h):], "ARGV[") && !strings.Contains(h, "ARGV[") {
			t.Errorf("%s.lua: header does not name its ARGV", s.name)
		}
	}
}
