package rdb

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

var _ broker.MetaStore = (*Broker)(nil)

// The MetaStore records live in one hash, keyMeta (one Cluster slot):
// there are few of them (queue settings of htq serve, its schedules, its
// token), and ListMeta reads them all at once.

// PutMeta stores value under key; see broker.MetaStore.
func (b *Broker) PutMeta(ctx context.Context, key string, value []byte) error {
	if err := b.checkMeta("put meta", key, value); err != nil {
		return err
	}
	res, waitErr := b.doAckedOne(ctx, b.c.B().Hset().Key(keyMeta).FieldValue().FieldValue(key, rueidis.BinaryString(value)).Build())
	if err := res.Error(); err != nil {
		return b.wrap("put meta "+key, err)
	}
	return waitFailed("put meta "+key, waitErr)
}

// PutMetaIfAbsent stores value under key if the key is free; see
// broker.MetaStore.
func (b *Broker) PutMetaIfAbsent(ctx context.Context, key string, value []byte) (bool, error) {
	if err := b.checkMeta("put meta", key, value); err != nil {
		return false, err
	}
	res, waitErr := b.doAckedOne(ctx, b.c.B().Hsetnx().Key(keyMeta).Field(key).Value(rueidis.BinaryString(value)).Build())
	set, err := res.AsBool()
	if err != nil {
		return false, b.wrap("put meta "+key, err)
	}
	if !set {
		return false, nil // nothing written
	}
	return true, waitFailed("put meta "+key, waitErr)
}

// GetMeta returns the value under key; see broker.MetaStore.
func (b *Broker) GetMeta(ctx context.Context, key string) ([]byte, error) {
	if err := b.checkMeta("get meta", key, nil); err != nil {
		return nil, err
	}
	v, err := b.do(ctx, b.c.B().Hget().Key(keyMeta).Field(key).Build()).AsBytes()
	if rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("rdb: get meta %q: %w", key, base.ErrNotFound)
	}
	if err != nil {
		return nil, b.wrap("get meta "+key, err)
	}
	return v, nil
}

// DeleteMeta removes key; see broker.MetaStore.
func (b *Broker) DeleteMeta(ctx context.Context, key string) error {
	if err := b.checkMeta("delete meta", key, nil); err != nil {
		return err
	}
	res, waitErr := b.doAckedOne(ctx, b.c.B().Hdel().Key(keyMeta).Field(key).Build())
	if err := res.Error(); err != nil {
		return b.wrap("delete meta "+key, err)
	}
	return waitFailed("delete meta "+key, waitErr)
}

// ListMeta returns the records whose key starts with prefix; see
// broker.MetaStore.
func (b *Broker) ListMeta(ctx context.Context, prefix string) (map[string][]byte, error) {
	if b.closed.Load() {
		return nil, fmt.Errorf("rdb: list meta: %w", base.ErrStorageClosed)
	}
	all, err := b.do(ctx, b.c.B().Hgetall().Key(keyMeta).Build()).AsStrMap()
	if err != nil {
		return nil, b.wrap("list meta", err)
	}
	out := make(map[string][]byte)
	for k, v := range all {
		if strings.HasPrefix(k, prefix) {
			out[k] = []byte(v)
		}
	}
	return out, nil
}

func (b *Broker) checkMeta(op, key string, value []byte) error {
	if b.closed.Load() {
		return fmt.Errorf("rdb: %s: %w", op, base.ErrStorageClosed)
	}
	if err := base.ValidateMeta(key, value); err != nil {
		return fmt.Errorf("rdb: %s: %w", op, err)
	}
	return nil
}
