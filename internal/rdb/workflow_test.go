package rdb

import (
	"testing"
)

// TestWorkflowKeyNames checks that lua/wflib.lua names the keys of a queue
// as keys.go does: the workflow rules reach the queues of released and
// canceled tasks by name.
func TestWorkflowKeyNames(t *testing.T) {
	b := newTestBroker(t, nil)
	lib, err := luaFiles.ReadFile("lua/lib.lua")
	if err != nil {
		t.Fatal(err)
	}
	wflib, err := luaFiles.ReadFile("lua/wflib.lua")
	if err != nil {
		t.Fatal(err)
	}
	src := string(lib) + "\n" + string(wflib) + "\nreturn wf_qkey(ARGV[1], ARGV[2])"
	for _, q := range []string{"default", "with space", "ünïcode", "glob*?[x]\\"} {
		k := newQueueKeys(q)
		for suffix, want := range map[string]string{
			"t:": k.task, "pending": k.pending, "scheduled": k.scheduled, "retry": k.retry,
			"archived": k.archived, "waiting": k.waiting, "leases": k.leases, "unique:": k.unique,
			"wfdone": k.wfDone, "events": k.events,
		} {
			got, err := b.c.Do(t.Context(), b.c.B().Eval().Script(src).Numkeys(0).Arg(q, suffix).Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("wf_qkey(%q, %q) = %q; keys.go names it %q", q, suffix, got, want)
			}
		}
	}
}
