package lazydeadline

import (
	"context"
	"testing"
	"time"
)

// BenchmarkDone: a context whose Done is asked for (what a waiting caller
// pays), against context.WithTimeout's; nested: the broker's call deadline
// under the Client's RetryFor deadline, as a pipelined Redis call waits on
// it.
func BenchmarkDone(b *testing.B) {
	b.Run("nested", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			outer := New(context.Background(), time.Hour)
			c := New(outer, time.Minute)
			if c.Done() == nil {
				b.Fatal("no Done channel")
			}
			c.Cancel()
			outer.Cancel()
		}
	})
	b.Run("lazy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := New(context.Background(), time.Hour)
			if c.Done() == nil {
				b.Fatal("no Done channel")
			}
			c.Cancel()
		}
	})
	b.Run("timers", func(b *testing.B) {
		ts := NewTimers(10 * time.Millisecond)
		root := context.WithoutCancel(context.Background())
		b.ReportAllocs()
		for b.Loop() {
			c := NewOn(ts, root, time.Hour)
			if c.Done() == nil {
				b.Fatal("no Done channel")
			}
			c.Cancel()
		}
	})
	b.Run("context.WithTimeout", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, cancel := context.WithTimeout(context.Background(), time.Hour)
			if c.Done() == nil {
				b.Fatal("no Done channel")
			}
			cancel()
		}
	})
}
