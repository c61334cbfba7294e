package htq

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// periodic runs one job at a fixed interval until shut down. It is the
// lifecycle shared by the recoverer, the janitor and the health checker.
type periodic struct {
	name     string
	clock    clockwork.Clock
	interval time.Duration
	exec     func(ctx context.Context)
	// atStart runs exec once as soon as the loop starts.
	atStart bool

	quit     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func newPeriodic(name string, clock clockwork.Clock, interval time.Duration, exec func(context.Context)) *periodic {
	return &periodic{name: name, clock: clock, interval: interval, exec: exec,
		quit: make(chan struct{}), done: make(chan struct{})}
}

func (p *periodic) start(ctx context.Context) {
	go func() {
		defer close(p.done)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			select {
			case <-p.quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		ticker := p.clock.NewTicker(p.interval)
		defer ticker.Stop()
		if p.atStart {
			p.exec(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.Chan():
				p.exec(ctx)
			}
		}
	}()
}

// shutdown stops the loop and waits for the running job to return. It is
// safe to call more than once.
func (p *periodic) shutdown() {
	p.stopOnce.Do(func() { close(p.quit) })
	<-p.done
}

// runAtStart makes the loop run its job once when it starts, then at each
// interval.
func (p *periodic) runAtStart() *periodic {
	p.atStart = true
	return p
}
