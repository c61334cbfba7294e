package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/chaostest"
)

// TestPowerLoss is suite 7's power-loss simulation on the embedded store.
// A worker process that owns the store enqueues (16 producers, 1,000 a
// second) and runs tasks under strace, which records every write,
// truncation and sync of the data file and of the two write-ahead log
// files with the written bytes, and every
// line the worker appends to its history; after a random 0.5–1.5 s
// (0.3–0.8 s in the short version) the worker is killed with SIGKILL. From the trace the test rebuilds the data
// files as a disk would hold them after a power loss right after a chosen
// call: for each file, everything a completed sync of it covered, and of
// the writes after it a random subset, some torn at 512-byte sectors
// (the log's records written after its last fdatasync are dropped, kept
// or torn this way). For each of many such
// points (half right after a write of the data file, where unsynced data
// is pending, half anywhere) the store must open, pass its invariant
// check, and hold every task whose Enqueue had been acknowledged by then.
//
// A control image that drops what the last syncs made durable must lose
// an acknowledged task: the check sees a loss when there is one.
//
// What the model leaves out: the files' directory entries and the lock
// file (the files exist in every image), and writes the kernel may
// reorder within one sync (the image keeps or drops each write as a
// whole, or tears it by sectors).
func TestPowerLoss(t *testing.T) {
	r := newRun(t)
	straceBin, err := exec.LookPath("strace")
	if err != nil {
		t.Fatalf("strace not found on PATH (apt-get install strace, or run `make test`, which installs it): %v", err)
	}
	worker := buildWorker(t)
	runs, points := pick(1, 3), pick(40, 150)
	var (
		checked, beforeAck, openFailedBeforeAck, acked int
		kept, torn, dropped, syncs, ops, unfinished    int
		controlMissing                                 []string
	)
	for run := range runs {
		dataDir := t.TempDir()
		dataDir, err = filepath.EvalSymlinks(dataDir)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("c%d", run)
		trace := filepath.Join(r.dir, name+".trace")
		hist := filepath.Join(r.dir, name+".log")
		args := append(chaostest.StraceArgs(trace), "--", worker, "-history", hist, "-storage", "file:"+dataDir,
			"-queue", "pl", "-concurrency", "16", "-lease", "2s", "-produce", "1000000", "-prefix", fmt.Sprintf("r%d-", run),
			"-rate", "1000", "-producers", "16", "-min-work", "1ms", "-max-work", "20ms")
		p, err := chaostest.StartProc(straceBin, r.dir, name, args...)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(r.between(pick(300*time.Millisecond, 500*time.Millisecond), pick(800*time.Millisecond, 1500*time.Millisecond))) // the random moment of the kill
		child, err := tracee(p.Pid())
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(child, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Exited():
		case <-time.After(time.Minute):
			t.Fatal("strace did not exit after its tracee was killed")
		}

		// One trace per file: the data file first (its calls and the
		// history), then the logs; call numbers are shared.
		trs := make([]*chaostest.Trace, len(storeFiles))
		for i, name := range storeFiles {
			path := filepath.Join(dataDir, name)
			f, err := os.Open(trace)
			if err != nil {
				t.Fatal(err)
			}
			trs[i], err = chaostest.ParseStrace(f, path, hist)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			tr := trs[i]
			if len(tr.Unmodelled) > 0 {
				t.Fatalf("%s saw calls the simulation does not model: %v", name, tr.Unmodelled[:min(5, len(tr.Unmodelled))])
			}
			final, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Equal(nil, final) {
				_ = os.WriteFile(trace+"."+name+".final", final, 0o600) // kept with the trace, for a look
				t.Fatalf("replaying every write of %s in %s does not give the file the process left (%s.%s.final): the trace is incomplete", name, trace, trace, name)
			}
			unfinished += tr.Unfinished()
			syncs += tr.Syncs()
			ops += tr.Ops()
		}
		_ = os.Remove(trace) // hundreds of MB
		tr := trs[0]

		// The points: after random writes of the files, and anywhere.
		var at []int
		for range points / 2 {
			fileOps := trs[r.rng.IntN(len(trs))].OpPoints()
			for len(fileOps) == 0 {
				fileOps = trs[r.rng.IntN(len(trs))].OpPoints()
			}
			at = append(at, fileOps[r.rng.IntN(len(fileOps))])
			at = append(at, 1+r.rng.IntN(tr.End()))
		}
		sort.Ints(at)
		img := filepath.Join(t.TempDir(), "img")
		for _, pt := range at {
			evs, err := tr.Events(pt)
			if err != nil {
				t.Fatal(err)
			}
			ids := ackedIDs(evs)
			files := make([][]byte, len(trs))
			var st chaostest.ImageStats
			for i, ftr := range trs {
				var fst chaostest.ImageStats
				files[i], fst = ftr.Image(nil, pt, r.rng)
				st.Durable, st.Unsynced = st.Durable+fst.Durable, st.Unsynced+fst.Unsynced
				st.Kept, st.Torn, st.Dropped = st.Kept+fst.Kept, st.Torn+fst.Torn, st.Dropped+fst.Dropped
			}
			kept, torn, dropped = kept+st.Kept, torn+st.Torn, dropped+st.Dropped
			missing, err := openImage(t, img, files, "pl", ids)
			if len(ids) == 0 {
				beforeAck++
				if err != nil {
					openFailedBeforeAck++
					t.Logf("power loss after call %d of %d, before the first acknowledgement (%+v): %v", pt, tr.End(), st, err)
				}
				continue
			}
			checked++
			acked += len(ids)
			if err != nil {
				t.Errorf("power loss after call %d of %d (%+v): %v", pt, tr.End(), st, err)
			} else if len(missing) > 0 {
				t.Errorf("power loss after call %d of %d (%+v): %d of %d acknowledged tasks missing: %v",
					pt, tr.End(), st, len(missing), len(ids), missing[:min(5, len(missing))])
			}
		}

		// The control: after the last acknowledgement, without what the
		// last sync made durable.
		last := 0
		for pt := tr.End(); pt > 0 && last == 0; pt-- {
			evs, _ := tr.Events(pt)
			if n := len(ackedIDs(evs)); n > 0 {
				prev, _ := tr.Events(pt - 1)
				if len(ackedIDs(prev)) < n {
					last = pt
				}
			}
		}
		// A commit may be made durable by a sync well before the
		// acknowledgement is written, so go back sync by sync (at most 50)
		// until an acknowledged task is missing.
		evs, err := tr.Events(last)
		if err != nil {
			t.Fatal(err)
		}
		// Every file is cut at the start of one of the last syncs of any
		// of them, dropping all that followed.
		var begins []int
		for _, ftr := range trs {
			begins = append(begins, ftr.SyncBegins(last)...)
		}
		sort.Ints(begins)
		found := false
		for back := 1; back <= 50 && !found && back < len(begins); back++ {
			cut := begins[len(begins)-1-back]
			files := make([][]byte, len(trs))
			for i, ftr := range trs {
				files[i] = ftr.ImageAt(nil, cut)
			}
			missing, err := openImage(t, img, files, "pl", ackedIDs(evs))
			if err != nil {
				t.Fatalf("control image %d syncs back: %v", back, err)
			}
			if len(missing) > 0 {
				found = true
				controlMissing = append(controlMissing, fmt.Sprintf("%d syncs back: %d", back, len(missing)))
			}
		}
		if !found {
			t.Error("control images without up to the last 50 syncs lost no acknowledged task: the suite cannot see a loss")
		}
	}
	if checked == 0 {
		t.Fatal("no power-loss point came after an acknowledgement")
	}
	figure(t, "%d runs killed at random under strace (%d writes/truncations, %d syncs of the data and log files); %d power-loss points after an acknowledgement checked: every image opened, passed its invariants and held all %d acknowledged tasks (summed over points); unsynced writes kept %d, torn %d, dropped %d; writes the kill interrupted %d (dropped); %d points before the first acknowledgement, %d of them did not open; control images without the last syncs lost acknowledged tasks (per run: %s)",
		runs, ops, syncs, checked, acked, kept, torn, dropped, unfinished, beforeAck, openFailedBeforeAck, strings.Join(controlMissing, ", "))
}

