package rdb

import (
	"testing"
	"time"

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
