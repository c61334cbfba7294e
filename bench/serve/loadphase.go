package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// loadPhase sends n requests from c.conns goroutines, each on its own
// keep-alive connection to addrOf(goroutine), by calling send with the
// request's number (1…n); it stops at the first error or after
// c.maxDuration, and returns the elapsed time and each request's latency.
func loadPhase(c config, n int, addrOf func(g int) string, send func(g int, rc *rawConn, i int64) error) (time.Duration, []time.Duration, error) {
	var next atomic.Int64
	lat := make([][]time.Duration, c.conns)
	errs := make(chan error, c.conns)
	ctx, cancel := context.WithTimeout(context.Background(), c.maxDuration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < c.conns; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rc := newRawConn(addrOf(g), 30*time.Second)
			defer rc.close()
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				t0 := time.Now()
				if err := send(g, rc, i); err != nil {
					errs <- err
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		}(g)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return 0, nil, err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	return elapsed, all, nil
}
