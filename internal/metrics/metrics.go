// Package metrics holds the Prometheus metrics that htq serve observes:
// its URL-task runner's (dispatch durations and lateness), its HTTP API's
// (requests by route and status class) and its pull workers' (leases,
// acks, failures, lost leases). The HTTP layer serves them on /metrics
// beside the queue gauges it reads from the storage.
package metrics

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds what htq serve observes, served on /metrics beside the
// queue gauges the handler reads from the storage at each scrape. Its
// methods are safe for concurrent use; a nil *Metrics ignores them.
type Metrics struct {
	dispatch *prometheus.HistogramVec
	lateness *prometheus.HistogramVec

	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// routes caches each route's series (string → *routeMetrics): the
	// route label takes only the router's patterns, so it stays small.
	routes sync.Map

	fetches    *prometheus.CounterVec
	leased     *prometheus.CounterVec
	acks       *prometheus.CounterVec
	fails      *prometheus.CounterVec
	leasesLost *prometheus.CounterVec
}

// How a pull worker's lease was lost, the how label of
// htq_pull_leases_lost_total.
const (
	// LeaseExpired: the worker stopped sending heartbeats and the service
	// recovered the task.
	LeaseExpired = "expired"
	// LeaseRefused: an ack, fail or heartbeat came with a token that no
	// longer holds the task (409 lease_lost).
	LeaseRefused = "refused"
)

// RouteUnmatched is the route label of a request no route took (404 or
// 405 from the router itself).
const RouteUnmatched = "unmatched"

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
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "htq_http_requests_total",
			Help: "Requests answered by the HTTP API, by route (the router's pattern, such as \"POST /v1/queues/{queue}/tasks\") and status class (2xx, 4xx, …).",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "htq_http_request_duration_seconds",
			Help:    "Time to answer a request of the HTTP API, by route (a fetch's long poll included).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30},
		}, []string{"route"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "htq_pull_fetches_total",
			Help: "Fetches of pull workers answered, by result: tasks (at least one task leased) or empty.",
		}, []string{"result"}),
		leased: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "htq_pull_tasks_leased_total",
			Help: "Tasks leased to pull workers by their fetches, by queue.",
		}, []string{"queue"}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "htq_pull_acks_total",
			Help: "Tasks completed by a pull worker's ack, by queue.",
		}, []string{"queue"}),
		fails: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "htq_pull_fails_total",
			Help: "Failed attempts a pull worker reported, by queue and the state the task went to (retry, archived).",
		}, []string{"queue", "state"}),
		leasesLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "htq_pull_leases_lost_total",
			Help: "Leases of pull workers lost, by queue and how: expired (the worker stopped its heartbeats; the task was recovered) or refused (a call came with a token that no longer holds the task).",
		}, []string{"queue", "how"}),
	}
}

// ObserveRequest records one request of the HTTP API: its route (the
// router's pattern, never the raw path, so that the label values stay
// few; "" for RouteUnmatched), its status and how long it took.
func (m *Metrics) ObserveRequest(route string, status int, d time.Duration) {
	if m == nil {
		return
	}
	if route == "" {
		route = RouteUnmatched
	}
	rm := m.route(route)
	class := classIndex(status)
	count := rm.counts[class].Load()
	if count == nil {
		c := m.requests.WithLabelValues(route, statusClasses[class])
		count = &c
		rm.counts[class].Store(count)
	}
	(*count).Inc()
	obs := rm.duration.Load()
	if obs == nil {
		o := m.duration.WithLabelValues(route)
		obs = &o
		rm.duration.Store(obs)
	}
	(*obs).Observe(d.Seconds())
}

// routeMetrics are one route's series, each taken from its vector at its
// first use and kept (a series is created when first used, as
// WithLabelValues does, so /metrics shows the same ones): WithLabelValues
// hashes the label values and takes the vector's lock on every call. Two
// requests may both resolve a series at first; they get the same one.
type routeMetrics struct {
	counts   [len(statusClasses)]atomic.Pointer[prometheus.Counter] // by classIndex
	duration atomic.Pointer[prometheus.Observer]
}

// route returns the cached series of route.
func (m *Metrics) route(route string) *routeMetrics {
	if rm, ok := m.routes.Load(route); ok {
		return rm.(*routeMetrics)
	}
	rm, _ := m.routes.LoadOrStore(route, new(routeMetrics))
	return rm.(*routeMetrics)
}

// statusClasses are the status classes by classIndex.
var statusClasses = [...]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// classIndex is the index in statusClasses of status's class: 2 ("2xx")
// for 200-299, and so on; 0 ("other") outside 100-599.
func classIndex(status int) int {
	if status < 100 || status > 599 {
		return 0
	}
	return status / 100
}

// Fetched records a pull worker's fetch answered with n tasks.
func (m *Metrics) Fetched(n int) {
	if m == nil {
		return
	}
	if n == 0 {
		m.fetches.WithLabelValues("empty").Inc()
		return
	}
	m.fetches.WithLabelValues("tasks").Inc()
}

// Leased records a task of queue leased to a pull worker.
func (m *Metrics) Leased(queue string) {
	if m == nil {
		return
	}
	m.leased.WithLabelValues(queue).Inc()
}

// Acked records a task of queue completed by a pull worker's ack.
func (m *Metrics) Acked(queue string) {
	if m == nil {
		return
	}
	m.acks.WithLabelValues(queue).Inc()
}

// Failed records a failed attempt a pull worker reported, and the state
// the task went to.
func (m *Metrics) Failed(queue, state string) {
	if m == nil {
		return
	}
	m.fails.WithLabelValues(queue, state).Inc()
}

// LeaseLost records a lost lease of a task of queue, how being
// LeaseExpired or LeaseRefused.
func (m *Metrics) LeaseLost(queue, how string) {
	if m == nil {
		return
	}
	m.leasesLost.WithLabelValues(queue, how).Inc()
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
	return []prometheus.Collector{m.dispatch, m.lateness, m.requests, m.duration,
		m.fetches, m.leased, m.acks, m.fails, m.leasesLost}
}
