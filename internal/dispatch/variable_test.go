package dispatch

import (
	"net/http"
	"testing"
	"time"
)

func TestNextInterval(t *testing.T) {
	const s, m = 10 * time.Second, time.Minute
	h := func(v string) http.Header { return http.Header{HeaderNextIn: {v}} }
	tests := []struct {
		name              string
		body              string
		header            http.Header
		current, step, mx time.Duration
		want              time.Duration
		done              bool
	}{
		{"first repeat", "ok", nil, 0, s, m, s, false},
		{"grows by one step", "ok", nil, s, s, m, 2 * s, false},
		{"grows again", "anything", nil, 3 * s, s, m, 4 * s, false},
		{"capped at max", "ok", nil, 55 * time.Second, s, m, m, false},
		{"stays at max", "ok", nil, m, s, m, m, false},
		{"empty body grows", "", nil, s, s, m, 2 * s, false},
		{"done", "done", nil, 5 * s, s, m, 0, true},
		{"done with white space", " done\r\n", nil, 5 * s, s, m, 0, true},
		{"Done is not done", "Done", nil, s, s, m, 2 * s, false},
		{"done in a sentence is not done", "not done", nil, s, s, m, 2 * s, false},
		{"reset", "reset", nil, 5 * s, s, m, s, false},
		{"reset with newline", "reset\n", nil, 5 * s, s, m, s, false},
		{"next-in duration", "ok", h("25s"), s, s, m, 25 * time.Second, false},
		{"next-in seconds", "ok", h("42"), s, s, m, 42 * time.Second, false},
		{"next-in fractional seconds", "ok", h(" 1.5 "), s, s, m, 1500 * time.Millisecond, false},
		{"next-in beats reset", "reset", h("30s"), 5 * s, s, m, 30 * time.Second, false},
		{"done beats next-in", "done", h("30s"), s, s, m, 0, true},
		{"next-in capped at max", "ok", h("2h"), s, s, m, m, false},
		{"next-in huge seconds capped", "ok", h("99999999999999999999"), s, s, m, m, false},
		{"next-in zero is the minimum", "ok", h("0"), s, s, m, MinInterval, false},
		{"next-in below the minimum", "ok", h("10ms"), s, s, m, MinInterval, false},
		{"next-in negative ignored", "ok", h("-5s"), s, s, m, 2 * s, false},
		{"next-in garbage ignored", "ok", h("soon"), s, s, m, 2 * s, false},
		{"next-in hex ignored", "ok", h("0x10"), s, s, m, 2 * s, false},
		{"next-in exponent ignored", "ok", h("1e3"), s, s, m, 2 * s, false},
		{"next-in overflow ignored", "ok", h("9999999999h"), s, s, m, 2 * s, false},
		{"next-in empty ignored", "reset", h(""), 5 * s, s, m, s, false},
		{"stepping below minimum", "ok", nil, 0, 0, m, MinInterval, false},
		{"no max", "ok", nil, 100 * time.Hour, time.Hour, 0, 101 * time.Hour, false},
		{"no max is MaxInterval", "ok", nil, MaxInterval, time.Hour, 0, MaxInterval, false},
		{"max below stepping", "ok", nil, s, s, time.Second, s, false},
		{"negative current", "ok", nil, -time.Hour, s, m, s, false},
		{"current above max", "ok", nil, time.Hour, s, m, m, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, done := NextInterval([]byte(tt.body), tt.header, tt.current, tt.step, tt.mx)
			if got != tt.want || done != tt.done {
				t.Errorf("NextInterval = %s, %v; want %s, %v", got, done, tt.want, tt.done)
			}
		})
	}
}

// TestNextIntervalSequence follows HTQ's rule over a series of answers.
func TestNextIntervalSequence(t *testing.T) {
	const step, mx = 5 * time.Second, 18 * time.Second
	answers := []string{"a", "b", "c", "d", "e", "reset", "f", "done"}
	want := []time.Duration{5, 10, 15, 18, 18, 5, 10, 0}
	var cur time.Duration
	for i, a := range answers {
		next, done := NextInterval([]byte(a), nil, cur, step, mx)
		if next != want[i]*time.Second || done != (a == "done") {
			t.Fatalf("answer %d %q: %s, %v; want %ds", i, a, next, done, want[i])
		}
		cur = next
	}
}
