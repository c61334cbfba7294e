package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ObserveRequest's cached series count as WithLabelValues' would, from
// many goroutines at once, and only the series used exist.
func TestObserveRequest(t *testing.T) {
	m := New()
	statuses := []int{200, 201, 404, 503, 99, 700}
	routes := []string{"POST /v1/queues/{queue}/tasks", "POST /api/addTask", ""}
	const per = 200
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				m.ObserveRequest(routes[(g+i)%len(routes)], statuses[i%len(statuses)], time.Millisecond)
			}
		}()
	}
	wg.Wait()
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.requests, m.duration)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	total := 0.0
	for _, f := range families {
		series[f.GetName()] = len(f.GetMetric())
		if f.GetName() == "htq_http_requests_total" {
			for _, mt := range f.GetMetric() {
				total += mt.GetCounter().GetValue()
			}
		}
	}
	if total != 8*per {
		t.Errorf("requests counted: %v, want %d", total, 8*per)
	}
	// 3 routes x 4 classes (2xx, 4xx, 5xx, other); no 1xx or 3xx series.
	if n := series["htq_http_requests_total"]; n != 12 {
		t.Errorf("request series: %d, want 12", n)
	}
	if n := series["htq_http_request_duration_seconds"]; n != 3 {
		t.Errorf("duration series: %d, want 3", n)
	}
	var nilMetrics *Metrics
	nilMetrics.ObserveRequest("x", 200, time.Second) // a nil *Metrics ignores it
}

func TestClassIndex(t *testing.T) {
	for status, want := range map[int]string{100: "1xx", 200: "2xx", 299: "2xx", 302: "3xx", 404: "4xx", 599: "5xx", 600: "other", 99: "other", -1: "other"} {
		if got := statusClasses[classIndex(status)]; got != want {
			t.Errorf("%d: %s, want %s", status, got, want)
		}
	}
}
