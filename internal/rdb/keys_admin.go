package rdb

import "strconv"

// Key names of the management operations (broker.Admin), kept beside
// keys.go: aggregation sets, scheduler entries and tick claims. docs/redis-layout.md describes each key.

const (
	// keySchedulers is the zset of live schedulers, score = expiry of
	// their entries (ms, storage clock).
	keySchedulers = "htq:schedulers"
	// keySchedulerPrefix + scheduler ID holds a scheduler's entries (JSON).
	keySchedulerPrefix = "htq:scheduler:"
	// keyClaimPrefix + "<entry ID>:<tick, Unix ms>" records that a
	// scheduler enqueued that tick of that entry.
	keyClaimPrefix = "htq:sched:claim:"
)

// schedulerKey names the entries record of scheduler id.
func schedulerKey(id string) string { return keySchedulerPrefix + id }

// claimKey names the claim of one tick of a scheduler entry.
func claimKey(entryID string, tickMS int64) string {
	return keyClaimPrefix + entryID + ":" + strconv.FormatInt(tickMS, 10)
}

// queueAdminKeys are the key names of one queue that only the management
// operations use (the settings hash, which Fetch reads, is in queueKeys).
type queueAdminKeys struct {
	aggs string // zset of aggregation set IDs, score = lease deadline (ms)
	agg  string // prefix of aggregation sets (hashes): + set ID
}

// adminKeys returns the management key names of the queue of k.
func (k *queueKeys) adminKeys() queueAdminKeys {
	p := "htq:{" + k.name + "}:"
	return queueAdminKeys{
		aggs: p + "aggs",
		agg:  p + "agg:",
	}
}
