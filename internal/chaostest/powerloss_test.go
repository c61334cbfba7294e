package chaostest

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// A made-up strace output of one process writing a 8-byte file: two
// writes synced, a third unsynced, a fourth the kill interrupted (its
// "resumed" line says "= ?"), with history lines between.
const straceOut = `10 pwrite64(9</d/htq.db>, "abcd", 4, 0) = 4
 | 00000  61 62 63 64                                       abcd             |
10 fdatasync(9</d/htq.db>) = 0
10 write(5</d/h.log>, "1800000000000000000 ack t1 c0 0\n", 32) = 32
 | 00000  31 38 30 30 30 30 30 30  30 30 30 30 30 30 30 30  1800000000000000 |
 | 00010  30 30 30 20 61 63 6b 20  74 31 20 63 30 20 30 0a  000 ack t1 c0 0. |
11 pwrite64(9</d/htq.db>, "efgh", 4, 4 <unfinished ...>
10 write(2</d/stderr>, "x", 1) = 1
11 <... pwrite64 resumed>) = 4
 | 00000  65 66 67 68                                       efgh             |
12 pwrite64(9</d/htq.db>, "EFGH", 4, 4 <unfinished ...>
12 <... pwrite64 resumed>) = ?
12 +++ killed by SIGKILL +++
`

func TestParseStrace(t *testing.T) {
	tr, err := ParseStrace(strings.NewReader(straceOut), "/d/htq.db", "/d/h.log")
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Unmodelled) > 0 {
		t.Fatalf("unmodelled: %v", tr.Unmodelled)
	}
	if tr.Ops() != 2 || tr.Syncs() != 1 || tr.Unfinished() != 1 {
		t.Fatalf("ops %d, syncs %d, unfinished %d; want 2, 1, 1", tr.Ops(), tr.Syncs(), tr.Unfinished())
	}
	// The killed write may or may not have reached the file (strace
	// never shows its data, so its range may hold anything); the rest
	// must be what the completed writes put there.
	for _, final := range []string{"abcdefgh", "abcdEFGH"} {
		if !tr.Equal(nil, []byte(final)) {
			t.Errorf("Equal(%q) = false; the interrupted write may have been applied or not", final)
		}
	}
	if tr.Equal(nil, []byte("abxdefgh")) {
		t.Error(`Equal("abxdefgh") = true; no write put that there`)
	}
	evs, err := tr.Events(tr.End())
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Kind != Ack || evs[0].ID != "t1" {
		t.Fatalf("history events %+v; want the one ack of t1", evs)
	}
	// A power loss after the end keeps the synced write; the unsynced one
	// is kept or dropped, never torn (one sector).
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		img, st := tr.Image(nil, tr.End(), rng)
		if st.Durable != 1 || st.Unsynced != 1 || st.Torn != 0 {
			t.Fatalf("image stats %+v", st)
		}
		if s := string(img); s != "abcd" && s != "abcdefgh" {
			t.Fatalf("image %q; want abcd or abcdefgh", s)
		}
	}
}
