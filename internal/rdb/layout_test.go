package rdb

import (
	"bufio"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// keyType returns the Redis type of key ("none" when it does not exist).
func keyType(t *testing.T, b *Broker, key string) string {
	t.Helper()
	return redis(t, b, "TYPE", key)[0]
}

// TestTaskStringForm checks which tasks are kept in the string form
// (lua/lib.lua's task_get): a plain task without a retention, from every
// enqueue script, until a script writes one of its fields; and that the
// form saves what it is for.
func TestTaskStringForm(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	q := "form"
	key := func(id string) string { return "htq:{" + q + "}:t:" + id }
	big := func(id string) *base.TaskMessage {
		m := msg(q, id)
		m.Payload = []byte(strings.Repeat("x", 100))
		return m
	}
	mustEnqueue(t, b, big("plain"), time.Time{})
	mustEnqueue(t, b, big("past"), epoch.Add(-time.Minute)) // enqueue.lua
	ret := big("kept")
	ret.Retention = time.Hour
	mustEnqueue(t, b, ret, time.Time{})
	mustEnqueue(t, b, big("later"), epoch.Add(time.Minute))
	batch := []broker.EnqueueParams{{Msg: big("batch")}, {Msg: big("batch-past"), ProcessAt: epoch.Add(-time.Second)}}
	for i, err := range b.EnqueueBatch(ctx, batch) {
		if err != nil {
			t.Fatalf("EnqueueBatch task %d: %v", i, err)
		}
	}
	for id, want := range map[string]string{
		"plain": "string", "past": "string", "batch": "string", "batch-past": "string",
		"kept": "hash", "later": "hash",
	} {
		if got := keyType(t, b, key(id)); got != want {
			t.Errorf("task %s is a %s, want a %s", id, got, want)
		}
	}
	wantMsg := encodeMessage(nil, big("plain"))
	if got := redis(t, b, "GET", key("plain"))[0]; got != string(wantMsg) {
		t.Errorf("the string form holds %x, want the message %x", got, wantMsg)
	}

	// The string form of a task with a 100-byte payload against the hash
	// it was before (a hashtable: its message is over 64 bytes).
	str, _ := strconv.Atoi(redis(t, b, "MEMORY", "USAGE", key("plain"))[0])
	redis(t, b, "HSET", "copy:"+key("plain"), "m", string(wantMsg))
	hash, _ := strconv.Atoi(redis(t, b, "MEMORY", "USAGE", "copy:"+key("plain"))[0])
	redis(t, b, "DEL", "copy:"+key("plain"))
	if hash-str < 100 {
		t.Errorf("MEMORY USAGE: string form %d B, hash %d B: want at least 100 B saved", str, hash)
	}
	t.Logf("MEMORY USAGE of a task with a 100-byte payload: string form %d B, hash %d B", str, hash)

	// An enqueue repeated (same message) succeeds; another message with
	// the ID is a conflict, whatever the form.
	checkRepeatAndConflict(t, b, big("batch"))
	checkRepeatAndConflict(t, b, ret)

	// Fetch leaves the form as it is; the first field written turns the
	// task into a hash holding the same message.
	ls := mustFetch(t, b, q, 10)
	if len(ls) != 5 {
		t.Fatalf("Fetch = %d tasks, want the 5 pending", len(ls))
	}
	lease := map[string]*broker.Lease{}
	for _, l := range ls {
		lease[l.Msg.ID] = l
		if string(l.Msg.Payload) != strings.Repeat("x", 100) {
			t.Errorf("task %s fetched with payload %q", l.Msg.ID, l.Msg.Payload)
		}
	}
	if got := keyType(t, b, key("past")); got != "string" {
		t.Errorf("an active task is a %s, want it left a string", got)
	}
	if err := b.WriteResult(ctx, lease["past"].Ref(), []byte("r")); err != nil {
		t.Fatal(err)
	}
	if err := b.Retry(ctx, broker.RetryParams{Lease: lease["batch"].Ref(), Delay: time.Minute, ErrMsg: "boom", IsFailure: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Requeue(ctx, lease["batch-past"].Ref()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"past", "batch", "batch-past"} {
		if got := keyType(t, b, key(id)); got != "hash" {
			t.Errorf("task %s is a %s after a field was written, want a hash", id, got)
		}
		if got := redis(t, b, "HGET", key(id), "m")[0]; got != string(encodeMessage(nil, big(id))) {
			t.Errorf("task %s holds message %x after it became a hash", id, got)
		}
	}
	info, err := b.GetTaskInfo(ctx, q, "batch")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != base.StateRetry || info.Message.LastErr != "boom" || info.Message.Retried != 1 {
		t.Errorf("retried task: state %v, last error %q, retried %d", info.State, info.Message.LastErr, info.Message.Retried)
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{lease["past"].Ref(), lease["kept"].Ref()}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("Complete = %v", errs)
	}
	if got := keyType(t, b, key("past")); got != "none" {
		t.Errorf("a completed task without a retention is a %s, want deleted", got)
	}
	checkInvariants(t, b)
}

// TestHashLayoutFixture reads tasks that an earlier htq wrote, when every
// task was a hash (testdata/layout-hash-tasks.txt), and takes them
// through every operation a pending or active task meets.
func TestHashLayoutFixture(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	loadFixture(t, b, "testdata/layout-hash-tasks.txt")
	checkInvariants(t, b)
	payload := func(id string) string { return "payload of " + id }
	old := func(id string) *base.TaskMessage {
		return &base.TaskMessage{ID: id, Type: "old:task", Payload: []byte(payload(id)), Queue: "old", MaxRetry: 3}
	}

	info, err := b.GetTaskInfo(ctx, "old", "a")
	if err != nil {
		t.Fatal(err)
	}
	if info.State != base.StatePending || string(info.Message.Payload) != payload("a") || info.Message.Type != "old:task" || info.Message.MaxRetry != 3 {
		t.Errorf("GetTaskInfo(a) = state %v, type %q, payload %q, max retry %d", info.State, info.Message.Type, info.Message.Payload, info.Message.MaxRetry)
	}
	list, err := b.ListTasks(ctx, broker.ListParams{Queue: "old", State: base.StatePending, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 7 || list[0].Message.ID != "a" || len(list[6].Message.Payload) != 100 {
		t.Errorf("ListTasks(pending) = %d tasks, want the fixture's 7, oldest (a) first", len(list))
	}
	// An enqueue repeated is still recognized; another message is a
	// conflict.
	checkRepeatAndConflict(t, b, old("a"))
	bigOld := old("big")
	bigOld.Payload = []byte(strings.Repeat("x", 100))
	checkRepeatAndConflict(t, b, bigOld)
	if err := b.DeleteTask(ctx, "old", "d"); err != nil {
		t.Fatal(err)
	}
	if err := b.ArchiveTask(ctx, "old", "e"); err != nil {
		t.Fatal(err)
	}

	ls := mustFetch(t, b, "old", 10)
	got := map[string]*broker.Lease{}
	for _, l := range ls {
		got[l.Msg.ID] = l
	}
	for _, id := range []string{"a", "b", "c", "r", "big"} {
		if got[id] == nil {
			t.Fatalf("Fetch did not return fixture task %s (got %d tasks)", id, len(ls))
		}
	}
	if len(got["big"].Msg.Payload) != 100 || got["r"].Msg.Retention != time.Hour || string(got["a"].Msg.Payload) != payload("a") {
		t.Errorf("fetched messages: big %d bytes, r retention %v, a %q", len(got["big"].Msg.Payload), got["r"].Msg.Retention, got["a"].Msg.Payload)
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{got["a"].Ref(), got["r"].Ref()}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("Complete = %v", errs)
	}
	if err := b.Retry(ctx, broker.RetryParams{Lease: got["b"].Ref(), Delay: time.Minute, ErrMsg: "boom", IsFailure: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Archive(ctx, broker.ArchiveParams{Lease: got["c"].Ref(), ErrMsg: "gone"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Requeue(ctx, got["big"].Ref()); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]base.TaskState{
		"r": base.StateCompleted, "b": base.StateRetry, "c": base.StateArchived, "e": base.StateArchived, "big": base.StatePending,
	} {
		info, err := b.GetTaskInfo(ctx, "old", id)
		if err != nil {
			t.Errorf("GetTaskInfo(%s): %v", id, err)
		} else if info.State != want {
			t.Errorf("task %s is %v, want %v", id, info.State, want)
		}
	}
	for _, id := range []string{"a", "d"} {
		if _, err := b.GetTaskInfo(ctx, "old", id); !errors.Is(err, base.ErrTaskNotFound) {
			t.Errorf("GetTaskInfo(%s) = %v, want ErrTaskNotFound", id, err)
		}
	}
	checkInvariants(t, b)
}

// TestActiveListpackFixture takes leases that an earlier htq granted, in
// an active zset Redis keeps as a listpack (testdata/layout-active-
// listpack.txt), through the operations an active task meets: a fetch
// adds to that zset as it is, the previous worker's tokens still complete
// and extend, an expired one is found and retried, and once the zset has
// emptied the next fetch makes it a skiplist.
func TestActiveListpackFixture(t *testing.T) {
	clock := clockwork.NewFakeClockAt(epoch)
	b := newTestBroker(t, clock)
	ctx := t.Context()
	loadFixture(t, b, "testdata/layout-active-listpack.txt")
	checkInvariants(t, b)
	k := newQueueKeys("held")
	encoding := func() string {
		t.Helper()
		enc, err := b.c.Do(ctx, b.c.B().ObjectEncoding().Key(k.active).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		return enc
	}
	if enc := encoding(); enc != "listpack" {
		t.Fatalf("the fixture's active zset is a %s, want listpack", enc)
	}
	old := func(id string) broker.LeaseRef {
		n := map[string]string{"a": "1", "b": "2"}[id]
		return broker.LeaseRef{Queue: "held", ID: id, Token: "oldworker/" + strings.Repeat("k3j9x0q2m8v5t1r7", 4)[:55] + "." + n}
	}

	ls := mustFetch(t, b, "held", 10)
	if len(ls) != 1 || ls[0].Msg.ID != "c" || string(ls[0].Msg.Payload) != "payload of c" {
		t.Fatalf("Fetch = %d leases (first %v), want task c", len(ls), ls)
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{old("a"), ls[0].Ref()}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("Complete(a with the previous worker's token, c) = %v", errs)
	}
	lost, err := b.ExtendLeases(ctx, "held", []broker.LeaseRef{old("b")}, 30*time.Second)
	if err != nil || len(lost) != 0 {
		t.Fatalf("ExtendLeases(b with the previous worker's token) = lost %v, %v", lost, err)
	}
	clock.Advance(2 * time.Minute)
	exp, err := b.ExpiredLeases(ctx, "held", 10)
	if err != nil || len(exp) != 1 || exp[0].Msg.ID != "b" || exp[0].Token != old("b").Token {
		t.Fatalf("ExpiredLeases = %v, %v; want b under the previous worker's token", exp, err)
	}
	if err := b.Retry(ctx, broker.RetryParams{Lease: exp[0].Ref(), ErrMsg: "lease expired", IsFailure: true, RequireExpired: true}); err != nil {
		t.Fatalf("Retry(b, expired): %v", err)
	}
	if n, err := b.c.Do(ctx, b.c.B().Exists().Key(k.active).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("active zset exists = %d, %v after its last task left; want 0", n, err)
	}
	checkInvariants(t, b)

	mustEnqueue(t, b, msg("held", "d"), time.Time{})
	if ls := mustFetch(t, b, "held", 10); len(ls) != 1 || ls[0].Msg.ID != "d" {
		t.Fatalf("Fetch = %d leases, want task d", len(ls))
	}
	if enc := encoding(); enc != "skiplist" {
		t.Errorf("active zset made by this version's fetch is a %s, want skiplist", enc)
	}
	checkInvariants(t, b)
}

// checkRepeatAndConflict checks that enqueueing m, which is stored, again
// succeeds, and that another message with its ID, with or without a
// retention (enqueue_plain's SET NX or HSETNX), alone or in a batch, is a
// conflict.
func checkRepeatAndConflict(t *testing.T, b *Broker, m *base.TaskMessage) {
	t.Helper()
	ctx := t.Context()
	if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: m}); err != nil {
		t.Errorf("repeated Enqueue of %s: %v", m.ID, err)
	}
	other := *m
	other.Payload = []byte("other")
	for _, r := range []time.Duration{0, time.Hour} {
		other.Retention = r
		if err := b.Enqueue(ctx, broker.EnqueueParams{Msg: &other}); !errors.Is(err, base.ErrTaskIDConflict) {
			t.Errorf("Enqueue of another task with ID %s (retention %v) = %v, want ErrTaskIDConflict", m.ID, r, err)
		}
	}
	if errs := b.EnqueueBatch(ctx, []broker.EnqueueParams{{Msg: &other}, {Msg: m}}); !errors.Is(errs[0], base.ErrTaskIDConflict) || errs[1] != nil {
		t.Errorf("EnqueueBatch of a conflict and a repeat of %s = %v, want [ErrTaskIDConflict <nil>]", m.ID, errs)
	}
}

// loadFixture runs the Redis commands of a fixture file: one a line,
// arguments separated by spaces, a "hex:" argument given as its bytes,
// lines starting with # ignored.
func loadFixture(t *testing.T, b *Broker, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		args := strings.Fields(line)
		for i, a := range args {
			if h, ok := strings.CutPrefix(a, "hex:"); ok {
				v, err := hex.DecodeString(h)
				if err != nil {
					t.Fatalf("%s: %q: %v", path, line, err)
				}
				args[i] = string(v)
			}
		}
		redis(t, b, args...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestWorkflowTaskIDReused checks that a workflow whose task finished and
// was deleted reads its ID, taken since by a plain task in the string
// form, as another task's: GetWorkflow and CancelWorkflow do not fail on
// it and leave it alone.
func TestWorkflowTaskIDReused(t *testing.T) {
	b := newTestBroker(t, clockwork.NewFakeClockAt(epoch))
	ctx := t.Context()
	m := msg("wq", "w1")
	m.Workflow, m.WorkflowTask = "wf", "a"
	second := msg("wq", "w2")
	second.Workflow, second.WorkflowTask = "wf", "b"
	w := &base.Workflow{ID: "wf", Tasks: []*base.WorkflowTask{
		{ID: "a", Msg: m},
		{ID: "b", Msg: second, DependsOn: []base.Dependency{{Task: "a"}}},
	}}
	if err := b.EnqueueWorkflow(ctx, w); err != nil {
		t.Fatal(err)
	}
	ls := mustFetch(t, b, "wq", 1)
	if len(ls) != 1 {
		t.Fatalf("Fetch = %d tasks, want the workflow's first", len(ls))
	}
	if errs := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	mustEnqueue(t, b, msg("wq", "w1"), time.Time{})
	if got := keyType(t, b, "htq:{wq}:t:w1"); got != "string" {
		t.Fatalf("the new task w1 is a %s, want a string", got)
	}
	info, err := b.GetWorkflow(ctx, "wf")
	if err != nil {
		t.Fatalf("GetWorkflow: %v", err)
	}
	for _, ti := range info.Tasks {
		if ti.ID == "a" && ti.State != 0 {
			t.Errorf("workflow task a reads as state %v, want 0 (its ID is another task's now)", ti.State)
		}
	}
	if _, err := b.CancelWorkflow(ctx, "wf"); err != nil {
		t.Fatalf("CancelWorkflow: %v", err)
	}
	if ti, err := b.GetTaskInfo(ctx, "wq", "w1"); err != nil || ti.State != base.StatePending {
		t.Errorf("the plain task w1 after the cancel: %+v, %v; want it pending", ti, err)
	}
	checkInvariants(t, b)
}
