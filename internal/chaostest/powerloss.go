package chaostest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
)

// StraceArgs returns the strace options a power-loss run needs before the
// traced command: follow every thread, name each descriptor's file (-y),
// trace the calls that change a file's content or make it durable, dump
// the data of every write (-e write=all), and write to out.
func StraceArgs(out string) []string {
	return []string{"-f", "-qq", "--seccomp-bpf", "-y", "-o", out,
		"-e", "trace=write,pwrite64,pwritev,pwritev2,writev,fsync,fdatasync,ftruncate,fallocate,sync_file_range,msync,rename,renameat,renameat2,unlink,unlinkat",
		"-e", "write=all"}
}

// A Trace is what strace recorded of one process's changes to one file:
// the writes and truncations in the order they completed, and the syncs
// (fsync, fdatasync) with where each began and ended in that order; and
// the lines the process appended to its history meanwhile, so that a power
// loss can be placed after any call and compared with the
// acknowledgements the process had given by then.
//
// It is the record a power-loss simulation replays: on a real disk, a
// write is sure to survive a power loss only once a sync that began after
// the write completed has returned; any later write may survive, in part
// or not at all. Strace sees the calls, not the page cache, so the model
// is the one POSIX promises and nothing better.
type Trace struct {
	ops     []fileOp
	syncs   []fileSync
	history []fileOp // the writes to the history file: one event each
	end     int      // calls completed in all
	// unfinished holds the writes to the file begun and never returned
	// (the process was killed inside them): the kernel may or may not
	// have applied them, and strace never dumped their data. The images
	// drop them; Equal allows either outcome.
	unfinished []fileOp
	// Unmodelled lists calls on the file the replay does not model
	// (write(2) at the file offset, fallocate, vectored writes, msync,
	// renames); a simulation must refuse a trace that has any.
	Unmodelled []string
}

type fileOp struct {
	seq  int    // position among the completed calls
	off  int64  // write: where
	data []byte // write: what
	size int64  // truncate: the new size (-1 for a write)
}

type fileSync struct{ begin, end int }

// strace's lines: "PID name(args) = ret", "PID name(args <unfinished
// ...>", "PID <... name resumed>rest) = ret", and the hex dump " | 00000
// 02 00 …  ascii |" that follows a write's completing line.
var (
	callLine    = regexp.MustCompile(`^(\d+)\s+(\w+)\((.*)$`)
	resumedLine = regexp.MustCompile(`^(\d+)\s+<\.\.\. (\w+) resumed>(.*)$`)
	retPart     = regexp.MustCompile(`\)\s+= (-?\d+)`)
)

// ParseStrace reads the output strace wrote with StraceArgs and keeps the
// calls on the file named path (as strace's -y prints it), and the lines
// written to the history file historyPath.
func ParseStrace(r io.Reader, path, historyPath string) (*Trace, error) {
	t := &Trace{}
	fdTag := "<" + path + ">"
	histTag := "<" + historyPath + ">"
	type pending struct {
		name, args string
		begin      int
	}
	open := map[string]pending{} // by PID: a call begun, not yet returned
	seq := 0                     // completed calls so far, of every file
	var dumping *fileOp          // the write whose dump lines follow
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("chaostest: read strace output: %w", err)
		}
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, " | ") {
			if dumping != nil {
				if err := readDump(line, dumping.data); err != nil {
					return nil, err
				}
			}
			continue
		}
		dumping = nil
		if m := resumedLine.FindStringSubmatch(line); m != nil {
			pid, name, rest := m[1], m[2], m[3]
			p, ok := open[pid]
			if !ok || p.name != name {
				continue // a call begun before the trace began
			}
			ret, ok := returned(rest)
			if !ok {
				// "= ?": the process was killed inside the call, which
				// stays unfinished (see below).
				continue
			}
			delete(open, pid)
			seq++
			dumping = t.complete(name, p.args, ret, fdTag, histTag, p.begin, seq)
			continue
		}
		m := callLine.FindStringSubmatch(line)
		if m == nil {
			continue // signals, exits
		}
		pid, name, args := m[1], m[2], m[3]
		if i := strings.Index(args, " <unfinished ...>"); i >= 0 {
			open[pid] = pending{name: name, args: args[:i], begin: seq}
			continue
		}
		seq++
		if locs := retPart.FindAllStringSubmatchIndex(args, -1); len(locs) > 0 {
			last := locs[len(locs)-1]
			ret, _ := strconv.ParseInt(args[last[2]:last[3]], 10, 64)
			dumping = t.complete(name, args[:last[0]], ret, fdTag, histTag, seq-1, seq)
		}
	}
	t.end = seq
	for _, p := range open {
		if p.name != "pwrite64" {
			continue
		}
		first, _, _ := strings.Cut(p.args, ", ")
		f := strings.Split(p.args, ", ")
		if !strings.HasSuffix(first, fdTag) || len(f) < 3 {
			continue
		}
		off, err1 := strconv.ParseInt(f[len(f)-1], 10, 64)
		n, err2 := strconv.ParseInt(f[len(f)-2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Unmodelled = append(t.Unmodelled, "unreadable unfinished pwrite64("+p.args+")")
			continue
		}
		t.unfinished = append(t.unfinished, fileOp{off: off, data: make([]byte, n), size: -1})
	}
	return t, nil
}

