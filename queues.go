package htq

import (
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
)

// queueSelector decides in which order a server tries its queues on each
// fetch: by weighted random draw, or by strict priority.
type queueSelector struct {
	names   []string // sorted, for stable iteration
	weights []int    // parallel to names
	total   int
	strict  bool
	byPrio  []string // names by weight, highest first (strict order)

	mu  sync.Mutex
	rng *rand.Rand
	// current is the smooth weighted round-robin state, parallel to names.
	current []int
}

func newQueueSelector(queues map[string]int, strict bool) *queueSelector {
	qs := &queueSelector{strict: strict, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	for q := range queues {
		qs.names = append(qs.names, q)
	}
	sort.Strings(qs.names)
	qs.current = make([]int, len(qs.names))
	for _, q := range qs.names {
		qs.weights = append(qs.weights, queues[q])
		qs.total += queues[q]
	}
	qs.byPrio = append([]string(nil), qs.names...)
	sort.SliceStable(qs.byPrio, func(i, j int) bool { return queues[qs.byPrio[i]] > queues[qs.byPrio[j]] })
	return qs
}

// order returns the queues in the order to try them for one fetch. With
// weights, each queue comes first in weight/total of the fetches, exactly
// so over every total fetches (smooth weighted round-robin: the queue
// furthest behind its share goes first), so that the shares hold even
// when a server makes few, large fetches; the rest follow by weighted
// random draw among the remaining queues (the order in which a fetch
// falls back when the first queue is empty).
func (qs *queueSelector) order() []string {
	if qs.strict || len(qs.names) <= 1 {
		return qs.byPrio // also a server with no queue yet (a QueueSource's first answer)
	}
	out := make([]string, 0, len(qs.names))
	weights := append([]int(nil), qs.weights...)
	total := qs.total
	qs.mu.Lock()
	defer qs.mu.Unlock()
	first := 0
	for i, w := range qs.weights {
		qs.current[i] += w
		if qs.current[i] > qs.current[first] {
			first = i
		}
	}
	qs.current[first] -= qs.total
	out = append(out, qs.names[first])
	total -= weights[first]
	weights[first] = 0
	for len(out) < len(qs.names) {
		r := qs.rng.IntN(total)
		for i, w := range weights {
			if r < w {
				out = append(out, qs.names[i])
				total -= w
				weights[i] = 0
				break
			}
			r -= w
		}
	}
	return out
}

// queueSet holds the queues a server serves now. It changes when the
// server's QueueSource reports a new set.
type queueSet struct {
	strict bool
	sel    atomic.Pointer[queueSelector]
}

func newQueueSet(queues map[string]int, strict bool) *queueSet {
	s := &queueSet{strict: strict}
	s.sel.Store(newQueueSelector(queues, strict))
	return s
}

// current returns the selector of the queues served now.
func (s *queueSet) current() *queueSelector { return s.sel.Load() }

// names returns the queues served now, sorted.
func (s *queueSet) names() []string { return s.current().names }

// has reports whether q is served now.
func (s *queueSet) has(q string) bool { return s.current().has(q) }

// set replaces the queues served and reports whether they changed.
func (s *queueSet) set(queues map[string]int) bool {
	old := s.current()
	if len(old.names) == len(queues) {
		same := true
		for i, q := range old.names {
			if w, ok := queues[q]; !ok || w != old.weights[i] {
				same = false
				break
			}
		}
		if same {
			return false
		}
	}
	s.sel.Store(newQueueSelector(queues, s.strict))
	return true
}

// has reports whether q is one of the selector's queues.
func (qs *queueSelector) has(q string) bool {
	i := sort.SearchStrings(qs.names, q)
	return i < len(qs.names) && qs.names[i] == q
}
