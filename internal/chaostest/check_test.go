package chaostest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// at is a time n seconds into a made-up run.
func at(n int) time.Time { return time.Unix(1_800_000_000+int64(n), 0) }

func TestCheck(t *testing.T) {
	evs := []Event{
		// a: acknowledged, run once.
		{At: at(0), Kind: Invoke, ID: "a"}, {At: at(1), Kind: Ack, ID: "a"},
		{At: at(2), Kind: Start, ID: "a", Worker: "w1"}, {At: at(3), Kind: Done, ID: "a", Worker: "w1"},
		// b: acknowledged, caught in flight by a kill of w1, run again on w2.
		{At: at(0), Kind: Invoke, ID: "b"}, {At: at(1), Kind: Ack, ID: "b"},
		{At: at(2), Kind: Start, ID: "b", Worker: "w1"},
		{At: at(4), Kind: Fault, ID: "kill", Worker: "w1"}, {At: at(4), Kind: InFlight, ID: "b", Worker: "w1"},
		{At: at(7), Kind: Start, ID: "b", Worker: "w2"}, {At: at(8), Kind: Done, ID: "b", Worker: "w2"},
		// c: acknowledged, never done: lost.
		{At: at(0), Kind: Invoke, ID: "c"}, {At: at(1), Kind: Ack, ID: "c"},
		// d: never enqueued, yet run: unexpected.
		{At: at(2), Kind: Start, ID: "d", Worker: "w2"}, {At: at(3), Kind: Done, ID: "d", Worker: "w2"},
		// e: run twice with no fault in between: unexplained.
		{At: at(0), Kind: Invoke, ID: "e"}, {At: at(1), Kind: Ack, ID: "e"},
		{At: at(2), Kind: Start, ID: "e", Worker: "w2"}, {At: at(3), Kind: Done, ID: "e", Worker: "w2"},
		{At: at(5), Kind: Start, ID: "e", Worker: "w2"}, {At: at(6), Kind: Done, ID: "e", Worker: "w2"},
		// g: run twice on w3, whose first outcome was refused (its lease
		// had run out while it lived): explained, and counted apart.
		{At: at(0), Kind: Invoke, ID: "g"}, {At: at(1), Kind: Ack, ID: "g"},
		{At: at(2), Kind: Start, ID: "g", Worker: "w3"}, {At: at(5), Kind: Done, ID: "g", Worker: "w3"},
		{At: at(6), Kind: Start, ID: "g", Worker: "w3"}, {At: at(6), Kind: Refused, ID: "g", Worker: "w3"},
		{At: at(7), Kind: Done, ID: "g", Worker: "w3"},
		// f: enqueue failed, but stored: indeterminate, allowed.
		{At: at(0), Kind: Invoke, ID: "f"}, {At: at(1), Kind: Fail, ID: "f"},
		{At: at(2), Kind: Start, ID: "f", Worker: "w1"}, {At: at(3), Kind: Done, ID: "f", Worker: "w1"},
	}
	r := Check(evs)
	if strings.Join(r.Lost, ",") != "c" || strings.Join(r.Unexpected, ",") != "d" || strings.Join(r.Unexplained, ",") != "e" {
		t.Fatalf("lost %v, unexpected %v, unexplained %v; want c, d, e", r.Lost, r.Unexpected, r.Unexplained)
	}
	if r.Acked != 5 || r.EnqueueFailed != 1 || r.Indeterminate != 1 || r.Completed != 6 {
		t.Errorf("acked %d, failed %d, indeterminate %d, completed %d; want 5, 1, 1, 6", r.Acked, r.EnqueueFailed, r.Indeterminate, r.Completed)
	}
	if r.Redeliveries != 3 || r.RunTwice != 3 || r.DoneTwice != 2 || r.InFlight != 1 || r.RerunAfterLeaseLoss != 1 {
		t.Errorf("re-runs %d, run twice %d, done twice %d, in flight %d, after a lease loss %d; want 3, 3, 2, 1, 1",
			r.Redeliveries, r.RunTwice, r.DoneTwice, r.InFlight, r.RerunAfterLeaseLoss)
	}
	if len(r.Recovery) != 1 || r.Recovery[0] != 3*time.Second {
		t.Errorf("recovery %v, want [3s]", r.Recovery)
	}
	err := r.Err()
	for _, want := range []string{"1 acknowledged tasks never completed: c", "1 tasks ran that were never enqueued: d", "without a fault catching the earlier run: e", "3 re-runs, more than the 1 runs faults caught in flight (+0 after storage faults, +1 after leases lost)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Err() = %v; want it to say %q", err, want)
		}
	}

	// A storage fault explains the re-run of any task whose earlier run
	// started before the fault ended and whose later one after it began.
	for _, tc := range []struct {
		from, to  int
		explained bool
	}{{4, 4, true}, {1, 2, true}, {3, 4, true}, {0, 1, false}, {6, 7, false}} {
		evs := append(append([]Event(nil), evs...), Event{At: at(tc.from), Kind: Fault, ID: "crash", Worker: StorageWorker},
			Event{At: at(tc.to), Kind: Heal, ID: "crash", Worker: StorageWorker})
		r = Check(sortByTime(evs))
		// It explains e, and g before g's fence does.
		if got := len(r.Unexplained) == 0 && r.RerunAfterStorageFault == 2; got != tc.explained {
			t.Errorf("storage fault from %d to %d: unexplained %v, explained by it %d; want explained %v", tc.from, tc.to, r.Unexplained, r.RerunAfterStorageFault, tc.explained)
		}
	}
}

