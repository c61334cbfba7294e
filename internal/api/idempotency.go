package api

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// IdempotencyKeyHeader names the header that makes an enqueue safe to
// repeat: the task ID is derived from the key and the queue (and, in a
// batch, the task's index), so a repeat of the request asks to store the
// same task under the same ID, and the storage answers it as done. It
// needs no record of keys: it holds across htq serve processes and
// restarts, for as long as the task is kept (docs/api.md).
const IdempotencyKeyHeader = "Idempotency-Key"

// maxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
const maxIdempotencyKey = 255

// idempotencyKey returns the request's Idempotency-Key, "" when it has
// none; a key that is empty, too long, given twice or not printable ASCII
// is an invalid-argument error.
func idempotencyKey(r *http.Request) (string, error) {
	vs := r.Header.Values(IdempotencyKeyHeader)
	switch {
	case len(vs) == 0:
		return "", nil
	case len(vs) > 1:
		return "", invalid(IdempotencyKeyHeader + " is given more than once")
	}
	key := vs[0]
	if key == "" || len(key) > maxIdempotencyKey {
		return "", invalid(fmt.Sprintf("%s must have 1 to %d characters, not %d", IdempotencyKeyHeader, maxIdempotencyKey, len(key)))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return "", invalid(fmt.Sprintf("%s may hold printable ASCII only; byte %d is 0x%02x", IdempotencyKeyHeader, i, c))
		}
	}
	return key, nil
}

// keyTask gives spec the task ID derived from key: index is the task's
// place in a batch, -1 for a single enqueue. A spec that names its own
// task_id is an invalid-argument error: the key would be ignored.
func keyTask(spec *model.TaskSpec, key, queue string, index int) error {
	if spec.Options != nil && spec.Options.TaskID != "" {
		return invalid(fmt.Sprintf("options.task_id %q and an %s header: give one or the other", spec.Options.TaskID, IdempotencyKeyHeader))
	}
	if spec.Options == nil {
		spec.Options = &model.TaskOptions{}
	}
	spec.Options.TaskID = idempotentID(key, queue, index)
	spec.Idempotent = true
	return nil
}

// idempotentID derives a task ID from an Idempotency-Key, the queue and
// the index of the task in a batch (-1: a single enqueue): the first 128
// bits of a SHA-256 of the three, in the form of a UUID (version 8, the
// version of UUIDs whose bits the application chooses).
func idempotentID(key, queue string, index int) string {
	h := sha256.New()
	h.Write([]byte("htq idempotency key\x00"))
	h.Write([]byte(queue))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(index)))
	h.Write([]byte{0})
	h.Write([]byte(key))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x80 // version 8
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return base.FormatUUID(b)
}
