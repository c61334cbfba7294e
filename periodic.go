package htq

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"
)

// periodic runs one job at a fixed interval until shut down: the loop
// of the recoverer, the janitor, the health checker and the aggregator.
type periodic struct {
	name     string
	clock    clockwork.Clock
	interval time.Duration
	exec     func(ctx context.Context)
	// atStart runs exec once as soon as the loop starts.
	atStart bool

	life lifecycle
}

func newPeriodic(name string, clock clockwork.Clock, interval time.Duration, exec func(context.Context)) *periodic {
	return &periodic{name: name, clock: clock, interval: interval, exec: exec}
}

func (p *periodic) start(ctx context.Context) {
	p.life.start(func(quit <-chan struct{}) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		// Shutdown cancels a job that is running.
		go func() {
			select {
			case <-quit:
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
	})
}

// shutdown stops the loop and waits for the running job to return. It is
// safe to call more than once.
func (p *periodic) shutdown() { p.life.stop() }

// runAtStart makes the loop run its job once when it starts, then at each
// interval.
func (p *periodic) runAtStart() *periodic {
	p.atStart = true
	return p
}
