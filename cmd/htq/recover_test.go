package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/embedded"
)

// TestRecover damages a data file, sees Open refuse it naming the way
// back, runs `htq recover`, and opens the copy.
func TestRecover(t *testing.T) {
	src := filepath.Join(t.TempDir(), "data")
	st, err := htq.Open("file:" + src)
	if err != nil {
		t.Fatal(err)
	}
	c := htq.NewClient(st)
	for i := 0; i < 2000; i++ {
		if _, err := c.Enqueue(htq.NewTask("t", bytes.Repeat([]byte("x"), 100))); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	// Overwrite a run of pages in the middle of the file.
	file := filepath.Join(src, embedded.DataFileName)
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := f.Stat()
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xAB}, 3*4096), info.Size()/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = htq.Open("file:" + src)
	if !errors.Is(err, embedded.ErrCorrupt) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "htq recover") {
		t.Fatalf("Open of a damaged file = %v; want ErrCorrupt naming the file and htq recover", err)
	}

	dst := filepath.Join(t.TempDir(), "copy")
	var out, errOut bytes.Buffer
	if code := run([]string{"recover", src, dst}, &out, &errOut); code != 0 {
		t.Fatalf("htq recover exited %d: %s %s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "recovered ") {
		t.Fatalf("report: %q", out.String())
	}
	st, err = htq.Open("file:" + dst)
	if err != nil {
		t.Fatalf("open the recovered copy: %v", err)
	}
	defer st.Close()
	qi, err := htq.NewInspector(st).GetQueueInfo("default")
	if err != nil || qi.Pending == 0 || qi.Pending > 2000 {
		t.Fatalf("recovered queue: %+v, %v", qi, err)
	}
	t.Logf("%s; %d of 2000 tasks recovered", strings.TrimSpace(out.String()), qi.Pending)
}
