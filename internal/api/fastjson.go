package api

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/htqueue/htq"
)

// The enqueue endpoints are the hot paths of htq serve. Their request
// bodies are read by a small scanner instead of encoding/json's reflection
// (fastSpec, fastBatch) and their answers written by appending bytes
// (appendEnqueued). The scanner only accepts what it fully understands: a
// body that is valid JSON (json.Valid) whose keys are the exact field
// names, each at most once, with plain values (strings without escapes,
// valid UTF-8, no nulls). Anything else, and every malformed body, goes to the
// encoding/json path (decodeJSON), so the errors and the corner cases
// (case-insensitive keys, escapes, duplicate keys, nulls) stay exactly
// those of encoding/json. The payload of a task is kept as a slice of the
// body, which is allocated afresh for each request.

// readBody reads the request body, at most MaxBodyBytes of it, into a
// slice of its own. On a read error (such as an *http.MaxBytesError) it
// returns what it read with the error.
func (h *handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	size := 512
	if n := r.ContentLength; n > 0 {
		size = int(min(n, h.opts.MaxBodyBytes)) + 1 // +1: room for the EOF read
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// errReader returns err on every read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// decodeBody decodes a body read by readBody (with its read error) into v
// the way decodeJSON does from the request.
func decodeBody(body []byte, readErr error, v any) error {
	var rd io.Reader = bytes.NewReader(body)
	if readErr != nil {
		rd = io.MultiReader(rd, errReader{readErr})
	}
	return decodeFrom(rd, v)
}

// decodeSpec reads the body of a single enqueue into spec.
func (h *handler) decodeSpec(w http.ResponseWriter, r *http.Request, spec *TaskSpec) error {
	if !scanEnqueueBodies {
		return h.decodeJSON(w, r, spec)
	}
	body, err := h.readBody(w, r)
	return specFromBody(body, err, spec)
}

// specFromBody decodes a body read by readBody (with its read error) into
// spec: by the scanner when it reads the whole body, else by
// encoding/json.
func specFromBody(body []byte, readErr error, spec *TaskSpec) error {
	if readErr == nil && json.Valid(body) {
		p := parser{b: body}
		if p.ws(); p.spec(spec) {
			return nil
		}
		*spec = TaskSpec{}
	}
	return decodeBody(body, readErr, spec)
}

// decodeBatch reads the body of a batch enqueue into req.
func (h *handler) decodeBatch(w http.ResponseWriter, r *http.Request, req *batchRequest) error {
	if !scanEnqueueBodies {
		return h.decodeJSON(w, r, req)
	}
	body, err := h.readBody(w, r)
	return batchFromBody(body, err, req)
}

// batchFromBody decodes a body read by readBody (with its read error) into
// req, as specFromBody.
func batchFromBody(body []byte, readErr error, req *batchRequest) error {
	if readErr == nil && json.Valid(body) {
		p := parser{b: body}
		if p.ws(); p.batch(req) {
			return nil
		}
		*req = batchRequest{}
	}
	return decodeBody(body, readErr, req)
}

// parser reads a body known to be valid JSON. Its methods return false
// for anything they leave to encoding/json.
type parser struct {
	b []byte
	i int
	// lastType is the type of the previous task, reused when the next
	// one has the same (a batch's tasks mostly do).
	lastType string
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space (0 at the end).
func (p *parser) peek() byte {
	p.ws()
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

// str reads a string without escapes and returns its contents. A string
// that is not valid UTF-8 is left to encoding/json, which replaces each
// bad byte with U+FFFD.
func (p *parser) str() ([]byte, bool) {
	if p.peek() != '"' {
		return nil, false
	}
	start := p.i + 1
	end := bytes.IndexByte(p.b[start:], '"')
	if end < 0 {
		return nil, false
	}
	s := p.b[start : start+end]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return nil, false
	}
	p.i = start + end + 1
	return s, true
}

// value skips one value and returns its bytes.
func (p *parser) value() []byte {
	p.ws()
	start := p.i
	depth := 0
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch c {
		case '"':
			p.skipString()
		case '{', '[':
			depth++
			p.i++
		case '}', ']':
			if depth == 0 {
				return p.b[start:p.i]
			}
			depth--
			p.i++
		case ',', ' ', '\t', '\n', '\r', ':':
			if depth == 0 {
				return p.b[start:p.i]
			}
			p.i++
		default:
			p.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return p.b[start:p.i]
		}
	}
	return p.b[start:p.i]
}

// skipString moves past the string that starts at p.i.
func (p *parser) skipString() {
	i := p.i + 1
	for {
		j := bytes.IndexByte(p.b[i:], '"')
		if j < 0 {
			p.i = len(p.b)
			return
		}
		i += j
		// The quote ends the string unless an odd number of
		// backslashes escapes it.
		k := i
		for k > p.i+1 && p.b[k-1] == '\\' {
			k--
		}
		i++
		if (i-1-k)%2 == 0 {
			p.i = i
			return
		}
	}
}

// open reads the '{' of an object.
func (p *parser) open() bool {
	if p.peek() != '{' {
		return false
	}
	p.i++
	return true
}

// key reads the next member's key and its ':', or the '}' that ends the
// object (then end is true). The key is as written (escapes make it
// fail).
func (p *parser) key(first bool) (key []byte, end, ok bool) {
	c := p.peek()
	if c == '}' {
		p.i++
		return nil, true, true
	}
	if !first {
		if c != ',' {
			return nil, false, false
		}
		p.i++
	}
	key, ok = p.str()
	if !ok || p.peek() != ':' {
		return nil, false, false
	}
	p.i++
	p.ws()
	return key, false, true
}

// isNull reports whether the next value is null.
func (p *parser) isNull() bool {
	return p.peek() == 'n'
}

// sub decodes the next value into v with encoding/json, unknown fields
// refused.
func (p *parser) sub(v any) bool {
	if p.isNull() {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(p.value()))
	dec.DisallowUnknownFields()
	return dec.Decode(v) == nil
}

// strField reads a string into dst, unless the field was seen already.
func (p *parser) strField(seen *int, bit int, dst *string) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	v, ok := p.str()
	if ok {
		*dst = string(v)
	}
	return ok
}

// once marks a field seen and reports whether it was not already.
func once(seen *int, bit int) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

// Bits of the TaskSpec fields seen, to leave duplicate keys to
// encoding/json.
const (
	fType = 1 << iota
	fPayload
	fPayloadBase64
	fURL
	fMethod
	fHeaders
	fBody
	fBodyBase64
	fTimeoutMS
	fVariable
	fOptions
)

// spec reads a TaskSpec object.
func (p *parser) spec(s *TaskSpec) bool {
	if !p.open() {
		return false
	}
	seen := 0
	for first := true; ; first = false {
		key, end, ok := p.key(first)
		if !ok {
			return false
		}
		if end {
			return true
		}
		switch string(key) {
		case "type":
			if !once(&seen, fType) {
				return false
			}
			v, ok := p.str()
			if !ok {
				return false
			}
			if string(v) != p.lastType {
				p.lastType = string(v)
			}
			s.Type = p.lastType
		case "payload":
			if !once(&seen, fPayload) || p.isNull() {
				return false
			}
			s.Payload = p.value()
		case "payload_base64":
			ok = p.strField(&seen, fPayloadBase64, &s.PayloadBase64)
		case "url":
			ok = p.strField(&seen, fURL, &s.URL)
		case "method":
			ok = p.strField(&seen, fMethod, &s.Method)
		case "body_base64":
			ok = p.strField(&seen, fBodyBase64, &s.BodyBase64)
		case "body":
			var b string
			if ok = p.strField(&seen, fBody, &b); ok {
				s.Body = &b
			}
		case "timeout_ms":
			if !once(&seen, fTimeoutMS) {
				return false
			}
			n, err := strconv.ParseInt(string(p.value()), 10, 64)
			s.TimeoutMS, ok = n, err == nil
		case "headers":
			ok = once(&seen, fHeaders) && p.sub(&s.Headers)
		case "variable":
			ok = once(&seen, fVariable) && p.sub(&s.Variable)
		case "options":
			ok = once(&seen, fOptions) && p.sub(&s.Options)
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
}

// batch reads a batchRequest object.
func (p *parser) batch(req *batchRequest) bool {
	if !p.open() {
		return false
	}
	seen := false
	start := 0
	for first := true; ; first = false {
		key, end, ok := p.key(first)
		if !ok {
			return false
		}
		if end {
			return true
		}
		if string(key) != "tasks" || seen || p.peek() != '[' {
			return false
		}
		seen = true
		p.i++
		req.Tasks = []TaskSpec{}
		for k := 0; p.peek() != ']'; k++ {
			if k > 0 {
				if p.peek() != ',' {
					return false
				}
				p.i++
			}
			if k == 1 {
				// Size the slice from the first task's length, so
				// that it is seldom grown.
				first := p.i - start
				req.Tasks = slices.Grow(req.Tasks, 2+(len(p.b)-p.i)/max(first, 1))
			}
			if k == 0 {
				start = p.i
			}
			req.Tasks = append(req.Tasks, TaskSpec{})
			if !p.spec(&req.Tasks[k]) {
				return false
			}
		}
		p.i++
	}
}

// appendString appends s as a JSON string, as encoding/json writes it.
func appendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// timeOK reports whether appendTime can write t (encoding/json refuses
// years outside 0-9999).
func timeOK(t *time.Time) bool {
	return t == nil || t.Year() >= 0 && t.Year() <= 9999
}

// appendEnqueued appends the JSON object of an enqueued task, as
// encoding/json writes an enqueueResponse (or a successful batchItem).
func appendEnqueued(dst []byte, r *enqueueResponse) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"queue":`...)
	dst = appendString(dst, r.Queue)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, r.Type)
	dst = append(dst, `,"state":`...)
	dst = appendString(dst, r.State)
	if r.NextProcessAt != nil {
		dst = append(dst, `,"next_process_at":"`...)
		dst = r.NextProcessAt.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

// writeBytes answers with status and the JSON in buf.
func writeBytes(w http.ResponseWriter, status int, buf []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = contentTypeJSON
	hdr["Content-Length"] = []string{strconv.Itoa(len(buf))}
	w.WriteHeader(status)
	_, _ = w.Write(buf)
}

var contentTypeJSON = []string{"application/json"}

// writeEnqueued answers an enqueue with r.
func writeEnqueued(w http.ResponseWriter, r *enqueueResponse) {
	if !timeOK(r.NextProcessAt) {
		writeJSON(w, http.StatusCreated, r)
		return
	}
	bp := outPool.Get().(*[]byte)
	b := appendEnqueued((*bp)[:0], r)
	b = append(b, '\n')
	*bp = b
	writeBytes(w, http.StatusCreated, b)
	putOut(bp)
}

// writeBatchOK answers a batch whose tasks were all stored, as
// encoding/json writes its batchResponse. It returns false, having
// written nothing, when it leaves the answer to encoding/json.
func writeBatchOK(w http.ResponseWriter, infos []*htq.TaskInfo) bool {
	bp := outPool.Get().(*[]byte)
	defer putOut(bp)
	b := (*bp)[:0]
	b = append(b, `{"enqueued":`...)
	b = strconv.AppendInt(b, int64(len(infos)), 10)
	b = append(b, `,"failed":0,"results":[`...)
	for i, info := range infos {
		if info == nil {
			return false
		}
		r := newEnqueueResponse(info)
		if !timeOK(r.NextProcessAt) {
			return false
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEnqueued(b, &r)
	}
	b = append(b, "]}\n"...)
	*bp = b
	writeBytes(w, http.StatusCreated, b)
	return true
}

// outPool holds the buffers of the answers appended by hand.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

func putOut(bp *[]byte) {
	if cap(*bp) <= 1<<20 {
		outPool.Put(bp)
	}
}
