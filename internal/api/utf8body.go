package api

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// utf8Body is a request body of the native API that must be UTF-8, as
// JSON text must (RFC 8259). A Read that meets bytes that are not UTF-8
// fails with an ErrInvalidArgument error naming their offset (and hands
// on none of that read's bytes), so no decoder reading through it can
// succeed on such a body. Every JSON decoder of the API
// (encoding/json and the enqueue scanner) reads through it, so no invalid
// UTF-8 reaches the storage: encoding/json would keep it inside a
// json.RawMessage (a payload, a result) and every answer echoing it would
// not be valid JSON.
//
// The check streams: a rune split between two reads is kept (at most
// three bytes) and completed by the next.
type utf8Body struct {
	r io.ReadCloser
	// off is the offset of the first byte not yet checked.
	off int64
	// tail holds the first bytes of a rune the last read split.
	tail  [utf8.UTFMax]byte
	ntail int
}

// Read reads from the body and checks what it read.
func (b *utf8Body) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if bad, ok := b.check(p[:n]); !ok {
		return 0, invalid(fmt.Sprintf("request body: invalid UTF-8 at byte %d; JSON text must be UTF-8 (send binary data as base64: payload_base64, body_base64, result_base64)", bad))
	}
	if err == io.EOF && b.ntail > 0 {
		return 0, invalid(fmt.Sprintf("request body: invalid UTF-8 at byte %d (the body ends inside a character)", b.off))
	}
	return n, err
}

// Close closes the body.
func (b *utf8Body) Close() error { return b.r.Close() }

// check checks chunk, the bytes that follow the ones checked so far. It
// returns false and the offset of the first invalid byte when there is
// one.
func (b *utf8Body) check(chunk []byte) (int64, bool) {
	start := b.off // offset of chunk[0] minus the kept tail
	i := 0
	if b.ntail > 0 {
		// Complete the rune the last read split.
		var buf [2 * utf8.UTFMax]byte
		k := copy(buf[:], b.tail[:b.ntail])
		k += copy(buf[k:], chunk[:min(len(chunk), utf8.UTFMax-b.ntail)])
		if !utf8.FullRune(buf[:k]) {
			// Still split: all of chunk (fewer bytes than the rune
			// needs) joins the tail.
			b.ntail = copy(b.tail[:], buf[:k])
			return 0, true
		}
		r, size := utf8.DecodeRune(buf[:k])
		if r == utf8.RuneError && size <= 1 {
			return start, false
		}
		i = size - b.ntail
		b.off += int64(size)
		b.ntail = 0
	}
	rest := chunk[i:]
	// Keep an incomplete rune at the end for the next read.
	end := len(rest)
	for j := len(rest) - 1; j >= 0 && j >= len(rest)-utf8.UTFMax; j-- {
		if !utf8.RuneStart(rest[j]) {
			continue
		}
		if !utf8.FullRune(rest[j:]) {
			end = j
		}
		break
	}
	if !utf8.Valid(rest[:end]) {
		off := b.off
		for k := 0; k < end; {
			r, size := utf8.DecodeRune(rest[k:end])
			if r == utf8.RuneError && size <= 1 {
				return off + int64(k), false
			}
			k += size
		}
	}
	b.off += int64(end)
	b.ntail = copy(b.tail[:], rest[end:])
	return 0, true
}
