package htq

import "sync"

// A lifecycle starts and stops the goroutine of a background component
// (the forwarder, the heartbeater, the refresher, each periodic job and
// the Scheduler). start runs the goroutine; stop closes its quit channel
// and waits until it has returned. stop may be called more than once, from
// several goroutines, and before start (then it returns at once and a
// later start does nothing). The zero value is ready to use.
type lifecycle struct {
	mu      sync.Mutex
	quit    chan struct{} // closed by stop
	done    chan struct{} // closed when run has returned
	stopped bool
}

// start runs run in a new goroutine. run must return soon after quit is
// closed. Only the first start of a lifecycle runs anything.
func (l *lifecycle) start(run func(quit <-chan struct{})) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil || l.stopped {
		return
	}
	l.quit, l.done = make(chan struct{}), make(chan struct{})
	go func(quit <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		run(quit)
	}(l.quit, l.done)
}

// stop closes quit and waits for run to return.
func (l *lifecycle) stop() {
	l.mu.Lock()
	if !l.stopped && l.quit != nil {
		close(l.quit)
	}
	l.stopped = true
	done := l.done
	l.mu.Unlock()
	if done != nil {
		<-done
	}
}
