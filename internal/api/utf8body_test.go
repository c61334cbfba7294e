package api

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// chunkReader returns data in reads of the sizes given, cyclically.
type chunkReader struct {
	data     []byte
	sizes    []byte
	n        int
	lastZero bool
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	size := 1
	if len(c.sizes) > 0 {
		size = int(c.sizes[c.n%len(c.sizes)] % 8) // 0 is a read of nothing
		c.n++
	}
	if size == 0 && c.lastZero {
		size = 1 // never two empty reads in a row: io.ReadAll would spin
	}
	c.lastZero = size == 0
	size = min(size, len(p), len(c.data))
	copy(p, c.data[:size])
	c.data = c.data[size:]
	return size, nil
}

func (c *chunkReader) Close() error { return nil }

// firstInvalid is the offset of the first byte of data that is not UTF-8.
func firstInvalid(data []byte) int {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return -1
}

// checkUTF8Body reads data through utf8Body in reads of the given sizes:
// valid UTF-8 comes through unchanged, anything else fails with the
// offset of the first bad byte.
func checkUTF8Body(t *testing.T, data, sizes []byte) {
	t.Helper()
	b := &utf8Body{r: &chunkReader{data: data, sizes: sizes}}
	got, err := io.ReadAll(b)
	if utf8.Valid(data) {
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("valid %q (reads %v): got %q, %v", data, sizes, got, err)
		}
		return
	}
	want := fmt.Sprintf("at byte %d", firstInvalid(data))
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("invalid %q (reads %v): got %q, %v; want an error %s", data, sizes, got, err, want)
	}
	if !bytes.HasPrefix(data, got) {
		t.Fatalf("invalid %q: handed on %q", data, got)
	}
}

func TestUTF8Body(t *testing.T) {
	inputs := []string{"", "{}", "ü", "€uro", "a\U0001F600b", "\xff", "a\xc3", "\xc3(", "\xed\xa0\x80", "ab\xf0\x9f\x98", "\xf0\x9f\x98\x80\x80", "\x80"}
	for _, in := range inputs {
		for _, sizes := range [][]byte{nil, {1}, {2}, {3, 0, 1}, {7}} {
			checkUTF8Body(t, []byte(in), sizes)
		}
	}
}

// FuzzUTF8Body checks the streaming check against utf8.Valid for any body
// split into reads of any sizes.
func FuzzUTF8Body(f *testing.F) {
	f.Add([]byte("{\"a\":\"ü\"}"), []byte{1, 2})
	f.Add([]byte("a\xf0\x9f\x98"), []byte{2})
	f.Add([]byte("\xed\xa0\x80"), []byte{0, 1})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		checkUTF8Body(t, data, sizes)
	})
}
