package embedded

import (
	"slices"
	"time"
)

// records holds presence records (of servers, of schedulers) in memory,
// each until it expires on the storage clock: they describe live processes,
// which cannot outlive the process that owns the store.
type records[T any] map[string]record[T]

type record[T any] struct {
	v       T
	expires time.Time
}

// put records v under id until expires.
func (r records[T]) put(id string, v T, expires time.Time) { r[id] = record[T]{v, expires} }

// live drops the records expired at now and returns the others by ID.
func (r records[T]) live(now time.Time) []T {
	ids := make([]string, 0, len(r))
	for id, rec := range r {
		if !rec.expires.After(now) {
			delete(r, id)
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]T, len(ids))
	for i, id := range ids {
		out[i] = r[id].v
	}
	return out
}
