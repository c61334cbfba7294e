// Command storebench measures the three embedded stores htq could build its
// file: backend on (bbolt, Pebble, SQLite through modernc.org/sqlite) for the
// figures that decide the choice (docs/adr/0002-embedded-store.md):
//
//   - durable writes per second from 1 and 16 goroutines, with group commit
//     (Pebble's own commit pipeline; for bbolt and SQLite a committer
//     goroutine that puts every request waiting at the moment of a commit
//     into that one transaction and fsync);
//   - disk growth when 1,000,000 keys pass through a steady set of 10,000
//     (insert the newest, delete the oldest, like a queue);
//   - reopen time of a store holding 1,000,000 keys, with and without a full
//     scan of them.
//
// It is its own module so that the library's go.mod never depends on the
// stores that lost. It prints one JSON line per figure.
//
//	go run . -store bbolt -test all
package main

import (
	"crypto/rand"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	bolt "go.etcd.io/bbolt"
	_ "modernc.org/sqlite"
)

// kv is the small surface every store offers here.
type kv interface {
	// write applies puts and deletes atomically; sync makes it durable
	// before returning.
	write(puts [][2][]byte, dels [][]byte, sync bool) error
	// scan reads every key and value and returns how many there were.
	scan() (int, error)
	close() error
}

var bucket = []byte("t")

type boltKV struct{ db *bolt.DB }

func openBolt(dir string) (kv, error) {
	db, err := bolt.Open(filepath.Join(dir, "data.db"), 0o600, &bolt.Options{FreelistType: bolt.FreelistMapType})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists(bucket); return err })
	return &boltKV{db}, err
}

func (b *boltKV) write(puts [][2][]byte, dels [][]byte, sync bool) error {
	b.db.NoSync = !sync
	return b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucket)
		for _, p := range puts {
			if err := bk.Put(p[0], p[1]); err != nil {
				return err
			}
		}
		for _, d := range dels {
			if err := bk.Delete(d); err != nil {
				return err
			}
		}
		return nil
	})
}

func (b *boltKV) scan() (int, error) {
	n := 0
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucket).ForEach(func(k, v []byte) error { n++; _ = v[len(v)-1]; return nil })
	})
	return n, err
}

func (b *boltKV) close() error { return b.db.Close() }

type pebbleKV struct{ db *pebble.DB }

func openPebble(dir string) (kv, error) {
	db, err := pebble.Open(dir, &pebble.Options{})
	return &pebbleKV{db}, err
}

func (p *pebbleKV) write(puts [][2][]byte, dels [][]byte, sync bool) error {
	b := p.db.NewBatch()
	for _, kv := range puts {
		_ = b.Set(kv[0], kv[1], nil)
	}
	for _, d := range dels {
		_ = b.Delete(d, nil)
	}
	o := pebble.NoSync
	if sync {
		o = pebble.Sync
	}
	return b.Commit(o)
}

func (p *pebbleKV) scan() (int, error) {
	it, err := p.db.NewIter(nil)
	if err != nil {
		return 0, err
	}
	n := 0
	for it.First(); it.Valid(); it.Next() {
		v := it.Value()
		_ = v[len(v)-1]
		n++
	}
	return n, it.Close()
}

func (p *pebbleKV) close() error { return p.db.Close() }

type sqliteKV struct{ db *sql.DB }

func openSQLite(dir string) (kv, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "data.db")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	_, err = db.Exec(`CREATE TABLE IF NOT EXISTS t (k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID`)
	return &sqliteKV{db}, err
}

