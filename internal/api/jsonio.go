package api

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// writeJSON answers with status and v as JSON, encoded into a pooled
// buffer so that the Content-Length is known and no allocation grows.
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer putBuf(buf)
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		fmt.Fprintf(buf, `{"error":{"code":%q,"message":%q}}`+"\n", codeInternal, "encode response: "+err.Error())
	}
	writeBody(w, status, buf.Bytes())
}

// writeBody answers with status and body, JSON, as writeJSON does.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = contentTypeJSON
	hdr["Content-Length"] = model.ContentLength(len(body))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// contentTypeJSON is the Content-Type of every JSON answer, one slice for
// all: an answer's header is only read once set (Add would append to a
// copy, its capacity being its length).
var contentTypeJSON = []string{"application/json"}

// decodeJSON reads the request body, at most MaxBodyBytes of it, as one
// JSON value into v. Unknown fields, trailing data, a wrong type and bad
// syntax are ErrInvalidArgument errors naming what is wrong; a body over
// the limit is an *http.MaxBytesError.
func (h *handler) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeFrom(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes), v)
}

// decodeBody reads the request body into v as decodeJSON does, first
// offering it, read whole into a pooled buffer, to fast: a reader of the
// body's common shapes that fills v and reports true, or reports false
// and leaves v as it was (model.DecodeSpec, model.DecodeSpecs), for
// encoding/json to read. Either way v, or the error, is what decodeJSON
// gives.
func (h *handler) decodeBody(w http.ResponseWriter, r *http.Request, v any, fast func([]byte) bool) error {
	buf := bufPool.Get().(*bytes.Buffer)
	defer putBuf(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)); err != nil {
		// Too large, or not UTF-8: the decoder meets the error where it
		// would have.
		return decodeFrom(io.MultiReader(bytes.NewReader(buf.Bytes()), errReader{err}), v)
	}
	if fast(buf.Bytes()) {
		return nil
	}
	return decodeFrom(bytes.NewReader(buf.Bytes()), v)
}

// errReader fails every Read with err.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// putBuf returns buf to bufPool unless it grew past 1 MiB.
func putBuf(buf *bytes.Buffer) {
	if buf.Cap() <= 1<<20 {
		bufPool.Put(buf)
	}
}

// decodeFrom reads one JSON value from rd into v, as decodeJSON.
func decodeFrom(rd io.Reader, v any) error {
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// One value only: anything but white space after it is an error.
	if _, err := dec.Token(); err != io.EOF {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) || errors.Is(err, base.ErrInvalidArgument) {
			return err // too large, or not UTF-8 (utf8Body)
		}
		return invalid("request body: unexpected data after the JSON value")
	}
	return nil
}

// jsonError turns a json decoding error into a clear ErrInvalidArgument.
func jsonError(err error) error {
	var (
		tooBig    *http.MaxBytesError
		syntax    *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		badTarget *json.InvalidUnmarshalError
	)
	switch {
	case errors.As(err, &tooBig):
		return err
	case errors.Is(err, io.EOF):
		return invalid("request body is empty; want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalid("request body: JSON ends too early")
	case errors.As(err, &syntax):
		return invalid(fmt.Sprintf("request body: bad JSON at byte %d: %v", syntax.Offset, err))
	case errors.As(err, &typeErr):
		return invalid("request body: " + model.TypeErrorText(typeErr))
	case errors.As(err, &badTarget):
		return err
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return invalid("request body: " + strings.TrimPrefix(err.Error(), "json: "))
	}
	var wrappedErr *wrapped
	if errors.As(err, &wrappedErr) || errors.Is(err, base.ErrInvalidArgument) {
		return err
	}
	return invalid("request body: " + err.Error())
}

// hasToken reports whether r carries an accepted bearer token: the
// configured one, or one of the stored set (apitoken), compared in
// constant time.
func (h *handler) hasToken(r *http.Request) bool {
	got, ok := bearer(r)
	if !ok {
		return false
	}
	if h.opts.Tokens != nil {
		return h.opts.Tokens.Accepts(r.Context(), got)
	}
	return subtle.ConstantTimeCompare([]byte(got), h.token) == 1
}

// auth lets a request through only with an accepted bearer token.
func (h *handler) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.hasToken(r) {
			h.writeError(w, r, fmt.Errorf("%w: missing or wrong bearer token (send \"Authorization: Bearer <token>\")", errUnauthorized))
			return
		}
		if r.Body != nil {
			r.Body = &utf8Body{r: r.Body}
		}
		next(w, r)
	})
}

// bearer returns the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(got), ok
}

// seconds converts a number of seconds to a duration, refusing NaN and
// values out of range.
func seconds(what string, s float64) (time.Duration, error) {
	if math.IsNaN(s) || s < 0 || s > math.MaxInt64/float64(time.Second) {
		return 0, invalid(fmt.Sprintf("%s %v is out of range", what, s))
	}
	return time.Duration(s * float64(time.Second)), nil
}

// rawJSON returns data as JSON: the bytes themselves when they are
// valid JSON in valid UTF-8, else nil with the bytes base64-encoded by the
// caller. (json.Valid alone takes invalid UTF-8 inside strings, which
// encoding/json would then copy into the answer as it is.)
func rawJSON(data []byte) (json.RawMessage, bool) { return model.RawJSON(data) }
