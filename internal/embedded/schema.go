package embedded

import "encoding/binary"

// The bbolt file's schema: every bucket and key shape, in one place.
//
//	meta    "version" → uvarint schema version (schemaVersion)
//	        "checkpoint" → the last log record the file holds (wal.go)
//	tasks   seq (8 bytes, big endian) → task record (record.go)
//	queues  queue name → entry: flags byte (flagPaused, flagListed), then the
//	        settings (queueEntry)
//	kv      MetaStore key → value (htq serve's queue records, token, schedules)
//	claims  scheduler entry ID 0x00 tick (8 bytes, Unix ms) → expiry (8 bytes, Unix ms)
//	stats   queue 0x00 kind 0x00 day (8 bytes, big endian) → count (8 bytes, big endian)
//	        kind is 'p' (processed) or 'f' (failed); day is Unix ms / 86,400,000,
//	        or allTime for the all-time counter.
//	wfspecs    workflow ID → the workflow as enqueued (workflow_record.go)
//	workflows  workflow ID 0x00 'f' → canceled flag and finish time
//	        workflow ID 0x00 'o' task ID → how that workflow task finished
//	        Which task belongs to a workflow is in its task record (version 2).
//	        The specs have their own bucket: a spec can be large (a task
//	        per line), and bbolt rewrites a whole leaf page, large values
//	        included, for any change of a key on it; the outcomes written
//	        at each completion would otherwise rewrite the spec each time.
//
// Task records carry every index a queue needs (state, order, due time,
// lease), so the file has no index bucket that could disagree with them:
// the indexes are rebuilt in memory at open.
var (
	bucketMeta   = []byte("meta")
	bucketTasks  = []byte("tasks")
	bucketQueues = []byte("queues")
	bucketStats  = []byte("stats")
	bucketClaims = []byte("claims")
	bucketKV     = []byte("kv")
	// bucketWorkflows and bucketWorkflowSpecs hold the workflow records
	// (see above).
	bucketWorkflows     = []byte("workflows")
	bucketWorkflowSpecs = []byte("wfspecs")

	keyVersion = []byte("version")
	// keyCheckpoint holds the number of the last write-ahead log record
	// the file includes (8 bytes, big endian; wal.go).
	keyCheckpoint = []byte("checkpoint")
	// keyWAL holds the salt of the log session whose records may follow
	// the checkpoint and the size its files were preallocated to (8 bytes
	// each, big endian; wal.go, walSession). A salt of 0 means no session
	// left any: the store was closed cleanly.
	keyWAL = []byte("wal")
)

// schemaVersion is the version of the layout above. Open migrates older
// files up to it and refuses newer ones.
const schemaVersion = 1

// Queue flags, the first byte of a queues entry.
const (
	flagPaused byte = 1 // no server fetches the queue
	flagListed byte = 2 // enqueued into at least once: Queues lists it
)

// allTime is the day of the all-time counters.
const allTime = ^uint64(0)

// Counter kinds.
const (
	statProcessed byte = 'p'
	statFailed    byte = 'f'
)

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// statKey names one counter.
type statKey struct {
	queue string
	kind  byte
	day   uint64
}

// parseStatKey reads a key written by statKey.bytes.
func parseStatKey(b []byte) (statKey, bool) {
	n := len(b) - 11
	if n < 1 || b[n] != 0 || b[n+2] != 0 {
		return statKey{}, false
	}
	return statKey{queue: string(b[:n]), kind: b[n+1], day: binary.BigEndian.Uint64(b[n+3:])}, true
}

func (k statKey) bytes() []byte {
	b := make([]byte, 0, len(k.queue)+3+8)
	b = append(b, k.queue...)
	b = append(b, 0, k.kind, 0)
	return binary.BigEndian.AppendUint64(b, k.day)
}
