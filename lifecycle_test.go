package htq

import (
	"sync"
	"sync/atomic"
	"testing"
)

func TestLifecycleStopWaitsForRun(t *testing.T) {
	var l lifecycle
	var returned atomic.Bool
	l.start(func(quit <-chan struct{}) {
		<-quit
		returned.Store(true)
	})
	l.stop()
	if !returned.Load() {
		t.Fatal("stop returned before run did")
	}
}

func TestLifecycleStopIsIdempotent(t *testing.T) {
	var l lifecycle
	runs := 0
	l.start(func(quit <-chan struct{}) { runs++; <-quit })
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(l.stop)
	}
	wg.Wait()
	l.stop()
	l.start(func(<-chan struct{}) { runs++ }) // after stop: does nothing
	l.stop()
	if runs != 1 {
		t.Errorf("run ran %d times, want 1", runs)
	}
}

func TestLifecycleStopBeforeStart(t *testing.T) {
	var l lifecycle
	l.stop() // must not block
	l.start(func(<-chan struct{}) { t.Error("run ran after stop") })
	l.stop()
}

func TestLifecycleStartOnce(t *testing.T) {
	var l lifecycle
	var runs atomic.Int32
	for range 3 {
		l.start(func(quit <-chan struct{}) { runs.Add(1); <-quit })
	}
	l.stop()
	if n := runs.Load(); n != 1 {
		t.Errorf("run ran %d times, want 1", n)
	}
}
