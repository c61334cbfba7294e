package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/htqueue/htq/internal/base"
)

// The write-ahead log (docs/adr/0002-embedded-store.md, "The log"): every
// batch is appended to one of two log files as one record and synced
// before its callers hear of it; bbolt holds a checkpoint of the batches
// up to a record number, written in the background.
//
// A record is a 20-byte header and the batch's encoding (walcodec.go):
//
//	length   uint32  of the payload (≥ 1)
//	seq      uint64  the record number, one more than the record before
//	crc      uint32  CRC-32C of the payload
//	hcrc     uint32  CRC-32C of the 16 bytes before it
//
// all big endian. The files are preallocated with zeros and reused in
// turn: one is written from its start only when every record it holds is
// in a checkpoint, so what follows its newest records is zeros or older
// records (lower numbers), never a record a replay needs.

// WALFileNames are the log files inside a data directory, beside htq.db.
var WALFileNames = [2]string{"htq.wal.0", "htq.wal.1"}

const (
	walHeader = 20
	// walPrealloc is the size each log file is filled to with zeros when
	// created, so that appending does not change the file's size (which
	// would make every fdatasync write metadata too). A file grows past
	// it when checkpoints fall behind.
	walPrealloc = 4 << 20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// walLog is the log writer. Only the committer uses it (and Open and
// Close, when the committer is not running).
type walLog struct {
	files [2]*os.File
	names [2]string
	cur   int    // the file being appended to
	off   int64  // where the next record goes in it
	seq   uint64 // the number of the last record written
	// top is the number of the newest record each file holds (0: none
	// that a checkpoint lacks).
	top [2]uint64
	// dirty is set when a write failed: the record may be partly on disk
	// at off, so the next one must go to the same place, not to the
	// other file.
	dirty bool
	buf   []byte
}

// walRecord is one record read back from a log file.
type walRecord struct {
	seq     uint64
	payload []byte
}

// openWAL opens (creating and zero-filling to size when missing or
// shorter) the two log files of dir and reads every record numbered above ckpt, in order. A
// torn or damaged last record ends a file (it was never acknowledged); a
// damaged record followed by a valid one that a replay needs, or a gap in
// the numbers, fails with ErrCorrupt naming the file.
func openWAL(dir string, ckpt uint64, size int64) (*walLog, []walRecord, error) {
	w := &walLog{}
	var all []walRecord
	created := false
	for i, name := range WALFileNames {
		path := filepath.Join(dir, name)
		w.names[i] = path
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			w.close()
			return nil, nil, fmt.Errorf("htq: opening log %s: %w", path, err)
		}
		w.files[i] = f
		data, err := io.ReadAll(f)
		if err != nil {
			w.close()
			return nil, nil, fmt.Errorf("htq: reading log %s: %w", path, err)
		}
		recs, err := parseWAL(data, ckpt)
		if err != nil {
			w.close()
			return nil, nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
		}
		for _, r := range recs {
			if r.seq > ckpt {
				all = append(all, r)
			}
		}
		if int64(len(data)) < size {
			created = true
			if err := zeroFill(f, int64(len(data)), size); err != nil {
				w.close()
				return nil, nil, fmt.Errorf("htq: preallocating log %s: %w", path, err)
			}
		}
	}
	for _, f := range w.files {
		dropCache(f)
	}
	if created {
		if err := syncDir(dir); err != nil {
			w.close()
			return nil, nil, err
		}
	}
	slices.SortFunc(all, func(a, b walRecord) int { return cmpU64(a.seq, b.seq) })
	next := ckpt + 1
	for _, r := range all {
		if r.seq != next {
			w.close()
			return nil, nil, fmt.Errorf("%w: %s: the log lacks record %d (found %d after the checkpoint at %d)", ErrCorrupt, filepath.Join(dir, WALFileNames[0]), next, r.seq, ckpt)
		}
		next++
	}
	w.seq = next - 1
	return w, all, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// zeroFill writes zeros to f from from to size and syncs it.
func zeroFill(f *os.File, from, size int64) error {
	zeros := make([]byte, 1<<20)
	for off := from; off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	return f.Sync()
}

// parseWAL returns the records of one log file's current use: those from
// its start whose numbers follow each other. floor is the checkpoint's
// record number: a valid record found after the end with a number above
// both floor and the last one read means the end was damage, not the torn
// tail of the last write: the error comes with the records before it.
func parseWAL(data []byte, floor uint64) ([]walRecord, error) {
	var recs []walRecord
	off, last := 0, uint64(0)
	for {
		r, n, ok := walFrameAt(data, off)
		if !ok || (last != 0 && r.seq != last+1) {
			break
		}
		recs = append(recs, r)
		last = r.seq
		off += n
	}
	limit := max(last, floor)
	for p := off; p+walHeader <= len(data); p++ {
		if r, _, ok := walFrameAt(data, p); ok && r.seq > limit {
			return recs, fmt.Errorf("damaged log record at offset %d (record %d follows at offset %d)", off, r.seq, p)
		}
	}
	return recs, nil
}

// walFrameAt reads the record at offset p of data and its size, or
// reports that there is no valid record there.
func walFrameAt(data []byte, p int) (walRecord, int, bool) {
	if p+walHeader > len(data) {
		return walRecord{}, 0, false
	}
	h := data[p : p+walHeader]
	n := binary.BigEndian.Uint32(h[0:4])
	if n == 0 || uint64(n) > uint64(len(data)-p-walHeader) {
		return walRecord{}, 0, false
	}
	if crc32.Checksum(h[:16], crc32c) != binary.BigEndian.Uint32(h[16:20]) {
		return walRecord{}, 0, false
	}
	payload := data[p+walHeader : p+walHeader+int(n)]
	if crc32.Checksum(payload, crc32c) != binary.BigEndian.Uint32(h[12:16]) {
		return walRecord{}, 0, false
	}
	return walRecord{seq: binary.BigEndian.Uint64(h[4:12]), payload: payload}, walHeader + int(n), true
}

// errEmptyBatch is returned for a batch with nothing to log.
var errEmptyBatch = errors.New("htq: empty batch")

// append writes b as the next record with one write and one fdatasync.
// On error nothing advances: the next record goes to the same place
// with the same number.
func (w *walLog) append(b *batch) error {
	if cap(w.buf) < walHeader {
		w.buf = make([]byte, walHeader, 64<<10)
	}
	w.buf = w.buf[:walHeader]
	w.buf = appendBatch(w.buf, b)
	n := len(w.buf) - walHeader
	if n == 0 {
		return errEmptyBatch
	}
	if n > math.MaxUint32-walHeader {
		return fmt.Errorf("htq: a batch of %d bytes exceeds the log's 4 GiB record: %w", n, base.ErrInvalidArgument)
	}
	h := w.buf[:walHeader]
	binary.BigEndian.PutUint32(h[0:4], uint32(n))
	binary.BigEndian.PutUint64(h[4:12], w.seq+1)
	binary.BigEndian.PutUint32(h[12:16], crc32.Checksum(w.buf[walHeader:], crc32c))
	binary.BigEndian.PutUint32(h[16:20], crc32.Checksum(h[:16], crc32c))
	f := w.files[w.cur]
	if _, err := f.WriteAt(w.buf, w.off); err != nil {
		w.dirty = true
		return fmt.Errorf("writing log %s: %w", w.names[w.cur], err)
	}
	if err := fdatasync(f); err != nil {
		w.dirty = true
		return fmt.Errorf("syncing log %s: %w", w.names[w.cur], err)
	}
	w.dirty = false
	w.off += int64(len(w.buf))
	w.seq++
	w.top[w.cur] = w.seq
	return nil
}

// rotate switches to the other file when a checkpoint holds every record
// in it (numbers up to ckpt) and the last write did not fail.
func (w *walLog) rotate(ckpt uint64) {
	other := 1 - w.cur
	if w.dirty || w.top[other] > ckpt {
		return
	}
	w.cur, w.off, w.top[other] = other, 0, 0
}

func (w *walLog) close() error {
	var errs []error
	for _, f := range w.files {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}
