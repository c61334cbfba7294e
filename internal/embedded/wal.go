package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"math/rand/v2"
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
// A record is a 28-byte header and the batch's encoding (walcodec.go):
//
//	length   uint32  of the payload (≥ 1)
//	salt     uint64  the log session's salt (see walSession)
//	seq      uint64  the record number, one more than the record before
//	crc      uint32  CRC-32C of the payload
//	hcrc     uint32  CRC-32C of the 24 bytes before it
//
// all big endian. The files are preallocated with zeros and reused in
// turn: one is written from its start only when every record it holds is
// in a checkpoint, so what follows its newest records is zeros, records
// of an earlier use of the file in this session (lower numbers, all in the
// checkpoint), or records of earlier sessions (another salt).
//
// Every Open starts a log session with a new random salt, recorded in the
// data file (meta "wal") in the synced transaction that also holds the
// replayed records, before the session writes its first record; a clean
// Close records salt 0 (nothing to replay) with its final checkpoint. A
// replay reads only frames that carry the recorded salt: a frame left by
// an earlier session, or bytes inside a payload that happen to (or were
// made to) look like a frame, end a file's records as a torn tail does,
// and cannot make Open fail. A damaged frame followed by a valid frame of
// the same session with a number a replay needs is corruption.

// WALFileNames are the log files inside a data directory, beside htq.db.
var WALFileNames = [2]string{"htq.wal.0", "htq.wal.1"}

const (
	walHeader = 28
	// walPrealloc is the size each log file is filled to with zeros when
	// created, so that appending does not change the file's size (which
	// would make every fdatasync write metadata too). A file grows past
	// it when checkpoints fall behind.
	walPrealloc = 4 << 20
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// walSession is the data file's record of the log session whose records
// may follow its checkpoint: the salt every record of the session
// carries (0: none, the store was closed cleanly) and the size the log
// files had been preallocated to when it began (a file found shorter was
// cut by hand).
type walSession struct {
	salt uint64
	size int64
}

func (s walSession) bytes() []byte {
	v := binary.BigEndian.AppendUint64(nil, s.salt)
	return binary.BigEndian.AppendUint64(v, uint64(s.size))
}

// newSalt returns a random salt for a log session, never 0.
func newSalt() uint64 {
	for {
		if s := rand.Uint64(); s != 0 {
			return s
		}
	}
}

// walLog is the log writer. Only the committer uses it (and Open and
// Close, when the committer is not running).
type walLog struct {
	files [2]*os.File
	names [2]string
	salt  uint64 // this session's salt, in every record's header
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

// readWAL reads the records of log session sess in the files of dir
// that are numbered above ckpt, in order. A salt of 0 has none. A torn or
// damaged last record ends a file (it was never acknowledged); a damaged
// record followed by a valid one that a replay needs, a gap in the
// numbers, or a log file missing or shorter than the session made it,
// fails with ErrCorrupt naming the file.
func readWAL(dir string, sess walSession, ckpt uint64) ([]walRecord, error) {
	if sess.salt == 0 {
		return nil, nil
	}
	var all []walRecord
	for _, name := range WALFileNames {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is missing, but the store was not closed cleanly and its last writes may be only there", ErrCorrupt, path)
		}
		if err != nil {
			return nil, fmt.Errorf("htq: reading log %s: %w", path, err)
		}
		if int64(len(data)) < sess.size {
			return nil, fmt.Errorf("%w: %s holds %d bytes, fewer than the %d it was given: it was cut after the store stopped, and its last writes with it", ErrCorrupt, path, len(data), sess.size)
		}
		recs, err := parseWAL(data, sess.salt, ckpt)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, path, err)
		}
		for _, r := range recs {
			if r.seq > ckpt {
				all = append(all, r)
			}
		}
	}
	slices.SortFunc(all, func(a, b walRecord) int { return cmpU64(a.seq, b.seq) })
	for i, r := range all {
		if want := ckpt + 1 + uint64(i); r.seq != want {
			return nil, fmt.Errorf("%w: %s: the log lacks record %d (found %d after the checkpoint at %d)", ErrCorrupt, filepath.Join(dir, WALFileNames[0]), want, r.seq, ckpt)
		}
	}
	return all, nil
}

