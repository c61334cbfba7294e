package rdb

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

// TestEventLogOff: with event_log=0 in the URL no script writes the log,
// and reading it finds nothing.
func TestEventLogOff(t *testing.T) {
	b, err := Open(t.Context(), redistest.URL(t)+"?event_log=0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	ls, err := b.Fetch(t.Context(), broker.FetchParams{Queue: "q", Max: 1, LeaseDuration: time.Minute, ServerID: "s"})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Fetch: %v %v", ls, err)
	}
	if errs := b.Complete(t.Context(), []broker.LeaseRef{ls[0].Ref()}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if err := b.PauseQueue(t.Context(), "q"); err != nil {
		t.Fatal(err)
	}
	if n := redis(t, b, "EXISTS", "htq:{q}:events"); n[0] != "0" {
		t.Errorf("the event log was written with event_log=0")
	}
	batch, err := b.ReadEvents(t.Context(), broker.ReadEventsParams{Cursors: map[string]string{"q": broker.CursorStart}, Limit: 10})
	if err != nil || len(batch.Events) != 0 {
		t.Errorf("ReadEvents: %v, %v", batch, err)
	}
}

// decodeLogEntry reads what lib.lua's log_entry writes, and refuses what
// it does not write.
func TestDecodeLogEntry(t *testing.T) {
	entry := func(fv ...string) rueidis.XRangeEntry {
		m := map[string]string{}
		for i := 0; i < len(fv); i += 2 {
			m[fv[i]] = fv[i+1]
		}
		return rueidis.XRangeEntry{ID: "1700000000000-3", FieldValues: m}
	}
	evs, err := decodeLogEntry("q", entry("s", "11\na\nb"))
	if err != nil || len(evs) != 2 || evs[1].TaskID != "b" || evs[1].State != base.StateActive || evs[1].Kind != broker.LogStarted ||
		evs[0].ID != "1700000000000-3" || evs[1].ID != "1700000000000-3.1" || !evs[0].Time.Equal(time.UnixMilli(1700000000000)) {
		t.Errorf("a batch: %+v, %v", evs, err)
	}
	evs, err = decodeLogEntry("q", entry("f", "4\na b|c", "E", "boom", "T", "42"))
	if err != nil || len(evs) != 1 || evs[0].TaskID != "a b|c" || evs[0].Error != "boom" || evs[0].State != base.StateRetry || !evs[0].Time.Equal(time.UnixMilli(42)) {
		t.Errorf("a failure with a time: %+v, %v", evs, err)
	}
	evs, err = decodeLogEntry("q", entry("p", ""))
	if err != nil || len(evs) != 1 || evs[0].Kind != broker.LogPaused || evs[0].TaskID != "" {
		t.Errorf("a queue's event: %+v, %v", evs, err)
	}
	for name, e := range map[string]rueidis.XRangeEntry{
		"no kind":      entry("E", "x"),
		"two kinds":    entry("e", "2\na", "s", "1\na"),
		"unknown kind": entry("z", "2\na"),
		"states":       entry("e", "22\na"),
		"bad state":    entry("e", "9\na"),
		"bad time":     entry("e", "2\na", "T", "soon"),
	} {
		if _, err := decodeLogEntry("q", e); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestEventLogBoundedByPlainEnqueues: enqueue_plain.lua trims the log by
// the first entry of each millisecond only (XTRIM MAXLEN ~), yet the log
// of a queue that only ever gets single enqueues stays about the size
// asked for: at most the size, one stream node (100 entries) and the
// entries of one millisecond (one round trip each) more.
func TestEventLogBoundedByPlainEnqueues(t *testing.T) {
	const size, n = 100, 3000
	b, err := Open(t.Context(), redistest.URL(t)+"?event_log=100", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	longest := 0
	for i := range n {
		mustEnqueue(t, b, msg("q", fmt.Sprint("t", i)), time.Time{})
		if i%100 == 99 {
			l, err := strconv.Atoi(redis(t, b, "XLEN", "htq:{q}:events")[0])
			if err != nil {
				t.Fatal(err)
			}
			longest = max(longest, l)
		}
	}
	if longest > 3*size {
		t.Errorf("the log held %d entries; want at most about %d", longest, 2*size)
	}
	last, err := b.ReadEvents(t.Context(), broker.ReadEventsParams{Cursors: map[string]string{"q": broker.CursorEnd}, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := b.ReadEvents(t.Context(), broker.ReadEventsParams{Cursors: map[string]string{"q": broker.CursorStart}, Limit: 3 * size})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Events) < size || batch.Events[len(batch.Events)-1].ID != last.Cursors["q"] ||
		batch.Events[len(batch.Events)-1].TaskID != fmt.Sprint("t", n-1) || batch.Events[0].Kind != broker.LogEnqueued {
		t.Errorf("read %d events, the last %+v (cursor at the end %q); want at least %d, the last the enqueue of t%d",
			len(batch.Events), batch.Events[len(batch.Events)-1], last.Cursors["q"], size, n-1)
	}
}
