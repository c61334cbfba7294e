package chaostest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"time"
)

// TaskType is the type of every task the suites enqueue.
const TaskType = "chaos"

// TaskID is the ID of the i-th task of a suite whose IDs start with prefix.
func TaskID(prefix string, i int) string { return fmt.Sprintf("%s%06d", prefix, i) }

// WorkFor is how long the i-th task's handler runs: a duration from min to
// max (inclusive, whole milliseconds) that depends only on i, so that a
// producer that restarts gives a task the same duration again.
func WorkFor(i int, min, max time.Duration) time.Duration {
	span := int64(max/time.Millisecond - min/time.Millisecond + 1)
	if span <= 1 {
		return min
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(strconv.Itoa(i)))
	return min + time.Duration(int64(h.Sum64()%uint64(span)))*time.Millisecond
}

// Payload is the payload of a task whose handler runs for d: its length
// in milliseconds, in decimal, then, when HTQ_CHAOS_PAYLOAD names a size
// in bytes, '|' and padding up to that size (large messages take another
// path through a Redis fetch: rdb's form 4).
func Payload(d time.Duration) []byte {
	p := []byte(strconv.FormatInt(d.Milliseconds(), 10))
	if n, err := strconv.Atoi(os.Getenv("HTQ_CHAOS_PAYLOAD")); err == nil && n > len(p)+1 {
		p = append(p, '|')
		for len(p) < n {
			p = append(p, 'p')
		}
	}
	return p
}

// ParsePayload reads the duration Payload wrote.
func ParsePayload(p []byte) (time.Duration, error) {
	if i := bytes.IndexByte(p, '|'); i >= 0 {
		p = p[:i] // the padding of HTQ_CHAOS_PAYLOAD
	}
	ms, err := strconv.ParseInt(string(p), 10, 64)
	if err != nil || ms < 0 {
		return 0, fmt.Errorf("chaostest: payload %q is not a duration in milliseconds", p)
	}
	return time.Duration(ms) * time.Millisecond, nil
}