// returned reads the return value at the end of a call's text (its last
// ") = N").
func returned(s string) (int64, bool) {
	locs := retPart.FindAllStringSubmatchIndex(s, -1)
	if len(locs) == 0 {
		return 0, false
	}
	last := locs[len(locs)-1]
	ret, err := strconv.ParseInt(s[last[2]:last[3]], 10, 64)
	return ret, err == nil
}

// complete records a call that returned ret: args are its arguments
// (without the closing parenthesis), begin the number of calls completed
// before it began, seq its own position. It returns the write whose data
// the dump lines that follow hold, if the call is one.
func (t *Trace) complete(name, args string, ret int64, fdTag, histTag string, begin, seq int) *fileOp {
	// The file is the call's first argument: "9</dir/htq.db>".
	first, _, _ := strings.Cut(args, ", ")
	if name == "write" && strings.HasSuffix(first, histTag) && ret > 0 {
		t.history = append(t.history, fileOp{seq: seq, data: make([]byte, ret), size: -1})
		return &t.history[len(t.history)-1]
	}
	if !strings.HasSuffix(first, fdTag) {
		if path := fdTag[1 : len(fdTag)-1]; strings.Contains(args, `"`+path+`"`) && (strings.HasPrefix(name, "rename") || strings.HasPrefix(name, "unlink")) {
			t.Unmodelled = append(t.Unmodelled, name+"("+args+")")
		}
		return nil
	}
	if ret < 0 {
		return nil // failed: changed nothing
	}
	// The last argument of pwrite64 and ftruncate is the number read;
	// a data string before it may hold anything.
	f := strings.Split(args, ", ")
	lastArg := func() (int64, bool) {
		n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			t.Unmodelled = append(t.Unmodelled, "unreadable "+name+"("+args+")")
		}
		return n, err == nil
	}
	switch name {
	case "pwrite64":
		off, ok := lastArg()
		if !ok {
			return nil
		}
		t.ops = append(t.ops, fileOp{seq: seq, off: off, data: make([]byte, ret), size: -1})
		return &t.ops[len(t.ops)-1]
	case "ftruncate":
		if size, ok := lastArg(); ok {
			t.ops = append(t.ops, fileOp{seq: seq, size: size})
		}
	case "fsync", "fdatasync":
		t.syncs = append(t.syncs, fileSync{begin: begin, end: seq})
	default:
		t.Unmodelled = append(t.Unmodelled, name+"("+args+")")
	}
	return nil
}

// readDump copies one hex-dump line (" | 00010  01 00 … 00  ascii |")
// into data at the offset it names.
func readDump(line string, data []byte) error {
	if len(line) < 11 {
		return fmt.Errorf("chaostest: strace dump line %q", line)
	}
	off, err := strconv.ParseInt(line[3:8], 16, 64)
	if err != nil {
		return fmt.Errorf("chaostest: strace dump line %q: %w", line, err)
	}
	hexPart := line[10:min(len(line), 59)]
	for i, h := range strings.Fields(hexPart) {
		b, err := strconv.ParseUint(h, 16, 8)
		if err != nil {
			return fmt.Errorf("chaostest: strace dump line %q: %w", line, err)
		}
		if int(off)+i < len(data) {
			data[int(off)+i] = byte(b)
		}
	}
	return nil
}

// Syncs is the number of completed syncs of the file.
func (t *Trace) Syncs() int { return len(t.syncs) }

// Ops is the number of completed writes and truncations of the file.
func (t *Trace) Ops() int { return len(t.ops) }

// End is the number of calls the trace holds: a power loss after call End
// is one at the end of the trace.
func (t *Trace) End() int { return t.end }

// OpPoints returns, for each write and truncation of the file, the call
// after which it completed: the points where a power loss finds unsynced
// data.
func (t *Trace) OpPoints() []int {
	ps := make([]int, len(t.ops))
	for i, op := range t.ops {
		ps[i] = op.seq
	}
	return ps
}

// Events returns the history events the process had appended when call p
// completed.
func (t *Trace) Events(p int) ([]Event, error) {
	var evs []Event
	for _, h := range t.history {
		if h.seq > p {
			break
		}
		for _, line := range strings.Split(strings.TrimRight(string(h.data), "\n"), "\n") {
			e, err := ParseEvent(line)
			if err != nil {
				return nil, err
			}
			evs = append(evs, e)
		}
	}
	return evs, nil
}

