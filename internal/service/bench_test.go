package service_test

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/htqueue/htq/internal/redistest"
)

// BenchmarkEnqueueHTTP enqueues single typed tasks through the API of an
// in-process service from 32 keep-alive connections (bench/serve measures
// the built binary; this one is for profiles: -cpuprofile).
func BenchmarkEnqueueHTTP(b *testing.B) {
	for _, backend := range []string{"redis", "embedded"} {
		b.Run(backend, func(b *testing.B) {
			broker := "file:" + b.TempDir()
			if backend == "redis" {
				broker = redistest.URL(b)
			}
			cfg := testConfig(b, broker)
			svc := startService(b, cfg)
			c := newClient(b, svc.URL(), testToken)
			c.createQueue("bench", "pull", nil)
			body := []byte(`{"type":"bench","payload":{"i":1,"d":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`)
			tr := &http.Transport{MaxIdleConnsPerHost: 32, MaxConnsPerHost: 32}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			url := svc.URL() + "/v1/queues/bench/tasks"
			var next atomic.Int64
			var failed atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := 0; g < 32; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(b.N) {
						req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+testToken)
						req.Header.Set("Content-Type", "application/json")
						resp, err := hc.Do(req)
						if err != nil {
							failed.Add(1)
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d requests failed", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// BenchmarkEnqueueBatchHTTP enqueues batches of 1,000 typed tasks through
// the API of an in-process service from 4 connections; b.N counts tasks.
func BenchmarkEnqueueBatchHTTP(b *testing.B) {
	for _, backend := range []string{"redis", "embedded"} {
		b.Run(backend, func(b *testing.B) {
			broker := "file:" + b.TempDir()
			if backend == "redis" {
				broker = redistest.URL(b)
			}
			svc := startService(b, testConfig(b, broker))
			c := newClient(b, svc.URL(), testToken)
			c.createQueue("bench", "pull", nil)
			var buf bytes.Buffer
			buf.WriteString(`{"tasks":[`)
			for i := 0; i < 1000; i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				buf.WriteString(`{"type":"bench","payload":{"i":1,"d":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}`)
			}
			buf.WriteString(`]}`)
			body := buf.Bytes()
			tr := &http.Transport{MaxIdleConnsPerHost: 4, MaxConnsPerHost: 4}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			url := svc.URL() + "/v1/queues/bench/tasks/batch"
			calls := max(1, b.N/1000)
			var next, failed atomic.Int64
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for next.Add(1) <= int64(calls) {
						req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+testToken)
						resp, err := hc.Do(req)
						if err != nil {
							failed.Add(1)
							continue
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusCreated {
							failed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d batches failed", n)
			}
			b.ReportMetric(float64(calls*1000)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}
