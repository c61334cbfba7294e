package model

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, byte for byte as
// encoding/json's Marshal writes it: '"', '\\' and the control characters
// escaped (\b, \f, \n, \r and \t by name, the others as \u00XX), '<',
// '>' and '&' as \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028
// and \u2029, and each byte that is not part of valid UTF-8 as \ufffd
// (FuzzAppendString compares the two).
func AppendString(dst []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		if plainJSONByte(s[i]) {
			j := i + 1
			for j < len(s) && plainJSONByte(s[j]) {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if c := s[i]; c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters, and < > &
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case r == '\u2028':
			dst = append(dst, `\u2028`...)
		case r == '\u2029':
			dst = append(dst, `\u2029`...)
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

// plainJSONByte reports whether c is printable ASCII that encoding/json
// writes as it is.
func plainJSONByte(c byte) bool {
	return c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendJSONTime appends t as time.Time's MarshalJSON writes it, and
// reports false for a time it would refuse or might write otherwise
// (a year outside 0-9999, a zone other than UTC).
func appendJSONTime(dst []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 || t.Location() != time.UTC {
		return dst, false
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), true
}

// Encode returns the task as JSON, the payload of its htq task:
// json.Marshal's bytes, written without its reflection in the common
// case (FuzzURLTaskEncode compares the two).
func (t *URLTask) Encode() ([]byte, error) {
	if t.Variable != nil || t.CallbackOf != nil {
		return t.marshal()
	}
	b := make([]byte, 0, 96+len(t.URL)+len(t.Body)+len(t.BodyBase64)+len(t.Callback)+len(t.FailureCallback))
	b = append(b, `{"url":`...)
	b = AppendString(b, t.URL)
	b = append(b, `,"method":`...)
	b = AppendString(b, t.Method)
	if len(t.Headers) > 0 {
		b = append(b, `,"headers":{`...)
		for i, k := range slices.Sorted(maps.Keys(t.Headers)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, k)
			b = append(b, ':')
			b = AppendString(b, t.Headers[k])
		}
		b = append(b, '}')
	}
	for _, f := range [...]struct{ key, v string }{{`,"body":`, t.Body}, {`,"body_base64":`, t.BodyBase64}} {
		if f.v != "" {
			b = append(b, f.key...)
			b = AppendString(b, f.v)
		}
	}
	if t.TimeoutMS != 0 {
		b = append(b, `,"timeout_ms":`...)
		b = strconv.AppendInt(b, t.TimeoutMS, 10)
	}
	for _, f := range [...]struct{ key, v string }{{`,"callback":`, t.Callback}, {`,"failure_callback":`, t.FailureCallback}} {
		if f.v != "" {
			b = append(b, f.key...)
			b = AppendString(b, f.v)
		}
	}
	if t.ProcessAt != nil {
		b = append(b, `,"process_at":`...)
		var ok bool
		if b, ok = appendJSONTime(b, *t.ProcessAt); !ok {
			return t.marshal()
		}
	}
	return append(b, '}'), nil
}

// marshal is Encode by json.Marshal.
func (t *URLTask) marshal() ([]byte, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("model: encode URL task: %w", err)
	}
	return b, nil
}

// contentLengths holds a Content-Length header value for each answer
// size below 1,024 bytes (every enqueue answer and HTQ reply but the
// longest), built once: an answer's header is only read once set, so the
// slices are shared by every answer.
var contentLengths = func() [1024][]string {
	var t [1024][]string
	for n := range t {
		t[n] = []string{strconv.Itoa(n)}
	}
	return t
}()

// ContentLength is the value of a Content-Length header for n bytes, to
// set as hdr["Content-Length"] and not modify: below 1,024 bytes a slice
// shared by every answer of that length (no allocation), above a new one.
func ContentLength(n int) []string {
	if n >= 0 && n < len(contentLengths) {
		return contentLengths[n]
	}
	return []string{strconv.Itoa(n)}
}
