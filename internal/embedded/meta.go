package embedded

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

var _ broker.MetaStore = (*Broker)(nil)

// Limits of MetaStore records (see broker.MetaStore).
const (
	maxMetaKey   = 512
	maxMetaValue = 1 << 20
)

func checkMetaKey(key string) error {
	if key == "" || len(key) > maxMetaKey || !utf8.ValidString(key) {
		return fmt.Errorf("%w: meta key of %d bytes (1 to %d bytes of UTF-8)", base.ErrInvalidArgument, len(key), maxMetaKey)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: meta key %q has a character that is not printable", base.ErrInvalidArgument, key)
		}
	}
	return nil
}

// PutMeta stores value under key and returns once it is on disk.
func (b *Broker) PutMeta(ctx context.Context, key string, value []byte) error {
	_, err := b.putMeta(ctx, key, value, false)
	return err
}

// PutMetaIfAbsent stores value under key only if the key is free, and
// reports whether it did, once that is on disk.
func (b *Broker) PutMetaIfAbsent(ctx context.Context, key string, value []byte) (bool, error) {
	return b.putMeta(ctx, key, value, true)
}

func (b *Broker) putMeta(ctx context.Context, key string, value []byte, ifAbsent bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkMetaKey(key); err != nil {
		return false, fmt.Errorf("put meta: %w", err)
	}
	if len(value) > maxMetaValue {
		return false, fmt.Errorf("put meta: %w: value of %d bytes, the limit is %d", base.ErrInvalidArgument, len(value), maxMetaValue)
	}
	if err := b.begin(); err != nil {
		return false, err
	}
	if _, ok := b.kv[key]; ok && ifAbsent {
		b.mu.Unlock()
		return false, nil
	}
	v := append([]byte{}, value...)
	b.kv[key] = v
	if b.store != nil {
		b.buf.kv[key] = v
		b.work.Signal()
	}
	t := b.durable()
	b.mu.Unlock()
	return true, wait(ctx, t)
}

// GetMeta returns the value under key, or an error wrapping
// base.ErrNotFound.
func (b *Broker) GetMeta(ctx context.Context, key string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	v, ok := b.kv[key]
	if !ok {
		return nil, fmt.Errorf("get meta %q: %w", key, base.ErrNotFound)
	}
	return slices.Clone(v), nil
}

// DeleteMeta removes key and returns once that is on disk.
func (b *Broker) DeleteMeta(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := b.begin(); err != nil {
		return err
	}
	if _, ok := b.kv[key]; ok {
		delete(b.kv, key)
		if b.store != nil {
			b.buf.kv[key] = nil
			b.work.Signal()
		}
	}
	t := b.durable()
	b.mu.Unlock()
	return wait(ctx, t)
}

// ListMeta returns every record whose key starts with prefix.
func (b *Broker) ListMeta(ctx context.Context, prefix string) (map[string][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.begin(); err != nil {
		return nil, err
	}
	defer b.mu.Unlock()
	out := make(map[string][]byte)
	for k, v := range b.kv {
		if strings.HasPrefix(k, prefix) {
			out[k] = slices.Clone(v)
		}
	}
	return out, nil
}