// ImageStats says what an image kept of the trace.
type ImageStats struct {
	Durable  int // writes and truncations a completed sync covered
	Unsynced int // those after it
	Kept     int // unsynced ones kept whole
	Torn     int // unsynced writes kept in part (some 512-byte sectors)
	Dropped  int // unsynced ones dropped
}

// Image returns the file's content after a power loss right after call p,
// from initial (its content when the trace began): every write and
// truncation that completed before the last sync completed by p began,
// then, in order, each later one completed by p kept with probability
// 1/2, a kept write of more than one 512-byte sector torn with probability
// 1/2 (each of its sectors kept with probability 1/2).
func (t *Trace) Image(initial []byte, p int, rng *rand.Rand) ([]byte, ImageStats) {
	cut := 0 // ops completed by this call are durable
	for _, s := range t.syncs {
		if s.end <= p {
			cut = max(cut, s.begin)
		}
	}
	return t.image(initial, cut, p, rng)
}

// ControlImage returns the file's content with only what the syncs
// completed by p made durable, less the last back of them, and nothing
// after: a wrong image, which loses writes those syncs had made durable,
// for checking that a suite notices a loss. The bool is false when p has
// no more than back syncs behind it.
func (t *Trace) ControlImage(initial []byte, p, back int) ([]byte, bool) {
	var begins []int
	for _, s := range t.syncs {
		if s.end <= p {
			begins = append(begins, s.begin)
		}
	}
	if len(begins) <= back {
		return nil, false
	}
	cut := begins[len(begins)-1-back]
	img, _ := t.image(initial, cut, cut, nil)
	return img, true
}

// SyncBegins returns, for each sync of the file completed by call p, the
// number of calls completed before it began, in order: a control image of
// several files cuts all of them at one of these points (ImageAt).
func (t *Trace) SyncBegins(p int) []int {
	var begins []int
	for _, s := range t.syncs {
		if s.end <= p {
			begins = append(begins, s.begin)
		}
	}
	return begins
}

// ImageAt returns the file's content with every write and truncation
// completed by call cut and nothing after: with cut before the last syncs
// of a group of files, a wrong image of them all that loses what those
// syncs made durable.
func (t *Trace) ImageAt(initial []byte, cut int) []byte {
	img, _ := t.image(initial, cut, cut, nil)
	return img
}

func (t *Trace) image(initial []byte, cut, p int, rng *rand.Rand) ([]byte, ImageStats) {
	var st ImageStats
	img := append([]byte(nil), initial...)
	for _, op := range t.ops {
		switch {
		case op.seq > p:
			return img, st
		case op.seq <= cut:
			st.Durable++
			img = apply(img, op, nil)
			continue
		}
		st.Unsynced++
		if rng == nil || rng.IntN(2) == 0 {
			st.Dropped++
			continue
		}
		if op.size < 0 && len(op.data) > 512 && rng.IntN(2) == 0 {
			st.Torn++
			img = apply(img, op, rng)
			continue
		}
		st.Kept++
		img = apply(img, op, nil)
	}
	return img, st
}

// apply applies one write or truncation to img; with rng, a write keeps
// each of its 512-byte sectors with probability 1/2.
func apply(img []byte, op fileOp, rng *rand.Rand) []byte {
	if op.size >= 0 {
		if op.size <= int64(len(img)) {
			return img[:op.size]
		}
		return append(img, make([]byte, op.size-int64(len(img)))...)
	}
	end := op.off + int64(len(op.data))
	if end > int64(len(img)) {
		img = append(img, make([]byte, end-int64(len(img)))...)
	}
	for s := 0; s < len(op.data); s += 512 {
		if rng != nil && rng.IntN(2) == 0 {
			continue
		}
		copy(img[op.off+int64(s):], op.data[s:min(s+512, len(op.data))])
	}
	return img
}

// Equal reports whether the image built with everything the trace holds
// (every op kept whole) equals final, the file as the process left it,
// but for the ranges of unfinished writes, which may hold either content:
// a check that the trace lost nothing.
func (t *Trace) Equal(initial, final []byte) bool {
	img := append([]byte(nil), initial...)
	for _, op := range t.ops {
		img = apply(img, op, nil)
	}
	for _, op := range t.unfinished {
		if end := op.off + int64(len(op.data)); end <= int64(len(final)) {
			copy(op.data, final[op.off:end])
			img = apply(img, op, nil)
		}
	}
	return bytes.Equal(img, final)
}

// Unfinished is the number of writes to the file the process was killed
// inside.
func (t *Trace) Unfinished() int { return len(t.unfinished) }
