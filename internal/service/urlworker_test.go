package service

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/base"
)

func TestNextRunID(t *testing.T) {
	long := strings.Repeat("a", base.MaxIDLen-1)
	for in, want := range map[string]string{
		"abc":      "abc~1",
		"abc~1":    "abc~2",
		"abc~41":   "abc~42",
		"abc~0":    "abc~0~1",  // not a run number
		"abc~01":   "abc~01~1", // not canonical
		"abc~x":    "abc~x~1",
		"a~b~9":    "a~b~10",
		"~":        "~~1",
		"task~1~1": "task~1~2",
	} {
		if got := nextRunID(in); got != want {
			t.Errorf("nextRunID(%q) = %q, want %q", in, got, want)
		}
	}
	got := nextRunID(long)
	if len(got) > base.MaxIDLen || !strings.HasSuffix(got, "~1") {
		t.Errorf("nextRunID of a %d-byte ID = %q", len(long), got)
	}
	if again := nextRunID(got); again != strings.TrimSuffix(got, "~1")+"~2" {
		t.Errorf("run after %q = %q", got, again)
	}
	if err := base.ValidateTaskID(got); err != nil {
		t.Error(err)
	}
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, time.Second
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		for range 20 {
			got := backoff(n, lo, hi)
			if got < want || got > want+want/10 {
				t.Fatalf("backoff(%d) = %v, want %v to %v", n, got, want, want+want/10)
			}
		}
	}
	if got := backoff(3, 0, time.Second); got != 0 {
		t.Errorf("backoff with no minimum = %v", got)
	}
	if got := backoff(100, time.Second, time.Hour); got > time.Hour+6*time.Minute {
		t.Errorf("backoff(100) = %v, beyond the cap", got)
	}
}

func TestRetryDelay(t *testing.T) {
	if got := retryDelay(5, &retryError{delay: 7 * time.Second, err: errors.New("x")}, nil); got != 7*time.Second {
		t.Errorf("retryDelay of a retryError = %v", got)
	}
	if got := retryDelay(0, errors.New("panic"), nil); got < time.Second || got > 1100*time.Millisecond {
		t.Errorf("retryDelay of another error = %v", got)
	}
}
