package htq

import (
	"testing"

	"github.com/google/uuid"
)

func TestNewTaskIDIsAUniqueV4UUID(t *testing.T) {
	seen := make(map[string]bool)
	for i := 0; i < 10000; i++ {
		id := newTaskID()
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || u.String() != id {
			t.Fatalf("%q: %v version %v variant %v", id, err, u.Version(), u.Variant())
		}
		if seen[id] {
			t.Fatalf("duplicate ID %s", id)
		}
		seen[id] = true
	}
}

func BenchmarkNewTaskID(b *testing.B) {
	b.Run("htq", func(b *testing.B) {
		for b.Loop() {
			_ = newTaskID()
		}
	})
	b.Run("uuid.NewString", func(b *testing.B) {
		for b.Loop() {
			_ = uuid.NewString()
		}
	})
}
