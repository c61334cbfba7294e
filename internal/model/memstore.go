package model

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// MemStore is a broker.MetaStore in memory, for tests of code built on
// the queue model.
type MemStore struct {
	mu   sync.Mutex
	recs map[string][]byte
}

var _ broker.MetaStore = (*MemStore)(nil)

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{recs: make(map[string][]byte)} }

// PutMeta stores value under key.
func (m *MemStore) PutMeta(ctx context.Context, key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.recs[key] = append([]byte(nil), value...)
	return nil
}

// PutMetaIfAbsent stores value under key if the key is free.
func (m *MemStore) PutMetaIfAbsent(ctx context.Context, key string, value []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[key]; ok {
		return false, nil
	}
	m.recs[key] = append([]byte(nil), value...)
	return true, nil
}

// GetMeta returns the value under key or an error wrapping base.ErrNotFound.
func (m *MemStore) GetMeta(ctx context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.recs[key]
	if !ok {
		return nil, fmt.Errorf("memstore: %s: %w", key, base.ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}

// DeleteMeta removes key.
func (m *MemStore) DeleteMeta(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, key)
	return nil
}

// ListMeta returns every record whose key starts with prefix.
func (m *MemStore) ListMeta(ctx context.Context, prefix string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]byte)
	for k, v := range m.recs {
		if strings.HasPrefix(k, prefix) {
			out[k] = append([]byte(nil), v...)
		}
	}
	return out, nil
}
