package model

import (
	"time"

	"github.com/htqueue/htq"
)

// The views below are queues as the native API shows them: the API writes
// them and its Go client (internal/apiclient) reads them.

// QueueView is a queue as the API shows it: its record, the storage's
// settings and a snapshot of its tasks.
type QueueView struct {
	*Queue
	Paused   bool         `json:"paused"`
	Settings SettingsView `json:"settings"`
	Stats    StatsView    `json:"stats"`
}

// SettingsView is a queue's storage settings (htq.QueueSettings).
type SettingsView struct {
	MaxConcurrency    int     `json:"max_concurrency"`
	RateLimit         float64 `json:"rate_limit"`
	RateBurst         int     `json:"rate_burst"`
	LeaseMS           int64   `json:"lease_ms"`
	KeyMaxConcurrency int     `json:"key_max_concurrency,omitempty"`
	KeyRateLimit      float64 `json:"key_rate_limit,omitempty"`
	KeyRateBurst      int     `json:"key_rate_burst,omitempty"`
}

// StatsView is a snapshot of a queue's tasks (htq.QueueInfo); Processed
// and Failed count today's (UTC), the Total fields every day's.
type StatsView struct {
	Size           int       `json:"size"`
	Pending        int       `json:"pending"`
	Active         int       `json:"active"`
	Scheduled      int       `json:"scheduled"`
	Retry          int       `json:"retry"`
	Archived       int       `json:"archived"`
	Completed      int       `json:"completed"`
	Aggregating    int       `json:"aggregating"`
	Waiting        int       `json:"waiting"`
	Groups         int       `json:"groups"`
	Processed      int       `json:"processed"`
	Failed         int       `json:"failed"`
	ProcessedTotal int       `json:"processed_total"`
	FailedTotal    int       `json:"failed_total"`
	LatencyMS      int64     `json:"latency_ms"`
	MemoryBytes    int64     `json:"memory_bytes"`
	Timestamp      time.Time `json:"timestamp"`
}

// InState returns how many of the queue's tasks are in state (a TaskState
// name); 0 for an unknown name.
func (s *StatsView) InState(state string) int {
	switch state {
	case "pending":
		return s.Pending
	case "active":
		return s.Active
	case "scheduled":
		return s.Scheduled
	case "retry":
		return s.Retry
	case "archived":
		return s.Archived
	case "completed":
		return s.Completed
	case "aggregating":
		return s.Aggregating
	case "waiting":
		return s.Waiting
	}
	return 0
}

// NewQueueView returns the view of a queue's record and its storage
// snapshot (info nil: a queue the storage does not know yet).
func NewQueueView(q *Queue, info *htq.QueueInfo) *QueueView {
	out := &QueueView{Queue: q}
	if info == nil {
		return out
	}
	out.Paused = info.Paused
	s := info.Settings
	out.Settings = SettingsView{MaxConcurrency: s.MaxConcurrency, RateLimit: s.RateLimit,
		RateBurst: s.RateBurst, LeaseMS: s.LeaseDuration.Milliseconds(),
		KeyMaxConcurrency: s.KeyMaxConcurrency, KeyRateLimit: s.KeyRateLimit, KeyRateBurst: s.KeyRateBurst}
	out.Stats = StatsView{Size: info.Size, Pending: info.Pending, Active: info.Active, Scheduled: info.Scheduled,
		Retry: info.Retry, Archived: info.Archived, Completed: info.Completed, Aggregating: info.Aggregating, Waiting: info.Waiting,
		Groups: info.Groups, Processed: info.Processed, Failed: info.Failed, ProcessedTotal: info.ProcessedTotal,
		FailedTotal: info.FailedTotal, LatencyMS: info.Latency.Milliseconds(), MemoryBytes: info.MemoryUsage,
		Timestamp: info.Timestamp.UTC()}
	return out
}
