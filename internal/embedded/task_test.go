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
