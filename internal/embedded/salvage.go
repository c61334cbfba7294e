package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// SalvageReport tells what Salvage did.
type SalvageReport struct {
	// Tasks is how many task records were copied.
	Tasks int
	// BadRecords is how many records were readable as bytes but did not
	// decode; they were left behind.
	BadRecords int
	// DamagedRanges is how many runs of unreadable pages were skipped; the
	// tasks on them are lost.
	DamagedRanges int
	// LogRecords is how many records of the write-ahead log, written after
	// the data file's last checkpoint, were replayed into the copy (up to
	// the first damaged or missing one).
	LogRecords int
	// Lost names the other buckets (queue settings, counters, meta records,
	// scheduler claims, workflows) that could not be read and were not
	// copied.
	Lost []string
}

// Salvage is the way back from a data file Open refuses as corrupt: it
// copies everything that can still be read from the data directory src
// (tasks, queue settings, counters, meta records, scheduler claims,
// workflows) into the
// new data directory dst (created; it must not hold a data file yet),
// skipping damaged pages and records that do not decode. Then replace src
// with dst. Tasks that were on damaged pages are lost. Neither directory may
// be open. On a healthy directory it is an offline compaction: the copy is
// as small as the live data, whatever backlog the original once held.
func Salvage(ctx context.Context, src, dst string) (SalvageReport, error) {
	var rep SalvageReport
	srcFile := filepath.Join(src, DataFileName)
	dstFile := filepath.Join(dst, DataFileName)
	if _, err := os.Stat(dstFile); err == nil {
		return rep, fmt.Errorf("htq: salvage: %s already exists", dstFile)
	}
	srcLock, err := lockDir(src, 0)
	if err != nil {
		return rep, err
	}
	defer srcLock.release()
	in, err := openBolt(srcFile, true, 0)
	if err != nil {
		return rep, fmt.Errorf("htq: salvage: %w (both header pages are damaged: nothing can be read)", err)
	}
	defer in.close()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return rep, fmt.Errorf("htq: salvage: %w", err)
	}
	dstLock, err := lockDir(dst, 0)
	if err != nil {
		return rep, err
	}
	defer dstLock.release()
	out, err := openBolt(dstFile, false, 0)
	if err != nil {
		return rep, err
	}
	defer out.close()

	var walkErr error
	err = in.db.View(func(tx *bolt.Tx) error {
		var tasks *bolt.Bucket
		if err := in.guard(func() error { tasks = tx.Bucket(bucketTasks); return nil }); err != nil || tasks == nil {
			return fmt.Errorf("htq: salvage: the tasks of %s cannot be found: %v", srcFile, err)
		}
		b := newBatch()
		flush := func() error {
			if b.empty() {
				return nil
			}
			err := out.commit(b)
			b = newBatch()
			return err
		}
		// The small buckets first, each whole or not at all.
		listed := make(map[string]bool)
		for _, name := range [][]byte{bucketQueues, bucketStats, bucketKV, bucketClaims, bucketWorkflows, bucketWorkflowSpecs} {
			kv := make(map[string][]byte)
			err := in.guard(func() error {
				bk := tx.Bucket(name)
				if bk == nil {
					return nil
				}
				return bk.ForEach(func(k, v []byte) error {
					kv[string(k)] = append([]byte(nil), v...)
					return nil
				})
			})
			if err != nil {
				rep.Lost = append(rep.Lost, string(name))
				continue
			}
			for k, v := range kv {
				switch string(name) {
				case string(bucketQueues):
					b.queues[k] = v
					listed[k] = true
				case string(bucketStats):
					if key, ok := parseStatKey([]byte(k)); ok && len(v) == 8 {
						b.stats[key] = binary.BigEndian.Uint64(v)
					}
				case string(bucketKV):
					b.kv[k] = v
				case string(bucketClaims):
					b.claims[k] = v
				case string(bucketWorkflows):
					b.wf[k] = v
				case string(bucketWorkflowSpecs):
					b.wfSpecs[k] = v
				}
			}
		}
		var flushErr error
		// Walk records in key order. When a page cannot be read, find the
		// smallest key past the damage from which a seek works again.
		next := uint64(0)
		for next != math.MaxUint64 {
			if err := ctx.Err(); err != nil {
				return err
			}
			last, err := walkFrom(in, tasks, next, func(seq uint64, rec []byte) {
				t, err := decodeTask(seq, rec, nil)
				if err != nil {
					rep.BadRecords++
					return
				}
				b.tasks[seq] = append([]byte(nil), rec...)
				if !listed[t.msg.Queue] {
					listed[t.msg.Queue] = true
					b.queues[t.msg.Queue] = []byte{flagListed}
				}
				rep.Tasks++
				if len(b.tasks) >= 10_000 && flushErr == nil {
					flushErr = flush()
				}
			})
			if ferr := flush(); ferr != nil {
				return ferr
			}
			if flushErr != nil {
				return flushErr
			}
			if err == nil {
				return nil // the end
			}
			rep.DamagedRanges++
			from := last + 1
			if from == next {
				// Not even the first seek's page could be read.
				from = next + 1
			}
			resume, ok := findResume(in, tasks, from)
			if !ok {
				walkErr = fmt.Errorf("nothing readable after record %d: %v", last, err)
				return nil
			}
			next = resume
		}
		return nil
	})
	if err == nil {
		err = walkErr
	}
	if err != nil {
		return rep, fmt.Errorf("htq: salvage of %s: %w", srcFile, err)
	}
	if rep.LogRecords, err = salvageLog(src, in, out); err != nil {
		return rep, err
	}
	return rep, syncDir(dst)
}

