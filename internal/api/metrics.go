package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/htqueue/htq/internal/metrics"
	"github.com/htqueue/htq/internal/model"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// queueCollector reads every queue's statistics from the storage at each
// scrape.
type queueCollector struct {
	collect func(ch chan<- prometheus.Metric)
}

var (
	descQueueTasks = prometheus.NewDesc("htq_queue_tasks", "Tasks in the queue, by state.", []string{"queue", "state"}, nil)
	descPaused     = prometheus.NewDesc("htq_queue_paused", "1 while the queue is paused.", []string{"queue"}, nil)
	descLatency    = prometheus.NewDesc("htq_queue_latency_seconds", "How long the oldest pending task has waited.", []string{"queue"}, nil)
	descMode       = prometheus.NewDesc("htq_queue_info", "The queue's mode (always 1).", []string{"queue", "mode"}, nil)
	descProcessed  = prometheus.NewDesc("htq_tasks_processed_total", "Attempts finished (succeeded or failed), since the queue began.", []string{"queue"}, nil)
	descFailed     = prometheus.NewDesc("htq_tasks_failed_total", "Attempts failed, since the queue began.", []string{"queue"}, nil)
	descScrapeErr  = prometheus.NewDesc("htq_queue_scrape_errors", "Queues whose statistics could not be read at this scrape.", nil, nil)
)

func (c queueCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueueTasks, descPaused, descLatency, descMode, descProcessed, descFailed, descScrapeErr} {
		ch <- d
	}
}

func (c queueCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// collectQueues sends each queue's gauges and counters.
func (h *handler) collectQueues(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(h.opts.Context, 10*time.Second)
	defer cancel()
	names, err := h.inspector.Queues()
	errs := 0
	if err != nil {
		h.logger.Warn("metrics: list queues failed", "err", err)
		errs++
	}
	modes := map[string]model.Mode{}
	if recs, err := h.queues.List(ctx); err == nil {
		for _, q := range recs {
			modes[q.Name] = q.Mode
		}
	}
	for _, name := range names {
		info, err := h.inspector.GetQueueInfo(name)
		if err != nil {
			errs++
			continue
		}
		for state, n := range map[string]int{"pending": info.Pending, "active": info.Active, "scheduled": info.Scheduled,
			"retry": info.Retry, "archived": info.Archived, "completed": info.Completed, "aggregating": info.Aggregating} {
			ch <- prometheus.MustNewConstMetric(descQueueTasks, prometheus.GaugeValue, float64(n), name, state)
		}
		paused := 0.0
		if info.Paused {
			paused = 1
		}
		mode := modes[name]
		if mode == "" {
			mode = model.ModePull
		}
		ch <- prometheus.MustNewConstMetric(descPaused, prometheus.GaugeValue, paused, name)
		ch <- prometheus.MustNewConstMetric(descLatency, prometheus.GaugeValue, info.Latency.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(descMode, prometheus.GaugeValue, 1, name, string(mode))
		ch <- prometheus.MustNewConstMetric(descProcessed, prometheus.CounterValue, float64(info.ProcessedTotal), name)
		ch <- prometheus.MustNewConstMetric(descFailed, prometheus.CounterValue, float64(info.FailedTotal), name)
	}
	ch <- prometheus.MustNewConstMetric(descScrapeErr, prometheus.GaugeValue, float64(errs))
}

// registerMetrics registers m and the queue collector with reg (a second
// registration of the same Metrics is not an error).
func registerMetrics(reg *prometheus.Registry, m *metrics.Metrics, collect func(chan<- prometheus.Metric)) error {
	for _, c := range append(m.Collectors(), queueCollector{collect: collect}) {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if errors.As(err, &already) {
				continue
			}
			return fmt.Errorf("api: register metrics: %w", err)
		}
	}
	return nil
}

func newDefaultRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}
