package embedded

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
)

// TestTaskTree checks the order-statistic treap against a sorted slice under
// random inserts, removals, key changes and rank queries.
func TestTaskTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base0 := time.Unix(1_900_000_000, 0)
	newTask := func(seq uint64) *task {
		return &task{seq: seq, msg: &base.TaskMessage{ID: "t"}, at: base0.Add(time.Duration(rng.IntN(50)) * time.Second)}
	}
	var model []*task
	tr := &taskTree{}
	// Start from a built tree, as a reopen does.
	for i := range 200 {
		model = append(model, newTask(uint64(i)))
	}
	slices.SortFunc(model, cmpTask)
	tr.build(slices.Clone(model))
	seq := uint64(1000)
	for step := range 20_000 {
		switch r := rng.IntN(10); {
		case r < 4 || len(model) == 0:
			seq++
			x := newTask(seq)
			tr.insert(x)
			i, _ := slices.BinarySearchFunc(model, x, cmpTask)
			model = slices.Insert(model, i, x)
		case r < 7:
			i := rng.IntN(len(model))
			tr.remove(model[i])
			model = slices.Delete(model, i, i+1)
		case r < 8:
			// a key change, as ExtendLeases does
			i := rng.IntN(len(model))
			x := model[i]
			tr.remove(x)
			model = slices.Delete(model, i, i+1)
			x.at = x.at.Add(time.Duration(rng.IntN(20)) * time.Second)
			tr.insert(x)
			j, _ := slices.BinarySearchFunc(model, x, cmpTask)
			model = slices.Insert(model, j, x)
		default:
			k := rng.IntN(len(model) + 2)
			var got []*task
			tr.ascendFrom(k, func(x *task) bool { got = append(got, x); return len(got) < 5 })
			want := model[min(k, len(model)):min(k+5, len(model))]
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: ascendFrom(%d) wrong", step, k)
			}
			got = got[:0]
			tr.descendFrom(k, func(x *task) bool { got = append(got, x); return len(got) < 5 })
			var wantDesc []*task
			for i := len(model) - 1 - k; i >= 0 && len(wantDesc) < 5; i-- {
				wantDesc = append(wantDesc, model[i])
			}
			if !slices.Equal(got, wantDesc) {
				t.Fatalf("step %d: descendFrom(%d) wrong", step, k)
			}
		}
		if tr.Len() != len(model) {
			t.Fatalf("step %d: Len %d, want %d", step, tr.Len(), len(model))
		}
		if len(model) > 0 && tr.min() != model[0] {
			t.Fatalf("step %d: min wrong", step)
		}
		if step%1000 == 0 {
			var all []*task
			if err := tr.check(func(x *task) { all = append(all, x) }); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if !slices.Equal(all, model) {
				t.Fatalf("step %d: contents differ", step)
			}
			for _, x := range model {
				if !tr.contains(x) {
					t.Fatalf("step %d: contains misses a task", step)
				}
			}
		}
	}
}

// TestPendingList checks the pending treap against a slice in fetch order
// under random appends, prepends, fetches, removals and rank queries.
func TestPendingList(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	seq := uint64(0)
	newTask := func() *task {
		seq++
		return &task{seq: seq, msg: &base.TaskMessage{ID: "t"}}
	}
	var model []*task
	l := &pendingList{}
	// Start from a built list with stored orders, as a reopen does.
	for i := range 300 {
		x := newTask()
		x.order = int64(i - 100)
		model = append(model, x)
	}
	l.build(slices.Clone(model))
	if l.front != -100 || l.back != 199 {
		t.Fatalf("built list: front %d, back %d", l.front, l.back)
	}
	for step := range 30_000 {
		switch r := rng.IntN(20); {
		case r < 7 || len(model) == 0:
			x := newTask()
			l.pushBack(x)
			model = append(model, x)
		case r < 9:
			x := newTask()
			l.pushFront(x)
			model = slices.Insert(model, 0, x)
		case r < 14:
			if got := l.popFront(); got != model[0] {
				t.Fatalf("step %d: popFront wrong", step)
			}
			model = model[1:]
		case r < 17:
			i := rng.IntN(len(model))
			l.remove(model[i])
			model = slices.Delete(model, i, i+1)
		default:
			k := rng.IntN(len(model) + 2)
			var got []*task
			l.ascendFrom(k, func(x *task) bool { got = append(got, x); return len(got) < 5 })
			if want := model[min(k, len(model)):min(k+5, len(model))]; !slices.Equal(got, want) {
				t.Fatalf("step %d: ascendFrom(%d) wrong", step, k)
			}
		}
		if l.Len() != len(model) {
			t.Fatalf("step %d: Len %d, want %d", step, l.Len(), len(model))
		}
		if len(model) > 0 && l.first() != model[0] || len(model) == 0 && l.first() != nil {
			t.Fatalf("step %d: first wrong", step)
		}
		if step%1000 == 0 {
			var all []*task
			if err := l.check(func(x *task) { all = append(all, x) }); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if !slices.Equal(all, model) {
				t.Fatalf("step %d: contents differ", step)
			}
		}
	}
	for len(model) > 0 {
		if l.popFront() != model[0] {
			t.Fatal("draining: popFront wrong")
		}
		model = model[1:]
	}
	if l.popFront() != nil || l.root != nil {
		t.Fatal("drained list not empty")
	}
}

// TestPendingListDepth bounds the depth of the pending treap of a queue
// whose tasks went through it in FIFO order, so that Fetch and a page of the
// Inspector stay O(log n) with the priorities in use (a fixed hash of
// consecutive sequence numbers, not random ones).
func TestPendingListDepth(t *testing.T) {
	if testing.Short() {
		t.Skip("a queue of 2^18 tasks")
	}
	const n = 1 << 18
	tasks := make([]task, n)
	l := &pendingList{}
	seq := uint64(0)
	for i := range tasks {
		seq++
		tasks[i].seq = seq
		l.pushBack(&tasks[i])
	}
	for range 3 * n { // the queue holds n while 3n more pass through
		x := l.popFront()
		seq++
		x.seq = seq
		l.pushBack(x)
	}
	var maxDepth, sum int
	var walk func(t *task, d int)
	walk = func(t *task, d int) {
		if t == nil {
			return
		}
		maxDepth, sum = max(maxDepth, d), sum+d
		walk(t.l, d+1)
		walk(t.r, d+1)
	}
	walk(l.root, 1)
	spine := 0
	for t := l.root; t != nil; t = t.l {
		spine++
	}
	t.Logf("%d tasks: depth %d, mean depth %.1f, left spine %d", l.Len(), maxDepth, float64(sum)/float64(l.Len()), spine)
	// A random treap of n tasks: mean depth about 2 ln n ≈ 25, left spine
	// about ln n ≈ 12.5.
	if maxDepth > 80 || spine > 50 {
		t.Fatalf("depth %d, left spine %d: unbalanced", maxDepth, spine)
	}
}
