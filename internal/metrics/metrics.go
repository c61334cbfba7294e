// Package metrics holds the Prometheus metrics that htq serve's URL-task
// runner observes (dispatch durations and lateness); the HTTP layer serves
// them on /metrics beside the queue gauges it reads from the storage.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds what the dispatcher observes, served on /metrics beside
// the queue gauges the handler reads from the storage at each scrape.
// Its methods are safe for concurrent use; a nil *Metrics ignores them.
type Metrics struct {
	dispatch *prometheus.HistogramVec
	lateness *prometheus.HistogramVec
}

// Dispatch outcomes, the outcome label of htq_dispatch_duration_seconds
// (dispatch.Outcome's String values).
const (
	OutcomeSucceeded = "succeeded"
	OutcomeRetry     = "retry"
	OutcomeArchive   = "archive"
)

// New returns Metrics to give the URL-task runner and api.Options.Metrics.
func New() *Metrics {
	return &Metrics{
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "htq_dispatch_duration_seconds",
			Help:    "Time of one URL task's HTTP exchange, by queue and outcome (succeeded, retry, archive).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"queue", "outcome"}),
		lateness: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "htq_dispatch_lateness_seconds",
			Help:    "How long after its due time a URL task started, by queue.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
		}, []string{"queue"}),
	}
}

// ObserveDispatch records one dispatch of a task of queue: its outcome
// (OutcomeSucceeded, OutcomeRetry or OutcomeArchive) and how long the
// exchange took.
func (m *Metrics) ObserveDispatch(queue, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.dispatch.WithLabelValues(queue, outcome).Observe(d.Seconds())
}

// ObserveLateness records how long after its due time a task started.
func (m *Metrics) ObserveLateness(queue string, d time.Duration) {
	if m == nil {
		return
	}
	m.lateness.WithLabelValues(queue).Observe(max(d, 0).Seconds())
}

// Collectors returns the metrics' collectors, to register with a
// prometheus.Registry.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.dispatch, m.lateness}
}
