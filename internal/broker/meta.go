package broker

import "context"

// MetaStore keeps small named records beside the queues: the settings
// htq serve keeps per queue (mode, retry policy), its generated API token,
// its persisted schedules. Keys are at most 512 bytes of printable text;
// values at most 1 MiB. Writes are durable to the backend's guarantee.
type MetaStore interface {
	// PutMeta stores value under key, replacing any earlier value.
	PutMeta(ctx context.Context, key string, value []byte) error
	// PutMetaIfAbsent stores value under key only if the key is free, and
	// reports whether it did.
	PutMetaIfAbsent(ctx context.Context, key string, value []byte) (bool, error)
	// GetMeta returns the value under key, or an error wrapping
	// base.ErrNotFound.
	GetMeta(ctx context.Context, key string) ([]byte, error)
	// DeleteMeta removes key; removing a missing key is not an error.
	DeleteMeta(ctx context.Context, key string) error
	// ListMeta returns every record whose key starts with prefix.
	ListMeta(ctx context.Context, prefix string) (map[string][]byte, error)
}
