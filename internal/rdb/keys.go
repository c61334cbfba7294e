package rdb

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Every Redis key and channel name htq uses is built in this file; the Lua
// scripts only append task IDs, unique keys, group keys, day numbers and
// (to the pending list's name) the suffixes of the lanes that
// lua/lanelib.lua lists to the prefixes built here. docs/redis-layout.md describes each key.

const (
	// keyQueues is the set of every queue ever enqueued into.
	keyQueues = "htq:queues"
	// keyMeta is the hash of broker.MetaStore records.
	keyMeta = "htq:meta"
	// keyServers is the zset of running servers, score = presence expiry (ms).
	keyServers = "htq:servers"
	// keyServerPrefix + server ID holds a server's presence record (JSON).
	keyServerPrefix = "htq:server:"
	// keyWorkflows is the hash of workflow IDs to the queue their record
	// is kept in (the queue of their first task): the one way from an ID
	// to its record. Written before the record, so that it may name a
	// record that was never stored, which reads as no workflow.
	keyWorkflows = "htq:workflows"
	// channelEvents carries the hints of broker.Event: "r:<queue>" (pending
	// went from empty to not empty), "s:<queue>" (a scheduled or retry task
	// became the earliest of its zset), "c:<task ID>" (cancel its handler)
	// and "d:<queue>:<task ID>" (a watched task completed or was archived).
	channelEvents = "htq:events"
)

// Event message prefixes on channelEvents.
const (
	eventReadyPrefix     = "r:"
	eventScheduledPrefix = "s:"
	eventCancelPrefix    = "c:"
	eventDonePrefix      = "d:"
)

// serverKey names the presence record of server id.
func serverKey(id string) string { return keyServerPrefix + id }

// queueKeys holds every key name of one queue, built once per queue per
// Broker so that the hot path allocates none.
type queueKeys struct {
	name string

	task      string // prefix of task keys: + task ID (a hash, or a string holding only the message: lua/lib.lua's task_get)
	pending   string // list of pending IDs of priority 0 without a key; LPUSH new, RPOP oldest; + ":<p>", ":k:<key>" … the other lanes (lua/lanelib.lua)
	active    string // zset of lease deadlines (ms): a lease group's member ("\x02" + token), or an ID with a member of its own (lua/lib.lua)
	fetchN    string // hash: a lease group's token -> the leases it governs (lua/lib.lua)
	leases    string // hash of active IDs to their lease tokens
	scheduled string // zset of scheduled IDs, score = due time (ms)
	retry     string // zset of retry IDs, score = due time (ms)
	archived  string // zset of archived IDs, score = archive time (ms)
	completed string // zset of completed IDs, score = end of retention (ms)
	paused    string // exists while the queue is paused
	settings  string // hash of the queue's settings and rate-limit bucket
	groups    string // set of group keys with aggregating tasks
	group     string // prefix of group zsets: + group key
	unique    string // prefix of uniqueness locks: + unique key
	processed string // all-time processed counter; + ":<day>" per day
	failed    string // all-time failed counter; + ":<day>" per day
	events    string // stream: the queue's event log (broker.EventLog)
	waiting   string // zset of waiting workflow task IDs, score = enqueue time (ms)
	workflow  string // prefix of workflow hashes: + workflow ID (lua/wflib.lua)
	wfDone    string // zset of finished workflow hashes, score = end of retention (ms)
	fetch     string // prefix of fetch records, a lease group's IDs: + token (lua/fetch.lua)

	// taskPattern is a KEYS/SCAN glob matching every task key of the
	// queue. It is not a key: escaping may change its hash tag, so it is
	// passed to scripts as an ARGV.
	taskPattern string

	// registered is set once the queue name is in keyQueues (per Broker);
	// registeredAt (Unix ns) is when Enqueue last added it. Enqueue adds
	// it again after reregisterEvery, so that a queue another process
	// deleted (DeleteQueue) and this one still fills is listed again.
	registered   atomic.Bool
	registeredAt atomic.Int64

	// refetch holds the token prefixes of fetches of this Broker whose
	// outcome is unknown (the reply may have been lost); the next Fetch of
	// the queue takes one and calls with it again (Broker.Fetch).
	// refetchN is len(refetch), read without the lock on the hot path.
	refetchMu sync.Mutex
	refetch   []string
	refetchN  atomic.Int32

	// msgs follows the size of the queue's plain messages as this Broker
	// fetches them, to choose where Fetch reads them.
	msgs msgSizes
}

// extMessageBytes is the mean size of a queue's plain messages from which
// Fetch reads them with an MGET of its own (lua/fetch.lua's ext, form 4)
// rather than inside the script: Redis's Lua hashes every byte of a string
// it makes (~14 instructions a byte with the copies, docs/performance.md),
// while the script's type check costs about as much as 100 bytes and the
// MGET a second round trip per fetch, which costs the worker more than it
// saves Redis on small messages.
const extMessageBytes = 512

