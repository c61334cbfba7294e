package htq

import (
	"errors"
	"testing"
	"time"
)

// FuzzParseCronSpec checks that the Scheduler's cron parser never panics:
// a spec it refuses gets an error wrapping ErrInvalidArgument, and a spec
// it accepts has ticks that can be computed (after the instant they
// follow, or the zero time for a spec that never fires, such as Feb 30).
// testdata/fuzz/FuzzParseCronSpec keeps the inputs that once broke it.
func FuzzParseCronSpec(f *testing.F) {
	for _, s := range []string{"* * * * *", "*/5 9-17 * * 1-5", "0 0 30 2 *", "@daily", "@every 90s", "@every 1h30m",
		"TZ=UTC 0 0 * * *", "CRON_TZ=Europe/Paris 0 9 * * *", "61 * * * *", "0 0 * * * *", "@hourly extra", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, spec string) {
		sched, err := parseCronSpec(spec)
		if err != nil {
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("parseCronSpec(%q): %v does not wrap ErrInvalidArgument", spec, err)
			}
			return
		}
		if next := nextTick(sched, now); !next.IsZero() && !next.After(now) {
			t.Fatalf("parseCronSpec(%q): next tick %v is not after %v", spec, next, now)
		}
		_ = claimTTL(sched, now)
	})
}
