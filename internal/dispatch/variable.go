package dispatch

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// HeaderNextIn is the answer header with which a target of a variable
// queue sets the interval before the task's next run.
const HeaderNextIn = "Htq-Next-In"

// Bounds of the intervals of a variable queue.
const (
	// MinInterval is the shortest interval NextInterval returns, whatever
	// the queue's stepping time or the target's Htq-Next-In say: a target
	// cannot make htq call it in a tight loop.
	MinInterval = time.Second
	// MaxInterval is the longest interval NextInterval returns, and the
	// maximum of a queue that sets none.
	MaxInterval = 30 * 24 * time.Hour
)

// NextInterval applies the rule of HTQ's variable queues after a run of a
// repeating task that succeeded (2xx). It is given the answer's body and
// headers, the interval that preceded this run (0 before the first
// repeat), and the queue's stepping time and maximum interval (HTQ's
// stepping_time and max_time_interval). It returns
// the interval until the next run, or done when the task ends.
//
// The rules, in order:
//
//  1. The body, with surrounding white space trimmed, is exactly "done":
//     the task ends (done is true).
//  2. The answer has an Htq-Next-In header holding a Go duration ("90s",
//     "1m30s", "250ms") or a number of seconds ("90", "1.5"): that is the
//     next interval, within [MinInterval, maxInterval]. A negative or malformed
//     value is ignored and the rules below apply.
//  3. The body, trimmed, is exactly "reset": the next interval is the
//     stepping time.
//  4. Anything else: the next interval is current plus the stepping time,
//     but no more than maxInterval.
//
// "done" and "reset" are matched case-sensitively, as HTQ did. The body is
// the Result's (its first 64 KiB).
//
// The parameters are made sensible first: a stepping time below
// MinInterval counts as MinInterval; a maxInterval of 0 or above
// MaxInterval counts as MaxInterval; a maxInterval below the stepping time
// counts as the stepping time (the interval then never grows); a negative
// current counts as 0. So the intervals of a task run stepping,
// 2×stepping, 3×stepping, … up to maxInterval, and back to stepping after
// "reset".
//
// A run that did not succeed is not the concern of this rule: the task is
// retried with the queue's retry policy, and the interval is unchanged.
func NextInterval(body []byte, header http.Header, current, stepping, maxInterval time.Duration) (next time.Duration, done bool) {
	stepping = clamp(stepping, MinInterval, MaxInterval)
	if maxInterval <= 0 || maxInterval > MaxInterval {
		maxInterval = MaxInterval
	}
	if maxInterval < stepping {
		maxInterval = stepping
	}
	current = clamp(current, 0, maxInterval)

	word := bytes.TrimSpace(body)
	if string(word) == "done" {
		return 0, true
	}
	if d, ok := parseNextIn(header.Get(HeaderNextIn)); ok {
		return clamp(d, MinInterval, maxInterval), false
	}
	if string(word) == "reset" {
		return stepping, false
	}
	return clamp(current+stepping, stepping, maxInterval), false
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return min(max(d, lo), hi)
}

// parseNextIn reads an Htq-Next-In value: decimal seconds or a Go
// duration, not negative. Seconds beyond MaxInterval come back as
// MaxInterval; a Go duration too large for time.Duration is malformed.
func parseNextIn(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if whole, frac, hasDot := strings.Cut(v, "."); isDigits(whole) && (!hasDot || isDigits(frac)) {
		sec, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		if sec >= MaxInterval.Seconds() {
			return MaxInterval, true
		}
		return time.Duration(sec * float64(time.Second)), true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}
