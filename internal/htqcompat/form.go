package htqcompat

import (
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
)

// HTQ's clients (PHP's curl, Node's form-data, Go's multipart.Writer) send
// addTask as multipart/form-data, and mime/multipart's ReadForm, general
// as it must be (part headers as MIME headers, parameters as RFC 2045
// and 2231 say, a map or two for each part, file parts spilled to disk),
// cost more CPU than all the rest of the request. Most such bodies are
// in one plain shape, which simpleForm reads in a single pass over the
// body; any other body, and any body simpleForm is not sure of, goes to
// Request.ParseMultipartForm as before, which then reads exactly the bytes
// it would have read. So every body gets the form, or the error, that
// ParseMultipartForm gives it (FuzzSimpleForm checks this against it).

// maxSimpleForm is the largest body simpleForm reads (larger ones go to
// ParseMultipartForm); maxSimpleParts the most parts it reads, far below
// ReadForm's own limit (1000 parts).
const (
	maxSimpleForm  = 64 << 10
	maxSimpleParts = 100
)

// simpleFormHeader is the one header line of a part in the plain shape,
// up to the part's name.
const simpleFormHeader = `Content-Disposition: form-data; name="`

var formBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// simpleFormOK tells whether simpleForm may be used at all: not when
// GODEBUG changes mime/multipart's limits (multipartmaxparts,
// multipartmaxheaders), which it does not follow.
var simpleFormOK = sync.OnceValue(func() bool { return !strings.Contains(os.Getenv("GODEBUG"), "multipart") })

// simpleForm returns the fields of r's multipart/form-data body, whose
// Content-Type parsed without error with this boundary, when the body is
// in the plain shape: a known length of at most maxSimpleForm and maxBody
// bytes, and
//
//	--BOUNDARY\r\n
//	Content-Disposition: form-data; name="NAME"\r\n
//	\r\n
//	VALUE\r\n
//	--BOUNDARY\r\n
//	… (at most maxSimpleParts parts)
//	--BOUNDARY--[\r\n]
//
// with a boundary of RFC 2046's characters other than space, names of
// printable ASCII other than '"' and '\', and values that neither start
// with --BOUNDARY nor hold \r\n--BOUNDARY (in such a shape every reader
// agrees on the fields). Otherwise it returns false and leaves r.Body such
// that it reads the same bytes, then the same end or error, as it would
// have.
func simpleForm(r *http.Request, boundary string, maxBody int64) (url.Values, bool) {
	if !simpleFormOK() || r.URL.RawQuery != "" || r.ContentLength < 0 || r.ContentLength > min(maxSimpleForm, maxBody) || !simpleBoundary(boundary) {
		// A query is parsed (and may fail) by ParseMultipartForm.
		return nil, false
	}
	bp := formBufs.Get().(*[]byte)
	buf := (*bp)[:0]
	if int64(cap(buf)) < r.ContentLength+1 {
		buf = make([]byte, 0, r.ContentLength+1)
	}
	// Read the whole body, and one byte more to see it end.
	n, err := io.ReadFull(r.Body, buf[:r.ContentLength+1])
	body := string(buf[:n])
	*bp = buf
	formBufs.Put(bp)
	if err == io.ErrUnexpectedEOF && int64(n) == r.ContentLength {
		if vals, ok := parseSimpleForm(body, boundary); ok {
			return vals, true
		}
	}
	// Not in the plain shape, longer or shorter than said, or a failed
	// read: the standard parser reads what was read, then the rest.
	r.Body = replay(body, r.Body)
	return nil, false
}

// formMediaType is mime.ParseMediaType of a form's Content-Type, whose
// media type, boundary parameter and error it returns, without the map of
// parameters for the Content-Type HTQ's clients send:
// "multipart/form-data; boundary=X" with X of characters that need no
// quoting.
func formMediaType(ct string) (mediaType, boundary string, err error) {
	if b, ok := strings.CutPrefix(ct, "multipart/form-data; boundary="); ok && len(b) <= 70 && plainToken(b) {
		return "multipart/form-data", b, nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	return mt, params["boundary"], err
}

// plainToken reports whether s is made of letters, digits and '+-._,
// characters of both an RFC 2045 token and an RFC 2046 boundary.
func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		if !plainTokenByte[s[i]] {
			return false
		}
	}
	return s != ""
}

// byteSet is the set of the ASCII letters, digits and the bytes of
// extra.
func byteSet(extra string) (set [256]bool) {
	for c := range set {
		set[c] = '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte(extra, byte(c)) >= 0
	}
	return set
}

// plainTokenByte and boundaryByte are the bytes of plainToken and of
// simpleBoundary, as tables: a boundary is checked on every HTQ request.
var (
	plainTokenByte = byteSet("'+-._")
	boundaryByte   = byteSet("'()+_,-./:=?")
)

// replay is a body that reads data, then what is left of body.
func replay(data string, body io.ReadCloser) io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(strings.NewReader(data), body), body}
}

// simpleBoundary reports whether b is 1 to 70 of RFC 2046's boundary
// characters, space excluded.
func simpleBoundary(b string) bool {
	if b == "" || len(b) > 70 {
		return false
	}
	for i := 0; i < len(b); i++ {
		if !boundaryByte[b[i]] {
			return false
		}
	}
	return true
}

// parseSimpleForm reads body in the plain shape simpleForm describes; ok
// is false for any other body. The values are parts of body.
func parseSimpleForm(body, boundary string) (url.Values, bool) {
	nlDash := "\r\n--" + boundary
	dash := nlDash[2:]
	rest, ok := strings.CutPrefix(body, dash)
	if ok {
		rest, ok = strings.CutPrefix(rest, "\r\n")
	}
	if !ok {
		return nil, false
	}
	vals := make(url.Values, 8)
	// Each name's values are a slice of one array (most names have one).
	values := make([]string, 0, 8)
	for range maxSimpleParts {
		if rest, ok = strings.CutPrefix(rest, simpleFormHeader); !ok {
			return nil, false
		}
		end := strings.IndexByte(rest, '"')
		if end <= 0 {
			return nil, false
		}
		name := rest[:end]
		for i := 0; i < len(name); i++ {
			if c := name[i]; c < 0x20 || c > 0x7e || c == '\\' {
				return nil, false
			}
		}
		if rest, ok = strings.CutPrefix(rest[end+1:], "\r\n\r\n"); !ok || strings.HasPrefix(rest, dash) {
			return nil, false
		}
		i := strings.Index(rest, nlDash)
		if i < 0 {
			return nil, false
		}
		if vs, seen := vals[name]; seen {
			vals[name] = append(vs, rest[:i])
		} else {
			values = append(values, rest[:i])
			vals[name] = values[len(values)-1 : len(values) : len(values)]
		}
		rest = rest[i+len(nlDash):]
		switch rest {
		case "--", "--\r\n":
			return vals, true
		}
		if rest, ok = strings.CutPrefix(rest, "\r\n"); !ok {
			return nil, false
		}
	}
	return nil, false
}
