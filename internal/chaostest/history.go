// Package chaostest records what happens to tasks while htq's reliability
// suites (the chaos folder) inject faults, and checks the record
// afterwards the way a total-queue check does: every acknowledged enqueue
// must have completed (lost = 0), nothing may complete that was never
// enqueued (unexpected = 0), and every task that ran more than once must
// owe it to a fault that caught an earlier run in flight.
//
// The record is a history: append-only files of one line per event,
// written by every process that takes part (the test itself, and each
// worker process). A process appends each event with one write(2) on a
// file opened with O_APPEND, so a line that was written survives the
// process being killed with SIGKILL the next instant, and lines of
// different writers never interleave within a line. A reader drops a last
// line that has no newline (a write the kill cut short cannot happen for
// lines this size on a local file system, but the reader does not rely on
// it).
package chaostest

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Kind names what an event records.
type Kind string

// The kinds of event a history holds.
const (
	// Invoke: an Enqueue of task ID was called.
	Invoke Kind = "invoke"
	// Ack: that Enqueue returned nil; the task is acknowledged.
	Ack Kind = "ack"
	// Fail: that Enqueue returned an error; the task may or may not have
	// been stored (an error after a write is indeterminate).
	Fail Kind = "fail"
	// Start: a handler started task ID on Worker, attempt Attempt (1 for
	// the first run).
	Start Kind = "start"
	// Done: that handler returned nil.
	Done Kind = "done"
	// Cancel: that handler's context was cancelled (Note: the cause).
	Cancel Kind = "cancel"
	// Refused: the worker's server reported that it could not write the
	// outcome of task ID because its lease had been lost (Note: what the
	// server said).
	Refused Kind = "refused"
	// Warned: the worker's server logged a warning or an error (Note: the
	// message and its error; ID: the task it names, if any). Kept for
	// reading a failure, not checked.
	Warned Kind = "warned"
	// Fault: the test injected a fault; ID names it (kill, stop, crash,
	// …) and Worker the process it hit.
	Fault Kind = "fault"
	// Heal: the fault ID on Worker ended (a restart, SIGCONT, …).
	Heal Kind = "heal"
	// InFlight: task ID had not been recorded as completed by the storage
	// when the fault on Worker struck (the test asks the storage right
	// after the fault, and stamps the event with the time the process
	// was gone or stopped); its run may be repeated.
	InFlight Kind = "inflight"
)

// An Event is one line of a history.
type Event struct {
	At      time.Time
	Kind    Kind
	ID      string // task ID, or fault name for Fault and Heal
	Worker  string // worker incarnation ("" for the producer)
	Attempt int    // Start: 1 for a task's first run
	Note    string // free text, may hold spaces
}

// String formats e as its history line, without the newline:
// "<unix nanoseconds> <kind> <id> <worker> <attempt> <note>", "-" standing
// for an empty ID or worker.
func (e Event) String() string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	line := strconv.FormatInt(e.At.UnixNano(), 10) + " " + string(e.Kind) + " " + dash(e.ID) + " " +
		dash(e.Worker) + " " + strconv.Itoa(e.Attempt)
	if e.Note != "" {
		line += " " + strings.ReplaceAll(e.Note, "\n", " ")
	}
	return line
}

// ParseEvent parses one history line (without its newline).
func ParseEvent(line string) (Event, error) {
	f := strings.SplitN(line, " ", 6)
	if len(f) < 5 {
		return Event{}, fmt.Errorf("chaostest: history line %q: want at least 5 fields", line)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return Event{}, fmt.Errorf("chaostest: history line %q: time: %w", line, err)
	}
	attempt, err := strconv.Atoi(f[4])
	if err != nil {
		return Event{}, fmt.Errorf("chaostest: history line %q: attempt: %w", line, err)
	}
	undash := func(s string) string {
		if s == "-" {
			return ""
		}
		return s
	}
	e := Event{At: time.Unix(0, ns), Kind: Kind(f[1]), ID: undash(f[2]), Worker: undash(f[3]), Attempt: attempt}
	if len(f) == 6 {
		e.Note = f[5]
	}
	return e, nil
}

// A Log appends events to one history file. It is safe for concurrent
// use: each event is one write(2) to a file opened with O_APPEND, which
// the kernel applies whole.
type Log struct {
	f      *os.File
	worker string
	now    func() time.Time
}

// OpenLog opens (creating it if needed) the history file path for
// appending. worker is put on every event that names no worker.
func OpenLog(path, worker string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaostest: open history: %w", err)
	}
	return &Log{f: f, worker: worker, now: time.Now}, nil
}

// Record appends e, stamping it with the current time when e.At is zero
// and with the log's worker when e.Worker is empty.
func (l *Log) Record(e Event) error {
	if e.At.IsZero() {
		e.At = l.now()
	}
	if e.Worker == "" {
		e.Worker = l.worker
	}
	// One Write of the whole line: os.File.Write issues a single write(2)
	// for a regular file unless the kernel writes less, which it does not
	// for a few dozen bytes on a local file system.
	if _, err := l.f.Write([]byte(e.String() + "\n")); err != nil {
		return fmt.Errorf("chaostest: append to history: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// ReadDir reads every "*.log" history file of dir and returns their
// events ordered by time (ties keep file order). A last line without a
// newline is dropped; any other line that does not parse is an error.
func ReadDir(dir string) ([]Event, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, fmt.Errorf("chaostest: list histories: %w", err)
	}
	var all []Event
	for _, p := range paths {
		evs, err := ReadFile(p)
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].At.Before(all[j].At) })
	return all, nil
}

// ReadFile reads one history file in file order. A last line without a
// newline is dropped.
func ReadFile(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("chaostest: read history: %w", err)
	}
	if i := strings.LastIndexByte(string(data), '\n'); i < len(data)-1 {
		data = data[:i+1] // the cut-short last line, if any
	}
	var evs []Event
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		e, err := ParseEvent(sc.Text())
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("chaostest: read %s: %w", path, err)
	}
	return evs, nil
}
