package htq

import (
	"errors"
	"testing"
	"time"
)

// An option describes itself as the call that made it; the Scheduler
// derives its entries' IDs from these descriptions, so they must not
// change.
func TestOptionString(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 500, time.UTC)
	for _, tc := range []struct {
		opt  Option
		want string
	}{
		{Queue("critical"), `Queue("critical")`},
		{MaxRetry(3), `MaxRetry(3)`},
		{Timeout(90 * time.Second), `Timeout(1m30s)`},
		{Deadline(at), `Deadline(2026-11-29T10:00:00.0000005Z)`},
		{ProcessAt(at), `ProcessAt(2026-11-29T10:00:00.0000005Z)`},
		{ProcessIn(time.Hour), `ProcessIn(1h0m0s)`},
		{Unique(time.Minute), `Unique(1m0s)`},
		{TaskID("t\"1"), `TaskID("t\"1")`},
		{Retention(24 * time.Hour), `Retention(24h0m0s)`},
		{Group("g"), `Group("g")`},
		{Priority(3), `Priority(3)`},
		{Key("tenant \"a\""), `Key("tenant \"a\"")`},
	} {
		if got := tc.opt.String(); got != tc.want {
			t.Errorf("String() = %s, want %s", got, tc.want)
		}
	}
}

// Each option applies its value, and refuses a bad one with
// ErrInvalidArgument.
func TestOptionApply(t *testing.T) {
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	o, err := composeOptions([]Option{Queue("q"), MaxRetry(2), Timeout(time.Second), Deadline(at), ProcessIn(time.Minute),
		Unique(2 * time.Second), TaskID("id"), Retention(time.Hour), Group("g")}, []Option{ProcessAt(at)})
	if err != nil {
		t.Fatal(err)
	}
	want := taskOptions{queue: "q", maxRetry: 2, timeout: time.Second, deadline: at, processAt: at,
		uniqueTTL: 2 * time.Second, taskID: "id", retention: time.Hour, group: "g"}
	if o != want {
		t.Errorf("composed %+v, want %+v", o, want)
	}
	for _, bad := range []Option{Queue(""), MaxRetry(-1), Timeout(-1), Deadline(time.Time{}), ProcessIn(-1),
		Unique(time.Millisecond), TaskID(""), Retention(-1), Group(""), Priority(-1), Priority(MaxPriority + 1), Key("")} {
		if _, err := composeOptions(nil, []Option{bad}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%v: %v, want ErrInvalidArgument", bad, err)
		}
	}
}