// extMinBatch is the least Max of a Fetch that may read large messages
// outside the script: the second round trip is paid per fetch, the Redis
// work saved per task. Measured at 1 KB messages (docs/performance.md): at
// Concurrency 50 +23 % tasks/s, at 10 (fetches of ten tasks or fewer)
// -9 %.
const extMinBatch = 32

// extPause is how many fetches Fetch reads in the script after a fetch
// that asked for ext found a task that is not plain (a hash: retried,
// scheduled, unique …), whose type checks were then spent for nothing.
const extPause = 16

// msgSizes is a queue's mean plain-message size in bytes (an
// exponentially weighted mean over fetches) and the fetches left before
// ext may be asked again.
type msgSizes struct {
	mean  atomic.Int64
	pause atomic.Int32
}

// external tells whether the next Fetch asks the script for form 4.
func (m *msgSizes) external() bool {
	if m.pause.Load() > 0 {
		m.pause.Add(-1)
		return false
	}
	return m.mean.Load() >= extMessageBytes
}

// observe counts a fetch's n plain messages of total bytes.
func (m *msgSizes) observe(bytes, n int) {
	avg := int64(bytes / n)
	if old := m.mean.Load(); old != 0 {
		avg = old + (avg-old)/4
	}
	m.mean.Store(avg)
}

// missed records a fetch that asked for ext and got another form.
func (m *msgSizes) missed() { m.pause.Store(extPause) }

// maxRefetch bounds queueKeys.refetch: one prefix per fetch in flight
// when the replies were lost; more would be fetch loops gone wild.
const maxRefetch = 64

// takeRefetch takes the token prefix of an earlier fetch of server
// serverID whose outcome is unknown, if there is one; else "".
func (k *queueKeys) takeRefetch(serverID string) string {
	if k.refetchN.Load() == 0 {
		return ""
	}
	k.refetchMu.Lock()
	defer k.refetchMu.Unlock()
	for i, p := range k.refetch {
		if broker.ServerOfToken(p) == serverID {
			k.refetch = append(k.refetch[:i], k.refetch[i+1:]...)
			k.refetchN.Store(int32(len(k.refetch)))
			return p
		}
	}
	return ""
}

// keepRefetch keeps the token prefix of a fetch whose outcome is unknown
// for the next Fetch of the queue.
func (k *queueKeys) keepRefetch(prefix string) {
	k.refetchMu.Lock()
	defer k.refetchMu.Unlock()
	if len(k.refetch) < maxRefetch {
		k.refetch = append(k.refetch, prefix)
		k.refetchN.Store(int32(len(k.refetch)))
	}
}

// reregisterEvery is how often Enqueue adds a queue to keyQueues again.
const reregisterEvery = time.Minute

// needsRegister tells whether the next enqueue into the queue must add it
// to keyQueues (pipelined with the script).
func (k *queueKeys) needsRegister() bool {
	return !k.registered.Load() || time.Now().UnixNano()-k.registeredAt.Load() > int64(reregisterEvery)
}

// markRegistered records that the queue was just added to keyQueues.
func (k *queueKeys) markRegistered() {
	k.registeredAt.Store(time.Now().UnixNano())
	k.registered.Store(true)
}

// newQueueKeys builds the key names of queue q, which must have passed
// base.ValidateQueueName (so it holds no '{', '}' or ':').
func newQueueKeys(q string) *queueKeys {
	p := "htq:{" + q + "}:"
	return &queueKeys{
		name:        q,
		task:        p + "t:",
		pending:     p + "pending",
		active:      p + "active",
		leases:      p + "leases",
		scheduled:   p + "scheduled",
		retry:       p + "retry",
		archived:    p + "archived",
		completed:   p + "completed",
		paused:      p + "paused",
		settings:    p + "settings",
		groups:      p + "groups",
		group:       p + "g:",
		unique:      p + "unique:",
		processed:   p + "stat:processed",
		failed:      p + "stat:failed",
		events:      p + "events",
		waiting:     p + "waiting",
		workflow:    p + "w:",
		wfDone:      p + "wfdone",
		fetch:       p + "fetch:",
		fetchN:      p + "fetch-counts",
		taskPattern: globEscape(p+"t:") + "*",
	}
}

// taskKey names the key of task id.
func (k *queueKeys) taskKey(id string) string { return k.task + id }

// uniqueKey names the uniqueness lock of key.
func (k *queueKeys) uniqueKey(key string) string { return k.unique + key }

// workflowKey names the hash of workflow id kept in this queue.
func (k *queueKeys) workflowKey(id string) string { return k.workflow + id }

// groupKey names the zset of the aggregating tasks of group g.
func (k *queueKeys) groupKey(g string) string { return k.group + g }

// queueKeysFor validates q and builds its keys (uncached; Broker.keys caches).
func queueKeysFor(q string) (*queueKeys, error) {
	if err := base.ValidateQueueName(q); err != nil {
		return nil, err
	}
	return newQueueKeys(q), nil
}

// globEscape escapes the characters Redis glob patterns treat specially.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