func sortByTime(evs []Event) []Event {
	out := append([]Event(nil), evs...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].At.Before(out[j-1].At); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestLogRoundTrip writes events from two logs into one directory, cuts
// the last line of one file short (a writer killed mid-line), and reads
// them back in time order.
func TestLogRoundTrip(t *testing.T) {
	dir := t.TempDir()
	a, err := OpenLog(filepath.Join(dir, "a.log"), "wa")
	if err != nil {
		t.Fatal(err)
	}
	b, err := OpenLog(filepath.Join(dir, "b.log"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{At: at(1), Kind: Invoke, ID: "x"},
		{At: at(2), Kind: Start, ID: "x", Worker: "wa", Attempt: 1},
		{At: at(3), Kind: Cancel, ID: "x", Worker: "wa", Note: "lease lost: the task\nwas recovered"},
	}
	for _, e := range []struct {
		l *Log
		e Event
	}{{b, want[0]}, {a, Event{At: want[1].At, Kind: Start, ID: "x", Attempt: 1}}, {a, want[2]}} {
		if err := e.l.Record(e.e); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	b.Close()
	f, err := os.OpenFile(filepath.Join(dir, "a.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("1800000009 done x w")
	f.Close()

	got, err := ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	want[2].Note = "lease lost: the task was recovered"
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if !got[i].At.Equal(want[i].At) || got[i].Kind != want[i].Kind || got[i].ID != want[i].ID ||
			got[i].Worker != want[i].Worker || got[i].Attempt != want[i].Attempt || got[i].Note != want[i].Note {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := ParseEvent("12 start"); err == nil {
		t.Error("a short line parsed")
	}
}

func TestWorkFor(t *testing.T) {
	lo, hi := 10*time.Millisecond, 200*time.Millisecond
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		d := WorkFor(i, lo, hi)
		if d < lo || d > hi || d != WorkFor(i, lo, hi) {
			t.Fatalf("WorkFor(%d) = %v, want a fixed value in [%v, %v]", i, d, lo, hi)
		}
		seen[d] = true
		if got, err := ParsePayload(Payload(d)); err != nil || got != d {
			t.Fatalf("payload of %v read back as %v, %v", d, got, err)
		}
	}
	if len(seen) < 100 {
		t.Errorf("1,000 tasks got only %d distinct durations", len(seen))
	}
}
