package rdb

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

func TestTokenPrefix(t *testing.T) {
	seen := map[string]bool{}
	for _, id := range []string{"", "w", "0b9f3c9e-1f7c-4a53-9d2b-4f0f6f1b2c3d", strings.Repeat("s/", 40)} {
		for range 100 {
			p := tokenPrefix(id)
			if len(p) < minToken || !strings.HasPrefix(p, id+"/") || strings.ContainsAny(p[len(id)+1:], "/+!.\n") {
				t.Fatalf("tokenPrefix(%q) = %q: want %q/<random> of at least %d bytes", id, p, id, minToken)
			}
			if got := broker.ServerOfToken(p); got != id {
				t.Fatalf("ServerOfToken(%q) = %q, want %q", p, got, id)
			}
			if seen[p] {
				t.Fatalf("tokenPrefix(%q) returned %q twice", id, p)
			}
			seen[p] = true
		}
	}
}

// TestLeasesHashIsHashTable checks what minToken is for: on a
// server with the default hash-max-listpack-value, a queue's leases hash
// is a hash table from the first fetch on, however few tasks are active.
func TestLeasesHashIsHashTable(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	mustEnqueue(t, b, msg("q", "t1"), time.Time{})
	ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute, ServerID: "w"})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Fetch = %d leases, %v; want 1", len(ls), err)
	}
	if len(ls[0].Token) <= 64 {
		t.Errorf("token %q has %d bytes, want more than 64", ls[0].Token, len(ls[0].Token))
	}
	k := newQueueKeys("q")
	enc, err := b.c.Do(ctx, b.c.B().ObjectEncoding().Key(k.leases).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if enc != "hashtable" {
		t.Errorf("leases hash encoding = %q, want hashtable", enc)
	}
}

