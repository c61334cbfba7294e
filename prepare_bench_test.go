package htq

import (
	"testing"
	"time"
)

// BenchmarkPrepare measures the client-side work of one task of an
// EnqueueBatch (options, validation, ID), without the storage.
func BenchmarkPrepare(b *testing.B) {
	c := &Client{now: time.Now}
	payload := make([]byte, 100)
	opts := []Option{Queue("bench")}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.prepare(NewTask("bench:noop", payload), opts); err != nil {
			b.Fatal(err)
		}
	}
}