func (s *sqliteKV) write(puts [][2][]byte, dels [][]byte, sync bool) error {
	mode := "FULL"
	if !sync {
		mode = "OFF"
	}
	if _, err := s.db.Exec("PRAGMA synchronous=" + mode); err != nil {
		return err
	}
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	for _, p := range puts {
		if _, err := tx.Exec(`INSERT OR REPLACE INTO t(k,v) VALUES(?,?)`, p[0], p[1]); err != nil {
			tx.Rollback()
			return err
		}
	}
	for _, d := range dels {
		if _, err := tx.Exec(`DELETE FROM t WHERE k=?`, d); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (s *sqliteKV) scan() (int, error) {
	rows, err := s.db.Query(`SELECT k, v FROM t`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var k, v []byte
		if err := rows.Scan(&k, &v); err != nil {
			return n, err
		}
		n++
	}
	return n, rows.Err()
}

func (s *sqliteKV) close() error { return s.db.Close() }

// walKV is a yardstick, not a store htq uses: bbolt behind a write-ahead
// log, to measure what one fsync per group commit (the log's) instead of
// bbolt's two would give on this disk. A synced write appends its puts to
// a preallocated log file (length, CRC-32C, records) and fdatasyncs it;
// the puts also go to a batch that a checkpointer goroutine writes to bbolt
// as one synced transaction every checkpointEvery (after which a real
// store would start the log over; this one wraps around). Recovery (replay
// of the log after the last checkpoint) is not written: the figure is the
// write path's cost.
type walKV struct {
	bolt    *boltKV
	log     *os.File
	off     int64
	buf     []byte
	mu      sync.Mutex // guards pending
	pending [][2][]byte
	stop    chan struct{}
	done    chan struct{}
}

const (
	walSize         = 64 << 20
	checkpointEvery = 50 * time.Millisecond
)

func openWAL(dir string) (kv, error) {
	b, err := openBolt(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "wal"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	// Written once and synced, so that an fdatasync of the log later
	// flushes data only (no size or extent change to journal).
	zero := make([]byte, 1<<20)
	for off := int64(0); off < walSize; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero, off); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	w := &walKV{bolt: b.(*boltKV), log: f, stop: make(chan struct{}), done: make(chan struct{})}
	go w.checkpoints()
	return w, nil
}

func (w *walKV) checkpoints() {
	defer close(w.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		w.mu.Lock()
		puts := w.pending
		w.pending = nil
		w.mu.Unlock()
		if len(puts) > 0 {
			check(w.bolt.write(puts, nil, true))
		}
	}
}

func (w *walKV) write(puts [][2][]byte, dels [][]byte, sync bool) error {
	if len(dels) > 0 || !sync {
		return w.bolt.write(puts, dels, sync)
	}
	w.buf = append(w.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0)
	for _, p := range puts {
		w.buf = binary.AppendUvarint(w.buf, uint64(len(p[0])))
		w.buf = append(w.buf, p[0]...)
		w.buf = binary.AppendUvarint(w.buf, uint64(len(p[1])))
		w.buf = append(w.buf, p[1]...)
	}
	binary.BigEndian.PutUint32(w.buf, uint32(len(w.buf)-8))
	binary.BigEndian.PutUint32(w.buf[4:], crc32.Checksum(w.buf[8:], crc32.MakeTable(crc32.Castagnoli)))
	if w.off+int64(len(w.buf)) > walSize {
		w.off = 0
	}
	if _, err := w.log.WriteAt(w.buf, w.off); err != nil {
		return err
	}
	w.off += int64(len(w.buf))
	if err := syscall.Fdatasync(int(w.log.Fd())); err != nil {
		return err
	}
	w.mu.Lock()
	w.pending = append(w.pending, puts...)
	w.mu.Unlock()
	return nil
}

func (w *walKV) scan() (int, error) { return w.bolt.scan() }

func (w *walKV) close() error {
	close(w.stop)
	<-w.done
	return errors.Join(w.log.Close(), w.bolt.close())
}

func open(store, dir string) (kv, error) {
	switch store {
	case "bbolt":
		return openBolt(dir)
	case "bbolt-wal":
		return openWAL(dir)
	case "pebble":
		return openPebble(dir)
	case "sqlite":
		return openSQLite(dir)
	}
	return nil, fmt.Errorf("unknown store %q", store)
}

// committer is group commit over a store whose transactions are one at a
// time: each write waits in a queue; one goroutine takes everything queued
// when it is free, writes it in one synced transaction and answers all.
type committer struct {
	db  kv
	req chan commitReq
}

type commitReq struct {
	kv   [2][]byte
	done chan error
}

func newCommitter(db kv) *committer {
	c := &committer{db: db, req: make(chan commitReq, 4096)}
	go c.loop()
	return c
}

func (c *committer) loop() {
	for r := range c.req {
		batch := []commitReq{r}
	drain:
		for len(batch) < 1000 {
			select {
			case r, ok := <-c.req:
				if !ok {
					break drain
				}
				batch = append(batch, r)
			default:
				break drain
			}
		}
		puts := make([][2][]byte, len(batch))
		for i, r := range batch {
			puts[i] = r.kv
		}
		err := c.db.write(puts, nil, true)
		for _, r := range batch {
			r.done <- err
		}
	}
}

func (c *committer) put(k, v []byte) error {
	done := make(chan error, 1)
	c.req <- commitReq{kv: [2][]byte{k, v}, done: done}
	return <-done
}

var (
	seqKeys = flag.Bool("seq", false, "keys in insertion order (a sequence number) instead of random IDs")
	seq     atomic.Uint64
)

// key returns a new key: like a task record keyed by queue and random ID,
// or with -seq by queue and a sequence number.
func key() []byte {
	if *seqKeys {
		k := []byte("default\x00........")
		binary.BigEndian.PutUint64(k[8:], seq.Add(1))
		return k
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return []byte("default\x00" + hex.EncodeToString(b[:]))
}

// newValue stands for a task record with a 100-byte payload: 250 random
// bytes, fresh for each key, so that no store gains from compressing it.
func newValue() []byte {
	b := make([]byte, 250)
	_, _ = rand.Read(b)
	return b
}

func emit(m map[string]any) {
	b, _ := json.Marshal(m)
	fmt.Println(string(b))
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func durable(store string, g int, d time.Duration) {
	dir, _ := os.MkdirTemp(*scratch, "sb")
	defer os.RemoveAll(dir)
	db, err := open(store, dir)
	check(err)
	defer db.close()
	put := func(k, v []byte) error { return db.write([][2][]byte{{k, v}}, nil, true) }
	mode := "pebble.Sync (commit pipeline)"
	if store != "pebble" {
		c := newCommitter(db)
		defer close(c.req)
		put = c.put
		mode = "committer goroutine, one tx per group"
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	start := time.Now()
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				check(put(key(), newValue()))
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	emit(map[string]any{"seq_keys": *seqKeys, "store": store, "test": "durable", "goroutines": g, "writes_per_s": int(float64(n.Load()) / el.Seconds()), "mode": mode})
}

func churn(store string, total, steady, batch int) {
	dir, _ := os.MkdirTemp(*scratch, "sb")
	defer os.RemoveAll(dir)
	db, err := open(store, dir)
	check(err)
	var fifo [][]byte
	for len(fifo) < steady {
		var puts [][2][]byte
		for i := 0; i < batch; i++ {
			k := key()
			fifo = append(fifo, k)
			puts = append(puts, [2][]byte{k, newValue()})
		}
		check(db.write(puts, nil, true))
	}
	base := dirSize(dir)
	start := time.Now()
	sizes := []int64{}
	for done := 0; done < total; done += batch {
		var puts [][2][]byte
		for i := 0; i < batch; i++ {
			k := key()
			fifo = append(fifo, k)
			puts = append(puts, [2][]byte{k, newValue()})
		}
		dels := fifo[:batch]
		fifo = fifo[batch:]
		check(db.write(puts, dels, true))
		if (done+batch)%(total/4) == 0 {
			sizes = append(sizes, dirSize(dir))
		}
	}
	el := time.Since(start)
	check(db.close())
	after := dirSize(dir)
	emit(map[string]any{"seq_keys": *seqKeys, "store": store, "test": "churn", "steady_keys": steady, "passed": total, "batch": batch,
		"bytes_at_steady": base, "bytes_each_quarter": sizes, "bytes_after_close": after,
		"growth_ratio": float64(after) / float64(base), "seconds": el.Seconds()})
}

func reopen(store string, n int) {
	dir, _ := os.MkdirTemp(*scratch, "sb")
	defer os.RemoveAll(dir)
	db, err := open(store, dir)
	check(err)
	for i := 0; i < n; i += 10000 {
		puts := make([][2][]byte, 0, 10000)
		for j := 0; j < 10000; j++ {
			puts = append(puts, [2][]byte{key(), newValue()})
		}
		check(db.write(puts, nil, i+10000 >= n))
	}
	check(db.close())
	size := dirSize(dir)
	t0 := time.Now()
	db, err = open(store, dir)
	check(err)
	openT := time.Since(t0)
	got, err := db.scan()
	check(err)
	scanT := time.Since(t0) - openT
	check(db.close())
	if got != n {
		check(fmt.Errorf("scan found %d keys, want %d", got, n))
	}
	emit(map[string]any{"seq_keys": *seqKeys, "store": store, "test": "reopen", "keys": n, "bytes": size, "bytes_per_key": size / int64(n),
		"open_ms": openT.Milliseconds(), "scan_ms": scanT.Milliseconds()})
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

var scratch = flag.String("dir", "", "scratch directory (default: the system temp dir)")

func main() {
	store := flag.String("store", "bbolt", "bbolt|pebble|sqlite|bbolt-wal (a yardstick: bbolt behind a write-ahead log, see walKV)")
	test := flag.String("test", "all", "durable|churn|reopen|all")
	d := flag.Duration("d", 3*time.Second, "duration of each durable run")
	n := flag.Int("n", 1_000_000, "keys for churn and reopen")
	batch := flag.Int("batch", 100, "keys inserted and deleted per churn transaction")
	flag.Parse()
	switch *test {
	case "durable":
	case "churn", "reopen", "all":
	default:
		check(errors.New("unknown -test"))
	}
	if *test == "durable" || *test == "all" {
		durable(*store, 1, *d)
		durable(*store, 16, *d)
	}
	if *test == "churn" || *test == "all" {
		churn(*store, *n, 10_000, *batch)
	}
	if *test == "reopen" || *test == "all" {
		reopen(*store, *n)
	}
}