// salvageLog writes the records of src's log that follow the checkpoint
// of in, up to the first damaged, missing or undecodable one, into out
// as one checkpoint, and returns how many it wrote. A data file whose
// checkpoint cannot be read gets none: the log cannot be placed.
func salvageLog(src string, in, out *boltStore) (int, error) {
	ckpt, sess, _, err := in.checkpointSeq()
	if err != nil || sess.salt == 0 {
		return 0, nil
	}
	var all []walRecord
	for _, name := range WALFileNames {
		data, err := os.ReadFile(filepath.Join(src, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("htq: salvage: reading the log: %w", err)
		}
		recs, _ := parseWAL(data, sess.salt, ckpt) // the records before any damage
		all = append(all, recs...)
	}
	slices.SortFunc(all, func(a, b walRecord) int { return cmpU64(a.seq, b.seq) })
	var bs []*batch
	next := ckpt + 1
	for _, r := range all {
		if r.seq < next {
			continue
		}
		if r.seq > next {
			break
		}
		bt, err := decodeBatch(r.payload)
		if err != nil {
			break
		}
		bs = append(bs, bt)
		next++
	}
	if len(bs) == 0 {
		return 0, nil
	}
	if err := out.checkpoint(bs, next-1, nil); err != nil {
		return 0, fmt.Errorf("htq: salvage: writing the log's records: %w", err)
	}
	return len(bs), nil
}

// walkFrom calls f for records from key from on until the end or a damaged
// page (err). last is the last key it read (from-1 if none).
func walkFrom(s *boltStore, tasks *bolt.Bucket, from uint64, f func(uint64, []byte)) (last uint64, err error) {
	last = from - 1
	err = s.guard(func() error {
		c := tasks.Cursor()
		for k, v := c.Seek(seqKey(from)); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				continue
			}
			last = binary.BigEndian.Uint64(k)
			f(last, v)
		}
		return nil
	})
	return last, err
}

// findResume returns the smallest key >= from at which a seek succeeds,
// probing further away each time, then narrowing down.
func findResume(s *boltStore, tasks *bolt.Bucket, from uint64) (uint64, bool) {
	seeks := func(k uint64) bool {
		return s.guard(func() error {
			tasks.Cursor().Seek(seqKey(k))
			return nil
		}) == nil
	}
	bad, step := from, uint64(1)
	good := uint64(0)
	for probe := from; ; probe = from + step {
		if seeks(probe) {
			good = probe
			break
		}
		bad = probe
		if step > math.MaxUint64/4 {
			return 0, false
		}
		step *= 2
	}
	for good-bad > 1 && good > from {
		mid := bad + (good-bad)/2
		if seeks(mid) {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, true
}
