package base

import "time"

// ServerInfo is the presence record a running Server keeps in the storage
// while it lives (the Heartbeater renews it).
type ServerInfo struct {
	ID             string         `json:"id"`
	Host           string         `json:"host"`
	PID            int            `json:"pid"`
	Concurrency    int            `json:"concurrency"`
	Queues         map[string]int `json:"queues"`
	StrictPriority bool           `json:"strict_priority"`
	Started        time.Time      `json:"started"`
	Status         string         `json:"status"`
	// ActiveTasks lists the tasks the server is running now.
	ActiveTasks []ActiveTask `json:"active_tasks,omitempty"`
}

// ActiveTask is one task a server is running, as its presence record shows it.
type ActiveTask struct {
	ID      string    `json:"id"`
	Queue   string    `json:"queue"`
	Type    string    `json:"type"`
	Started time.Time `json:"started"`
}

// SchedulerEntry is one periodic task of a Scheduler, as the storage
// keeps it for the Inspector.
type SchedulerEntry struct {
	ID          string    `json:"id"`
	SchedulerID string    `json:"scheduler_id"`
	Spec        string    `json:"spec"`
	Type        string    `json:"type"`
	Payload     []byte    `json:"payload"`
	Options     []string  `json:"options"`
	Next        time.Time `json:"next"`
	Prev        time.Time `json:"prev,omitempty"`
}

// SchedulerEnqueue is one tick of a scheduler entry that a Scheduler
// claimed: the task it enqueued, or why it could not.
type SchedulerEnqueue struct {
	Tick        time.Time `json:"tick"`
	SchedulerID string    `json:"scheduler_id"`
	TaskID      string    `json:"task_id,omitempty"`
	EnqueuedAt  time.Time `json:"enqueued_at"`
	Error       string    `json:"error,omitempty"`
}

// MaxSchedulerHistory is how many enqueues of each scheduler entry the
// storage keeps (the newest).
const MaxSchedulerHistory = 20

// SchedulerHistoryKey is the MetaStore key of a scheduler entry's
// enqueue history: a JSON array of SchedulerEnqueue, newest first.
func SchedulerHistoryKey(entryID string) string { return "scheduler-history/" + entryID }