// openWAL opens the two log files of dir for writing, creating them and
// zero-filling them to size when missing or shorter, for a session with
// salt whose first record is numbered seq+1 and goes to the start of the
// first file.
func openWAL(dir string, salt, seq uint64, size int64) (*walLog, error) {
	w := &walLog{salt: salt, seq: seq}
	created := false
	for i, name := range WALFileNames {
		path := filepath.Join(dir, name)
		w.names[i] = path
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			w.close()
			return nil, fmt.Errorf("htq: opening log %s: %w", path, err)
		}
		w.files[i] = f
		fi, err := f.Stat()
		if err != nil {
			w.close()
			return nil, fmt.Errorf("htq: opening log %s: %w", path, err)
		}
		if fi.Size() < size {
			created = true
			if err := zeroFill(f, fi.Size(), size); err != nil {
				w.close()
				return nil, fmt.Errorf("htq: preallocating log %s (%d bytes): %w", path, size, err)
			}
		}
		dropCache(f)
	}
	if created {
		if err := syncDir(dir); err != nil {
			w.close()
			return nil, err
		}
	}
	return w, nil
}

// legacyRecords reports whether a log file of the first format (a 20-byte
// header without a salt: length, number, payload CRC, header CRC) holds a
// record numbered above ckpt, among those from its start.
func legacyRecords(data []byte, ckpt uint64) bool {
	for p := 0; p+20 <= len(data); {
		h := data[p : p+20]
		n := int(binary.BigEndian.Uint32(h[0:4]))
		if n == 0 || n > len(data)-p-20 || crc32.Checksum(h[:16], crc32c) != binary.BigEndian.Uint32(h[16:20]) ||
			crc32.Checksum(data[p+20:p+20+n], crc32c) != binary.BigEndian.Uint32(h[12:16]) {
			return false
		}
		if binary.BigEndian.Uint64(h[4:12]) > ckpt {
			return true
		}
		p += 20 + n
	}
	return false
}

// checkLegacyWAL refuses a directory whose log, written in the first
// format, holds records its data file lacks: this build cannot replay
// them.
func checkLegacyWAL(dir string, ckpt uint64) error {
	for _, name := range WALFileNames {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("htq: reading log %s: %w", path, err)
		}
		if legacyRecords(data, ckpt) {
			return fmt.Errorf("%w: %s holds records in the log format of an earlier build that its data file lacks; open the directory once with that build and close it cleanly", ErrCorrupt, path)
		}
	}
	return nil
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

// parseWAL returns the records of one log file's current use in the
// session with salt: those from its start whose numbers follow each
// other. floor is the checkpoint's record number: a valid record of the
// session found after the end with a number above both floor and the
// last one read means the end was damage, not the torn tail of the last
// write: the error comes with the records before it. Frames of other
// sessions are not records.
func parseWAL(data []byte, salt, floor uint64) ([]walRecord, error) {
	var recs []walRecord
	off, last := 0, uint64(0)
	for {
		r, n, ok := walFrameAt(data, off, salt)
		if !ok || (last != 0 && r.seq != last+1) {
			break
		}
		recs = append(recs, r)
		last = r.seq
		off += n
	}
	limit := max(last, floor)
	for p := off; p+walHeader <= len(data); p++ {
		if r, _, ok := walFrameAt(data, p, salt); ok && r.seq > limit {
			return recs, fmt.Errorf("damaged log record at offset %d (record %d follows at offset %d)", off, r.seq, p)
		}
	}
	return recs, nil
}

// walFrameAt reads the record of the session with salt at offset p of
// data and its size, or reports that there is none there.
func walFrameAt(data []byte, p int, salt uint64) (walRecord, int, bool) {
	if p+walHeader > len(data) {
		return walRecord{}, 0, false
	}
	h := data[p : p+walHeader]
	if binary.BigEndian.Uint64(h[4:12]) != salt {
		return walRecord{}, 0, false
	}
	n := binary.BigEndian.Uint32(h[0:4])
	if n == 0 || uint64(n) > uint64(len(data)-p-walHeader) {
		return walRecord{}, 0, false
	}
	if crc32.Checksum(h[:24], crc32c) != binary.BigEndian.Uint32(h[24:28]) {
		return walRecord{}, 0, false
	}
	payload := data[p+walHeader : p+walHeader+int(n)]
	if crc32.Checksum(payload, crc32c) != binary.BigEndian.Uint32(h[20:24]) {
		return walRecord{}, 0, false
	}
	return walRecord{seq: binary.BigEndian.Uint64(h[12:20]), payload: payload}, walHeader + int(n), true
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
	putFrameHeader(w.buf, w.salt, w.seq+1)
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

// putFrameHeader fills the header at the start of frame, whose payload
// follows it, for the record numbered seq of the session with salt.
func putFrameHeader(frame []byte, salt, seq uint64) {
	h := frame[:walHeader]
	binary.BigEndian.PutUint32(h[0:4], uint32(len(frame)-walHeader))
	binary.BigEndian.PutUint64(h[4:12], salt)
	binary.BigEndian.PutUint64(h[12:20], seq)
	binary.BigEndian.PutUint32(h[20:24], crc32.Checksum(frame[walHeader:], crc32c))
	binary.BigEndian.PutUint32(h[24:28], crc32.Checksum(h[:24], crc32c))
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
