package brokertest

import (
	"fmt"
	"time"

	"github.com/htqueue/htq/internal/base"
)

func schedulerTests() []testCase {
	return []testCase{
		adminCase("ClaimTick", func(e *adminEnv) {
			tick := e.now().Truncate(time.Minute)
			claim := func(entry string, tick time.Time) bool {
				e.Helper()
				ok, err := e.a.ClaimTick(e.ctx, entry, tick, time.Minute)
				wantNoErr(e, "ClaimTick", err)
				return ok
			}
			if !claim("e1", tick) {
				e.Fatal("first claim of a tick refused")
			}
			if claim("e1", tick) {
				e.Fatal("second claim of a tick granted")
			}
			if !claim("e1", tick.Add(time.Second)) || !claim("e2", tick) {
				e.Fatal("claim of another tick or entry refused")
			}
			e.advance(time.Minute - time.Millisecond)
			if claim("e1", tick) {
				e.Fatal("claim granted again before the ttl ran out")
			}
			e.advance(time.Millisecond)
			if !claim("e1", tick) {
				e.Fatal("claim refused after the ttl ran out")
			}
			_, err := e.a.ClaimTick(e.ctx, "", tick, time.Minute)
			wantErrIs(e, "ClaimTick without an entry ID", err, base.ErrInvalidArgument)
			_, err = e.a.ClaimTick(e.ctx, "e1", tick, 0)
			wantErrIs(e, "ClaimTick with no ttl", err, base.ErrInvalidArgument)
		}),
		adminCase("Entries", func(e *adminEnv) {
			entry := func(id string) *base.SchedulerEntry {
				return &base.SchedulerEntry{ID: id, Spec: "@every 30s", Type: "report:" + id, Payload: []byte(`{"id":"` + id + `"}`),
					Options: []string{"Queue(\"low\")", "MaxRetry(2)"}, Next: e.now().Add(30 * time.Second), Prev: e.now()}
			}
			wantNoErr(e, "WriteSchedulerEntries s1", e.a.WriteSchedulerEntries(e.ctx, "s1", []*base.SchedulerEntry{entry("a"), entry("b")}, time.Minute))
			wantNoErr(e, "WriteSchedulerEntries s2", e.a.WriteSchedulerEntries(e.ctx, "s2", []*base.SchedulerEntry{entry("c")}, 2*time.Minute))
			list, err := e.a.ListSchedulerEntries(e.ctx)
			wantNoErr(e, "ListSchedulerEntries", err)
			if got := entryIDs(list); fmt.Sprint(got) != "[s1/a s1/b s2/c]" {
				e.Fatalf("ListSchedulerEntries = %v, want s1/a s1/b s2/c", got)
			}
			want := entry("a")
			got := list[0]
			if got.Spec != want.Spec || got.Type != want.Type || string(got.Payload) != string(want.Payload) ||
				fmt.Sprint(got.Options) != fmt.Sprint(want.Options) || !got.Next.Equal(want.Next) || !got.Prev.Equal(want.Prev) {
				e.Fatalf("entry = %+v, want %+v", got, want)
			}
			// Writing again replaces a scheduler's entries.
			wantNoErr(e, "WriteSchedulerEntries s1", e.a.WriteSchedulerEntries(e.ctx, "s1", []*base.SchedulerEntry{entry("d")}, time.Minute))
			list, err = e.a.ListSchedulerEntries(e.ctx)
			wantNoErr(e, "ListSchedulerEntries", err)
			if got := entryIDs(list); fmt.Sprint(got) != "[s1/d s2/c]" {
				e.Fatalf("ListSchedulerEntries after a rewrite = %v", got)
			}
			e.advance(time.Minute)
			list, err = e.a.ListSchedulerEntries(e.ctx)
			wantNoErr(e, "ListSchedulerEntries", err)
			if got := entryIDs(list); fmt.Sprint(got) != "[s2/c]" {
				e.Fatalf("ListSchedulerEntries after s1's ttl = %v", got)
			}
			wantNoErr(e, "ClearSchedulerEntries", e.a.ClearSchedulerEntries(e.ctx, "s2"))
			list, err = e.a.ListSchedulerEntries(e.ctx)
			if err != nil || len(list) != 0 {
				e.Fatalf("ListSchedulerEntries after clearing: %v, %v", entryIDs(list), err)
			}
			wantNoErr(e, "ClearSchedulerEntries of an unknown scheduler", e.a.ClearSchedulerEntries(e.ctx, "nope"))
			err = e.a.WriteSchedulerEntries(e.ctx, "s1", nil, 0)
			wantErrIs(e, "WriteSchedulerEntries with no ttl", err, base.ErrInvalidArgument)
		}),
	}
}

func entryIDs(list []*base.SchedulerEntry) []string {
	ids := make([]string, len(list))
	for i, en := range list {
		ids[i] = en.SchedulerID + "/" + en.ID
	}
	return ids
}
