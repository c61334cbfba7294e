package rdb

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/redistest"
)

// startSentinel starts a master and one sentinel watching it as
// "mymaster", and returns the sentinel's address.
func startSentinel(t *testing.T) (master *redistest.Server, sentinelAddr string) {
	t.Helper()
	master = redistest.Start(t)
	return master, redistest.StartSentinels(t, master.Addr, 1, 1)[0]
}

// TestSentinel reaches a master through a redis-sentinel:// URL and runs
// enqueue, fetch, complete and an event through it.
func TestSentinel(t *testing.T) {
	master, sentinel := startSentinel(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	url := fmt.Sprintf("redis-sentinel://%s/2?master=mymaster", sentinel)
	b, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatalf("Open %s: %v", url, err)
	}
	defer b.Close()
	if mode := b.c.Mode(); mode != "sentinel" {
		t.Fatalf("client mode = %v, want sentinel", mode)
	}
	events, err := b.Subscribe(ctx)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	mustEnqueue(t, b, msg("q", "a"), time.Time{})
	select {
	case e := <-events:
		if e.Kind != broker.EventReady || e.Queue != "q" {
			t.Fatalf("event %+v, want ready q", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ready event")
	}
	ls := mustFetch(t, b, "q", 10)
	if len(ls) != 1 {
		t.Fatalf("Fetch: %d tasks, want 1", len(ls))
	}
	if err := b.Complete(ctx, []broker.LeaseRef{ls[0].Ref()})[0]; err != nil {
		t.Fatalf("Complete: %v", err)
	}
	// The data went to the master's db 2.
	out, err := exec.Command("redis-cli", "-h", strings.Split(master.Addr, ":")[0], "-p", strings.Split(master.Addr, ":")[1],
		"-n", "2", "GET", "htq:{q}:stat:processed").Output()
	if err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Fatalf("processed counter on the master's db 2 = %q (%v), want 1", out, err)
	}
	checkInvariants(t, b)
}
