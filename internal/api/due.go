package api

import (
	"bytes"
	"time"
)

// A URL task that waits for a time (process_at or delay at enqueue, the
// next run of a variable task) carries that due time in its payload as
// "process_at", so that the dispatcher can observe how late it started
// (htq_dispatch_lateness_seconds). The field is extra to
// queuemeta.URLTask, whose decoding ignores it.

// dueKey is the member WithDueTime adds.
const dueKey = `"process_at"`

// WithDueTime returns the JSON object payload (a URL task's) with its due
// time added as the member "process_at" (UTC, RFC 3339 with nanoseconds).
// A payload that is not a JSON object is returned unchanged.
func WithDueTime(payload []byte, due time.Time) []byte {
	n := len(payload)
	if n < 2 || payload[0] != '{' || payload[n-1] != '}' {
		return payload
	}
	out := make([]byte, 0, n+48)
	out = append(out, payload[:n-1]...)
	if n > 2 {
		out = append(out, ',')
	}
	out = append(out, dueKey...)
	out = append(out, ':', '"')
	out = due.UTC().AppendFormat(out, time.RFC3339Nano)
	return append(out, '"', '}')
}

// DueTime reads the due time WithDueTime added to a URL task's payload.
func DueTime(payload []byte) (time.Time, bool) {
	_, t, ok := dueMember(payload)
	return t, ok
}

// WithoutDueTime returns payload without the member WithDueTime added
// (payload itself when it has none).
func WithoutDueTime(payload []byte) []byte {
	i, _, ok := dueMember(payload)
	if !ok {
		return payload
	}
	out := make([]byte, 0, i+1)
	out = append(out, payload[:i]...)
	return append(out, '}')
}

// dueMember finds the member WithDueTime appends: the last one, with
// the closing brace right after its time. i is where it starts (its
// comma, or just after the opening brace).
func dueMember(payload []byte) (i int, t time.Time, ok bool) {
	const prefix = dueKey + `:"`
	n := len(payload)
	if n < len(prefix)+4 || payload[n-1] != '}' || payload[n-2] != '"' {
		return 0, time.Time{}, false
	}
	k := bytes.LastIndex(payload, []byte(prefix))
	if k < 1 || (payload[k-1] != ',' && payload[k-1] != '{') {
		return 0, time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(payload[k+len(prefix):n-2]))
	if err != nil {
		return 0, time.Time{}, false
	}
	if payload[k-1] == ',' {
		k--
	}
	return k, t, true
}
