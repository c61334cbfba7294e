package rdb

import (
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/broker"
)

func TestTokenPrefix(t *testing.T) {
	seen := map[string]bool{}
	for _, id := range []string{"", "w", "0b9f3c9e-1f7c-4a53-9d2b-4f0f6f1b2c3d", strings.Repeat("s/", 40)} {
		for range 100 {
			p := tokenPrefix(id)
			if len(p) < minTokenPrefix || !strings.HasPrefix(p, id+"/") || !strings.HasSuffix(p, ".") {
				t.Fatalf("tokenPrefix(%q) = %q: want %q/<random>. of at least %d bytes", id, p, id, minTokenPrefix)
			}
			if got := broker.ServerOfToken(p + "1"); got != id {
				t.Fatalf("ServerOfToken(%q) = %q, want %q", p+"1", got, id)
			}
			if seen[p] {
				t.Fatalf("tokenPrefix(%q) returned %q twice", id, p)
			}
			seen[p] = true
		}
	}
}

// TestLeasesHashIsHashTable checks what minTokenPrefix is for: on a
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