// tracee returns the PID of strace's child process.
func tracee(stracePID int) (int, error) {
	for range 100 {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", stracePID, stracePID))
		if err != nil {
			return 0, fmt.Errorf("children of strace: %w", err)
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			return strconv.Atoi(f[0])
		}
		time.Sleep(10 * time.Millisecond) // strace starts its child
	}
	return 0, errors.New("strace has no child")
}

// ackedIDs lists the tasks evs acknowledges.
func ackedIDs(evs []chaostest.Event) []string {
	var ids []string
	for _, e := range evs {
		if e.Kind == chaostest.Ack {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

// storeFiles are the files of a data directory that the power-loss test
// rebuilds: the bbolt file and the two log files.
var storeFiles = []string{"htq.db", "htq.wal.0", "htq.wal.1"}

// openImage writes files as the storeFiles of an empty directory dir,
// opens the store there, checks its invariants and returns the tasks of
// ids it lacks in queue.
func openImage(t *testing.T, dir string, files [][]byte, queue string, ids []string) ([]string, error) {
	t.Helper()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for i, name := range storeFiles {
		if err := os.WriteFile(filepath.Join(dir, name), files[i], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := htq.OpenWithOptions(t.Context(), "file:"+dir, htq.OpenOptions{Logger: quietLogger()})
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	defer st.Close()
	checkInvariants(t, st, "after the power loss")
	insp := htq.NewInspector(st)
	var missing []string
	for _, id := range ids {
		if _, err := insp.GetTaskInfo(queue, id); err != nil {
			missing = append(missing, id)
		}
	}
	return missing, nil
}
