package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkEnqueueHTTP measures single-task enqueues through the handler
// over real HTTP (keep-alive, parallel clients) on Redis.
func BenchmarkEnqueueHTTP(b *testing.B) {
	benchEnqueue(b, "/v1/queues/bench/tasks", `{"type":"bench","payload":{"n":1}}`)
}

// BenchmarkEnqueueBatchHTTP measures batches of 100 tasks.
func BenchmarkEnqueueBatchHTTP(b *testing.B) {
	tasks := strings.TrimSuffix(strings.Repeat(`{"type":"bench","payload":{"n":1}},`, 100), ",")
	benchEnqueue(b, "/v1/queues/bench/tasks/batch", `{"tasks":[`+tasks+`]}`)
}

func benchEnqueue(b *testing.B, path, body string) {
	t := &testing.T{}
	e := newEnv(t, "redis", nil)
	b.Cleanup(func() { e.srv.Close() })
	client := e.srv.Client()
	client.Transport.(*http.Transport).MaxIdleConnsPerHost = 64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", e.srv.URL+path, bytes.NewReader([]byte(body)))
			req.Header.Set("Authorization", "Bearer "+testToken)
			resp, err := client.Do(req)
			if err != nil {
				panic(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				panic(fmt.Sprint("status ", resp.StatusCode))
			}
		}
	})
}