// TestActiveZsetIsSkiplist checks that a queue's active zset is a
// skiplist from the fetch that creates it, however few tasks are active:
// its one member for the fetch, the lease group's (lua/lib.lua), is longer
// than zset-max-listpack-value.
func TestActiveZsetIsSkiplist(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	k := newQueueKeys("q")
	for round, ids := range [][]string{{"t1"}, {"t2", "t3"}} {
		for _, id := range ids {
			mustEnqueue(t, b, msg("q", id), time.Time{})
		}
		ls, err := b.Fetch(ctx, broker.FetchParams{Queue: "q", Max: 2, LeaseDuration: time.Minute, ServerID: "w"})
		if err != nil || len(ls) != len(ids) {
			t.Fatalf("round %d: Fetch = %d leases, %v; want %d", round, len(ls), err, len(ids))
		}
		enc, err := b.c.Do(ctx, b.c.B().ObjectEncoding().Key(k.active).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		if enc != "skiplist" {
			t.Errorf("round %d: active zset encoding = %q, want skiplist", round, enc)
		}
		got, err := b.c.Do(ctx, b.c.B().Zrange().Key(k.active).Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"\x02" + ls[0].Token}; !slices.Equal(got, want) {
			t.Errorf("round %d: active zset = %q, want the fetch's lease group %q", round, got, want)
		}
		// Completing every task deletes the zset; the next round's
		// fetch makes a new one.
		for _, err := range b.Complete(ctx, refsOf(ls)) {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n, err := b.c.Do(ctx, b.c.B().Exists().Key(k.active).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("round %d: active zset exists = %d, %v after every task completed; want 0", round, n, err)
		}
	}
}

// TestFetchReplyForms checks rdb.Fetch's reading of fetch.lua's reply, in
// which a plain task has three entries and a task with n, e or f is
// marked by an integer before its seven: numeric IDs, which a careless
// reading would take for that mark, and both forms in one batch.
func TestFetchReplyForms(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	for _, id := range []string{"0", "1", "retried", "42"} {
		mustEnqueue(t, b, msg("q", id), time.Time{})
	}
	ls := mustFetch(t, b, "q", 4)
	for _, l := range ls {
		if l.Msg.ID == "retried" {
			if err := b.Retry(ctx, broker.RetryParams{Lease: l.Ref(), ErrMsg: "boom", IsFailure: true}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if errs := b.Complete(ctx, []broker.LeaseRef{l.Ref()}); errs[0] != nil {
			t.Fatal(errs[0])
		}
	}
	for _, id := range []string{"7", "8"} {
		mustEnqueue(t, b, msg("q", id), time.Time{})
	}
	if _, err := b.Forward(ctx, "q", 100); err != nil {
		t.Fatal(err)
	}
	ls = mustFetch(t, b, "q", 10)
	var got []string
	for _, l := range ls {
		got = append(got, l.Msg.ID)
		if want := string(msg("q", l.Msg.ID).Payload); string(l.Msg.Payload) != want {
			t.Errorf("task %s: payload %q, want %q", l.Msg.ID, l.Msg.Payload, want)
		}
		if l.Msg.ID == "retried" && (l.Msg.Retried != 1 || l.Msg.LastErr != "boom") {
			t.Errorf("task retried: Retried %d, LastErr %q; want 1, boom", l.Msg.Retried, l.Msg.LastErr)
		}
		if l.Token != ls[0].Token {
			t.Errorf("task %s: token %q, want the fetch's one token %q", l.Msg.ID, l.Token, ls[0].Token)
		}
	}
	slices.Sort(got)
	if want := []string{"7", "8", "retried"}; !slices.Equal(got, want) {
		t.Fatalf("fetched %v, want %v", got, want)
	}
	completeAll(t, b, ls)
}

// TestFetchTokensAreTheLeases checks that every lease of one fetch carries
// the fetch's token, which the leases hash holds for each of its tasks
// (with '+' for a task Complete must read), and that Complete of the batch
// in several calls, the tokens sent once per run (lua/complete.lua's ”),
// fences each task alone: a stale token between them and a task of
// another fetch in the same call lose only their own lease.
func TestFetchTokensAreTheLeases(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	for i := range 70 {
		m := msg("q", fmt.Sprint("t", i))
		if i%10 == 3 {
			m.Retention = time.Hour // its lease is marked '+'
		}
		mustEnqueue(t, b, m, time.Time{})
	}
	ls := mustFetch(t, b, "q", 60)
	more := mustFetch(t, b, "q", 10)
	if len(ls) != 60 || len(more) != 10 {
		t.Fatalf("Fetch = %d and %d leases, want 60 and 10", len(ls), len(more))
	}
	if ls[0].Token == more[0].Token {
		t.Fatalf("two fetches share the token %q", ls[0].Token)
	}
	k := newQueueKeys("q")
	for _, l := range append(slices.Clone(ls), more...) {
		want := l.Token
		if l.Msg.Retention > 0 {
			want += "+"
		}
		held, err := b.c.Do(ctx, b.c.B().Hget().Key(k.leases).Field(l.Msg.ID).Build()).ToString()
		if err != nil || held != want {
			t.Fatalf("task %s: leases hash holds %q (%v), want %q", l.Msg.ID, held, err, want)
		}
		if l.Token != ls[0].Token && l.Token != more[0].Token {
			t.Fatalf("task %s: token %q is neither fetch's", l.Msg.ID, l.Token)
		}
	}
	// One call: 30 of the first fetch, a stale token, 5 of the second
	// fetch, 10 more of the first.
	refs := refsOf(ls[:30])
	stale := ls[30].Ref()
	stale.Token = more[0].Token // a real token, not this task's
	refs = append(refs, stale)
	refs = append(refs, refsOf(more[:5])...)
	refs = append(refs, refsOf(ls[31:41])...)
	for i, err := range b.Complete(ctx, refs) {
		if (err != nil) != (i == 30) {
			t.Errorf("Complete %s (%d): %v", refs[i].ID, i, err)
		}
	}
	completeAll(t, b, append(ls[41:], ls[30]))
	completeAll(t, b, more[5:])
	checkInvariants(t, b)
}

// completeAll completes every lease of ls in one call, each of which must
// hold.
func completeAll(t *testing.T, b *Broker, ls []*broker.Lease) {
	t.Helper()
	refs := refsOf(ls)
	for i, err := range b.Complete(t.Context(), refs) {
		if err != nil {
			t.Errorf("Complete %s: %v", refs[i].ID, err)
		}
	}
}

// TestFetchPlainBatchForm checks the fetch script's reply forms directly:
// a batch of plain tasks only is answered as the IDs and the messages in
// two arrays (form 3, lua/fetch.lua), and one with a task in the hash form
// task by task (form 0); Fetch reads both into the same leases.
func TestFetchPlainBatchForm(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	k := newQueueKeys("q")
	fetchForm := func(max int) (form int64, n int) {
		t.Helper()
		tok := tokenPrefix("s1")
		vals, err := b.run(ctx, call{
			s:    scriptFetch,
			keys: []string{k.pending, k.active, k.leases, k.paused, k.task, k.settings, k.events, k.fetch + tok, k.fetchN},
			args: []string{b.nowArg(), fmt.Sprint(max), "30000", tok, b.logLen, "0"},
		}).ToArray()
		if err != nil || len(vals) < 3 {
			t.Fatalf("fetch script: %v (%d values)", err, len(vals))
		}
		form, err = vals[2].ToInt64()
		if err != nil {
			t.Fatal(err)
		}
		if form == 3 {
			ids, err1 := vals[3].ToArray()
			msgs, err2 := vals[4].ToArray()
			if err1 != nil || err2 != nil || len(ids) != len(msgs) || len(vals) != 5 {
				t.Fatalf("form 3: %d IDs, %d messages, %d values (%v, %v)", len(ids), len(msgs), len(vals), err1, err2)
			}
			return form, len(ids)
		}
		return form, (len(vals) - 3) / 2
	}
	for i := range 3 {
		mustEnqueue(t, b, msg("q", fmt.Sprint("p", i)), time.Time{})
	}
	if form, n := fetchForm(10); form != 3 || n != 3 {
		t.Fatalf("plain batch: form %d with %d tasks, want 3 with 3", form, n)
	}
	kept := msg("q", "kept")
	kept.Retention = time.Hour // a hash: its lease is marked '+'
	mustEnqueue(t, b, kept, time.Time{})
	mustEnqueue(t, b, msg("q", "plain"), time.Time{})
	if form, n := fetchForm(10); form != 0 || n < 2 {
		t.Fatalf("batch with a hash: form %d with %d values, want 0 with 2 tasks or more", form, n)
	}
	// Fetch reads form 3 into leases that complete.
	for i := range 4 {
		mustEnqueue(t, b, msg("q", fmt.Sprint("f", i)), time.Time{})
	}
	ls := mustFetch(t, b, "q", 10)
	if len(ls) != 4 {
		t.Fatalf("Fetch = %d leases, want 4", len(ls))
	}
	for _, l := range ls {
		if want := string(msg("q", l.Msg.ID).Payload); string(l.Msg.Payload) != want || l.Token != ls[0].Token {
			t.Errorf("task %s: payload %q token %q, want %q and the fetch's", l.Msg.ID, l.Msg.Payload, l.Token, want)
		}
	}
	completeAll(t, b, ls)
	checkInvariants(t, b)
}

// TestFetchLargeMessagesOutsideLua checks form 4 (lua/fetch.lua's ext):
// once a queue's plain messages are large, Fetch has the script check
// their types and reads them with an MGET of its own; the leases are
// those of any fetch (payloads whole, Complete works, invariants hold). A
// batch with a task in the hash form is answered as without ext, and
// pauses ext; a task gone between the script and the MGET is left out.
func TestFetchLargeMessagesOutsideLua(t *testing.T) {
	b := newTestBroker(t, nil)
	ctx := t.Context()
	k := newQueueKeys("q")
	big := func(id string) *base.TaskMessage {
		m := msg("q", id)
		m.Payload = []byte(strings.Repeat(id+"-", 2048/(len(id)+1)))
		return m
	}
	for i := range 3 {
		mustEnqueue(t, b, big(fmt.Sprint("a", i)), time.Time{})
	}
	first := mustFetch(t, b, "q", 10)
	if len(first) != 3 {
		t.Fatalf("Fetch = %d leases, want 3", len(first))
	}
	qk, err := b.keys("q")
	if err != nil {
		t.Fatal(err)
	}
	if !qk.msgs.external() {
		t.Fatalf("mean message size %d after a fetch of 2 KB messages: ext not chosen", qk.msgs.mean.Load())
	}
	// The script's answer with ARGV[7] '1': form 4, the IDs only.
	for i := range 4 {
		mustEnqueue(t, b, big(fmt.Sprint("b", i)), time.Time{})
	}
	tok := tokenPrefix("s1")
	vals, err := b.run(ctx, call{
		s:    scriptFetch,
		keys: []string{k.pending, k.active, k.leases, k.paused, k.task, k.settings, k.events, k.fetch + tok, k.fetchN},
		args: []string{b.nowArg(), "2", "30000", tok, b.logLen, "0", "1"},
	}).ToArray()
	if err != nil || len(vals) != 4 {
		t.Fatalf("fetch script with ext: %v, %d values; want form 4's 4", err, len(vals))
	}
	if form, _ := vals[2].ToInt64(); form != 4 {
		t.Fatalf("fetch script with ext: form %d, want 4", form)
	}
	scripted, _ := vals[3].AsStrSlice()
	ids, msgs, err := b.readMessages(ctx, qk, vals[3])
	if err != nil || len(ids) != 2 || len(msgs) != 2 {
		t.Fatalf("readMessages = %d IDs, %d messages, %v; want 2", len(ids), len(msgs), err)
	}
	// Fetch itself: the two left, read outside the script, whole.
	ls := mustFetch(t, b, "q", 64)
	if len(ls) != 2 {
		t.Fatalf("Fetch with ext = %d leases, want 2", len(ls))
	}
	for _, l := range append(slices.Clone(first), ls...) {
		if want := string(big(l.Msg.ID).Payload); string(l.Msg.Payload) != want || l.Token == "" {
			t.Errorf("task %s: payload of %d bytes, token %q; want its %d bytes", l.Msg.ID, len(l.Msg.Payload), l.Token, len(want))
		}
	}
	completeAll(t, b, first)
	completeAll(t, b, ls)
	// A batch with a retried task (a hash) while ext is chosen: form 0,
	// and ext paused.
	mustEnqueue(t, b, big("c0"), time.Time{})
	l := mustFetch(t, b, "q", 1)[0]
	if err := b.Retry(ctx, broker.RetryParams{Lease: l.Ref(), ErrMsg: "x", IsFailure: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Forward(ctx, "q", 100); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, b, big("c1"), time.Time{})
	got := mustFetch(t, b, "q", 64)
	if len(got) != 2 {
		t.Fatalf("Fetch of a retried and a plain task = %d leases, want 2", len(got))
	}
	if qk.msgs.pause.Load() == 0 {
		t.Errorf("a batch with a hash did not pause ext")
	}
	completeAll(t, b, got)
	checkInvariants(t, b)
	// A task gone between the script and the MGET (its queue deleted,
	// keys and all) is left out; the others are read.
	redis(t, b, "DEL", k.task+scripted[1])
	ids, msgs, err = b.readMessages(ctx, qk, vals[3])
	if err != nil || len(ids) != 1 || len(msgs) != 1 {
		t.Fatalf("readMessages after a task's key went = %d IDs, %d messages, %v; want the one left", len(ids), len(msgs), err)
	}
	if id, _ := ids[0].ToString(); id != scripted[0] {
		t.Errorf("readMessages kept %s, want %s", id, scripted[0])
	}
}
