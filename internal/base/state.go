package base

import "fmt"

// TaskState is the state of a task in its lifecycle. The numbering matches
// asynq's, so that code switching from it keeps its meaning.
type TaskState int

// The task states. See docs/state-machine.md for the transitions.
const (
	StateActive      TaskState = iota + 1 // a worker holds a lease on it
	StatePending                          // ready to be fetched
	StateScheduled                        // waiting for its ProcessAt time
	StateRetry                            // failed, waiting for its retry time
	StateArchived                         // failed for good, kept for inspection
	StateCompleted                        // succeeded, kept for its retention
	StateAggregating                      // waiting in a group for the aggregator
	StateWaiting                          // a workflow task waiting for its dependencies
)

// MaxState is the highest TaskState value.
const MaxState = StateWaiting

var stateNames = [...]string{
	StateActive:      "active",
	StatePending:     "pending",
	StateScheduled:   "scheduled",
	StateRetry:       "retry",
	StateArchived:    "archived",
	StateCompleted:   "completed",
	StateAggregating: "aggregating",
	StateWaiting:     "waiting",
}

// String returns the lower-case name of the state ("pending", …).
func (s TaskState) String() string {
	if s >= StateActive && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("TaskState(%d)", int(s))
}

// ParseState returns the state named s (as String writes it).
func ParseState(s string) (TaskState, error) {
	for i, name := range stateNames {
		if name != "" && name == s {
			return TaskState(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown task state %q", ErrInvalidArgument, s)
}
