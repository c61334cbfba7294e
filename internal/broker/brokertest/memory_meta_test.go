package brokertest_test

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/htqueue/htq/internal/base"
)

// The reference broker's MetaStore: a map under the broker's lock.

func (b *memBroker) PutMeta(ctx context.Context, key string, value []byte) error {
	_, err := b.putMeta(key, value, false)
	return err
}

func (b *memBroker) PutMetaIfAbsent(ctx context.Context, key string, value []byte) (bool, error) {
	return b.putMeta(key, value, true)
}

func (b *memBroker) putMeta(key string, value []byte, ifAbsent bool) (bool, error) {
	if err := base.ValidateMeta(key, value); err != nil {
		return false, err
	}
	if err := b.lock(); err != nil {
		return false, err
	}
	defer b.mu.Unlock()
	if b.meta == nil {
		b.meta = map[string][]byte{}
	}
	if _, ok := b.meta[key]; ok && ifAbsent {
		return false, nil
	}
	b.meta[key] = append([]byte(nil), value...)
	return true, nil
}

func (b *memBroker) GetMeta(ctx context.Context, key string) ([]byte, error) {
	if err := base.ValidateMeta(key, nil); err != nil {
		return nil, err
	}
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	v, ok := b.meta[key]
	if !ok {
		return nil, fmt.Errorf("meta %q: %w", key, base.ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}

func (b *memBroker) DeleteMeta(ctx context.Context, key string) error {
	if err := base.ValidateMeta(key, nil); err != nil {
		return err
	}
	if err := b.lock(); err != nil {
		return err
	}
	defer b.mu.Unlock()
	delete(b.meta, key)
	return nil
}

func (b *memBroker) ListMeta(ctx context.Context, prefix string) (map[string][]byte, error) {
	if err := b.lock(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	out := maps.Clone(b.meta)
	maps.DeleteFunc(out, func(k string, _ []byte) bool { return !strings.HasPrefix(k, prefix) })
	if out == nil {
		out = map[string][]byte{}
	}
	return out, nil
}
