package rdb

import (
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// hashTag returns the part of key Redis Cluster hashes: the text between
// the first '{' and the first '}' after it, when not empty.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// TestQueueKeysShareHashTag checks every key name of a queue, so that each
// script touches one Cluster slot.
func TestQueueKeysShareHashTag(t *testing.T) {
	for _, q := range []string{"default", "critical", "a", "with space", "ünïcode", "glob*?[x]\\"} {
		k, err := queueKeysFor(q)
		if err != nil {
			t.Fatalf("queueKeysFor(%q): %v", q, err)
		}
		names := map[string]string{
			"taskKey":   k.taskKey("id:with:colons{x}"),
			"uniqueKey": k.uniqueKey("u{1}"),
			"groupKey":  k.groupKey("g"),
		}
		v := reflect.ValueOf(k).Elem()
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Type.Kind() != reflect.String || f.Name == "name" || f.Name == "taskPattern" {
				continue
			}
			names[f.Name] = v.Field(i).String()
		}
		for field, key := range names {
			if got := hashTag(key); got != q {
				t.Errorf("queue %q: %s = %q hashes on %q, want %q", q, field, key, got, q)
			}
			if !strings.HasPrefix(key, "htq:{") {
				t.Errorf("queue %q: %s = %q does not start with htq:{", q, field, key)
			}
		}
	}
}

func TestQueueKeysRejectBadNames(t *testing.T) {
	for _, q := range []string{"", "a:b", "a{b", "a}b", "tab\there", strings.Repeat("x", 101)} {
		if _, err := queueKeysFor(q); err == nil {
			t.Errorf("queueKeysFor(%q) succeeded", q)
		}
	}
}

func TestGlobEscape(t *testing.T) {
	k := newQueueKeys(`a*b?c[d]e\f`)
	want := `htq:{a\*b\?c\[d\]e\\f}:t:*`
	if k.taskPattern != want {
		t.Errorf("taskPattern = %q, want %q", k.taskPattern, want)
	}
}

// TestScriptHeaders checks that every script names its KEYS, ARGV and
// return values in its header, and that it uses only the KEYS it names.
func TestScriptHeaders(t *testing.T) {
	keyUse := regexp.MustCompile(`KEYS\[(\d+)\]`)
	for _, s := range slices.Concat(allScripts, adminScripts, workflowScripts) {
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
