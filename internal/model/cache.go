package model

import (
	"context"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/broker"
)

// Cache keeps recently read queue records in memory, so that the hot paths
// (an enqueue checking the queue's mode, the dispatcher reading a queue's
// policy for each task) cost no storage round trip. A record is read again
// after TTL, so a change made by another htq serve process is seen within
// TTL; changes made through the Cache are seen at once. A queue's mode never
// changes while it exists, so a stale record only ever delays a policy
// change.
type Cache struct {
	ms  broker.MetaStore
	ttl time.Duration
	now func() time.Time

	mu      sync.RWMutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	q  *Queue
	at time.Time
}

// DefaultCacheTTL is the TTL NewCache uses for ttl ≤ 0.
const DefaultCacheTTL = 5 * time.Second

// NewCache returns a Cache over ms whose records live for ttl (≤ 0:
// DefaultCacheTTL).
func NewCache(ms broker.MetaStore, ttl time.Duration) *Cache {
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	return &Cache{ms: ms, ttl: ttl, now: time.Now, entries: make(map[string]cacheEntry)}
}

// Store returns the MetaStore behind the cache.
func (c *Cache) Store() broker.MetaStore { return c.ms }

func (c *Cache) lookup(name string) *Queue {
	c.mu.RLock()
	e, ok := c.entries[name]
	c.mu.RUnlock()
	if !ok || c.now().Sub(e.at) > c.ttl {
		return nil
	}
	return e.q
}

func (c *Cache) remember(q *Queue) {
	c.mu.Lock()
	c.entries[q.Name] = cacheEntry{q: q, at: c.now()}
	c.mu.Unlock()
}

// Forget drops a queue's record from the cache.
func (c *Cache) Forget(name string) {
	c.mu.Lock()
	delete(c.entries, name)
	c.mu.Unlock()
}

// Get is Get through the cache. The record returned is shared: do not
// modify it.
func (c *Cache) Get(ctx context.Context, name string) (*Queue, error) {
	if q := c.lookup(name); q != nil {
		return q, nil
	}
	q, err := Get(ctx, c.ms, name)
	if err != nil {
		return nil, err
	}
	c.remember(q)
	return q, nil
}

// Ensure is Ensure through the cache: a cached record of the same mode
// answers without a storage call.
func (c *Cache) Ensure(ctx context.Context, name string, mode Mode, now time.Time) (q *Queue, created bool, err error) {
	if q := c.lookup(name); q != nil && q.Mode == mode {
		return q, false, nil
	}
	q, created, err = Ensure(ctx, c.ms, name, mode, now)
	if q != nil {
		c.remember(q)
	}
	return q, created, err
}

// Create is Create through the cache.
func (c *Cache) Create(ctx context.Context, q *Queue) (*Queue, error) {
	got, err := Create(ctx, c.ms, q)
	if got != nil {
		c.remember(got)
	}
	return got, err
}

// Put is Put through the cache.
func (c *Cache) Put(ctx context.Context, q *Queue) error {
	if err := Put(ctx, c.ms, q); err != nil {
		c.Forget(q.Name)
		return err
	}
	c.remember(q)
	return nil
}

// Update is Update through the cache.
func (c *Cache) Update(ctx context.Context, name string, change func(*Queue) error) (*Queue, error) {
	q, err := Update(ctx, c.ms, name, change)
	if err != nil {
		c.Forget(name)
		return nil, err
	}
	c.remember(q)
	return q, nil
}

// Delete is Delete through the cache.
func (c *Cache) Delete(ctx context.Context, name string) error {
	c.Forget(name)
	return Delete(ctx, c.ms, name)
}

// List is List (it always reads the storage) and refreshes the cache.
func (c *Cache) List(ctx context.Context) ([]*Queue, error) {
	qs, err := List(ctx, c.ms)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		c.remember(q)
	}
	return qs, nil
}
