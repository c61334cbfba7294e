package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/htqueue/htq"
	"github.com/jonboulle/clockwork"
)

// The per-minute series of GET /v1/queues/{queue}/series.
const (
	// sampleEvery is how often the sampler reads every queue's statistics.
	sampleEvery = 10 * time.Second
	// seriesMinutes is how many minutes a series goes back.
	seriesMinutes = 60
)

// A sampler reads every queue's statistics every sampleEvery and keeps,
// per queue, the last seriesMinutes minutes: the storage keeps daily
// counters only, so this process's samples are the only per-minute
// record, and it starts when the process started. Each queue costs one
// ring of seriesMinutes+1 minutes (about 6 KiB); a queue that is no
// longer listed is forgotten at the next sample.
type sampler struct {
	clock  clockwork.Clock
	list   func() ([]string, error)
	info   func(queue string) (*htq.QueueInfo, error)
	logger *slog.Logger

	// sampling serializes samples, so that a sample's reads and its
	// writes are never interleaved with another's.
	sampling sync.Mutex
	mu       sync.Mutex // guards started and queues
	started  time.Time
	queues   map[string]*minuteRing
}

// minuteRing holds one queue's minutes, each in slot minute % len.
type minuteRing [seriesMinutes + 1]minuteSlot

// minuteSlot is what the samples of one minute saw.
type minuteSlot struct {
	at time.Time // the minute's start; zero while the slot is unused
	// firstProcessed and firstFailed are the all-time counters at the
	// minute's first sample: the base of a minute that has no previous one.
	firstProcessed, firstFailed int
	// last is the minute's latest sample.
	last *htq.QueueInfo
}

func newSampler(clock clockwork.Clock, insp *htq.Inspector, logger *slog.Logger) *sampler {
	return &sampler{clock: clock, list: insp.Queues, info: insp.GetQueueInfo, logger: logger,
		started: clock.Now(), queues: make(map[string]*minuteRing)}
}

// run samples every sampleEvery until ctx is done.
func (s *sampler) run(ctx context.Context) {
	every(ctx, s.clock, sampleEvery, func(context.Context) { s.sample() })
}

// every calls fn every d of clock until ctx is done: the loop of the
// handler's background jobs.
func every(ctx context.Context, clock clockwork.Clock, d time.Duration, fn func(context.Context)) {
	ticker := clock.NewTicker(d)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.Chan():
			fn(ctx)
		}
	}
}

// sample reads every queue once and records what it read.
func (s *sampler) sample() {
	s.sampling.Lock()
	defer s.sampling.Unlock()
	names, err := s.list()
	if err != nil {
		s.logger.Warn("series: list queues failed; this sample is skipped", "err", err)
		return
	}
	infos := make(map[string]*htq.QueueInfo, len(names))
	for _, name := range names {
		info, err := s.info(name)
		if err != nil {
			continue // deleted meanwhile, or the storage is down: a gap
		}
		infos[name] = info
	}
	now := s.clock.Now()
	minute := now.Truncate(time.Minute)
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.queues {
		if _, ok := infos[name]; !ok {
			delete(s.queues, name)
		}
	}
	for name, info := range infos {
		ring := s.queues[name]
		if ring == nil {
			ring = new(minuteRing)
			s.queues[name] = ring
		}
		slot := ring.slot(minute)
		if !slot.at.Equal(minute) {
			*slot = minuteSlot{at: minute, firstProcessed: info.ProcessedTotal, firstFailed: info.FailedTotal}
		}
		slot.last = info
	}
}

func (r *minuteRing) slot(minute time.Time) *minuteSlot {
	return &r[(minute.Unix()/60)%int64(len(r))]
}

// seriesPoint is one minute of a queue.
type seriesPoint struct {
	Time time.Time `json:"time"`
	// Processed and Failed count the attempts that ended (failed) in the
	// minute.
	Processed   int `json:"processed"`
	Failed      int `json:"failed"`
	Pending     int `json:"pending"`
	Active      int `json:"active"`
	Scheduled   int `json:"scheduled"`
	Retry       int `json:"retry"`
	Archived    int `json:"archived"`
	Completed   int `json:"completed"`
	Aggregating int `json:"aggregating"`
}

// series returns the last n minutes of queue, oldest first, the current
// (partial) minute last; minutes without a sample are left out. since is
// when sampling began.
func (s *sampler) series(queue string, n int) (points []seriesPoint, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	points = []seriesPoint{}
	ring := s.queues[queue]
	if ring == nil {
		return points, s.started
	}
	now := s.clock.Now().Truncate(time.Minute)
	for k := n - 1; k >= 0; k-- {
		minute := now.Add(-time.Duration(k) * time.Minute)
		slot := ring.slot(minute)
		if !slot.at.Equal(minute) {
			continue
		}
		baseP, baseF := slot.firstProcessed, slot.firstFailed
		if prev := ring.slot(minute.Add(-time.Minute)); prev.at.Equal(minute.Add(-time.Minute)) {
			baseP, baseF = prev.last.ProcessedTotal, prev.last.FailedTotal
		}
		l := slot.last
		points = append(points, seriesPoint{
			Time: minute.UTC(), Processed: max(l.ProcessedTotal-baseP, 0), Failed: max(l.FailedTotal-baseF, 0),
			Pending: l.Pending, Active: l.Active, Scheduled: l.Scheduled, Retry: l.Retry,
			Archived: l.Archived, Completed: l.Completed, Aggregating: l.Aggregating,
		})
	}
	return points, s.started
}
