package htq

import (
	"maps"
	"slices"
	"testing"
)

// TestQueueOrderShares: with weights, each queue comes first in exactly its
// share of every window of total fetches, whatever the draws for the
// rest, and every order names every queue once.
func TestQueueOrderShares(t *testing.T) {
	weights := map[string]int{"critical": 5, "default": 3, "low": 2}
	qs := newQueueSelector(weights, false)
	for window := range 50 {
		firsts := map[string]int{}
		for range 10 {
			o := qs.order()
			sorted := slices.Sorted(slices.Values(o))
			if !slices.Equal(sorted, slices.Sorted(maps.Keys(weights))) {
				t.Fatalf("order %v does not name each queue once", o)
			}
			firsts[o[0]]++
		}
		if !maps.Equal(firsts, weights) {
			t.Fatalf("window %d: first queues %v, want exactly %v", window, firsts, weights)
		}
	}
	if o := newQueueSelector(weights, true).order(); !slices.Equal(o, []string{"critical", "default", "low"}) {
		t.Fatalf("strict order %v", o)
	}
	for _, qs := range []map[string]int{nil, {"only": 2}} {
		if o := newQueueSelector(qs, false).order(); len(o) != len(qs) {
			t.Fatalf("order of %v: %v", qs, o)
		}
	}
}
