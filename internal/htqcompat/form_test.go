package htqcompat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// formRequest is a POST of body as multipart/form-data with boundary b.
func formRequest(body []byte, b, query string, length int64) *http.Request {
	r := httptest.NewRequest("POST", "/api/addTask"+query, bytes.NewReader(body))
	r.Header.Set("Content-Type", `multipart/form-data; boundary="`+b+`"`)
	r.ContentLength = length
	return r
}

// stdForm is what ParseMultipartForm makes of r: the form, or the
// error's text.
func stdForm(r *http.Request, max int64) (map[string][]string, string) {
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, max)
	if err := r.ParseMultipartForm(max); err != nil {
		return nil, err.Error()
	}
	defer r.MultipartForm.RemoveAll()
	return r.PostForm, ""
}

// checkSimpleForm checks simpleForm on body against ParseMultipartForm:
// when it reads a form, the same form as ParseMultipartForm; when it
// does not, ParseMultipartForm reading after it gets what it gets from
// the untouched body. It returns whether simpleForm read the form.
func checkSimpleForm(t *testing.T, body []byte, b, query string, length, max int64) bool {
	t.Helper()
	want, wantErr := stdForm(formRequest(body, b, query, length), max)
	r := formRequest(body, b, query, length)
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, max)
	got, ok := simpleForm(r, b, max)
	if ok {
		if wantErr != "" || !reflect.DeepEqual(map[string][]string(got), want) {
			t.Fatalf("simpleForm(%q) = %q, ParseMultipartForm: %q, %s", body, got, want, wantErr)
		}
		return true
	}
	after, afterErr := stdForm(r, max)
	if afterErr != wantErr || !reflect.DeepEqual(after, want) {
		t.Fatalf("%q: after simpleForm declined, ParseMultipartForm gives %q %s, want %q %s", body, after, afterErr, want, wantErr)
	}
	return false
}

// writeForm is fields as multipart.Writer (as HTQ's clients) writes them.
func writeForm(b string, fields ...string) []byte {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.SetBoundary(b); err != nil {
		panic(err)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		_ = mw.WriteField(fields[i], fields[i+1])
	}
	mw.Close()
	return buf.Bytes()
}

// The forms HTQ's clients send take the fast path and read as
// ParseMultipartForm reads them; the rest is left to ParseMultipartForm,
// which then answers as it always did.
func TestSimpleForm(t *testing.T) {
	const b = "------------------------d74496d66958873e"
	std := writeForm(b, "app_key", "key", "app_token", "tok", "queue_name", "q", "url", "http://example.com/x?a=1&b=2",
		"method", "POST", "header", `{"X":"1"}`, "data", "{\"a\":\"é\\r\\n\"}", "execute_time", "2030-01-02 03:04:05", "data", "")
	for _, tc := range []struct {
		name   string
		body   []byte
		query  string
		length int64
		max    int64
		simple bool
	}{
		{"multipart.Writer", std, "", int64(len(std)), 4 << 20, true},
		{"no CRLF at the end", bytes.TrimSuffix(std, []byte("\r\n")), "", int64(len(std) - 2), 4 << 20, true},
		{"values with CR LF and the boundary inside", writeForm(b, "a", "x\r\n--"+b+"X", "b", "\r\n\r\n", "c", "--", "d", "--"+b+"-"), "", -2, 4 << 20, false},
		{"empty and repeated", writeForm(b, "a", "", "a", "2", "a", "3"), "", -2, 4 << 20, true},
		{"a query", std, "?x=%zz", int64(len(std)), 4 << 20, false},
		{"unknown length", std, "", -1, 4 << 20, false},
		{"shorter than said", std, "", int64(len(std) + 5), 4 << 20, false},
		{"longer than said", std, "", int64(len(std) - 5), 4 << 20, false},
		{"over the limit", std, "", int64(len(std)), 100, false},
		{"a preamble", append([]byte("hello\r\n"), std...), "", -2, 4 << 20, false},
		{"an epilogue", append(bytes.Clone(std), "bye"...), "", -2, 4 << 20, false},
		{"LF line ends", bytes.ReplaceAll(std, []byte("\r\n"), []byte("\n")), "", -2, 4 << 20, false},
		{"a file part", []byte("--" + b + "\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a.txt\"\r\n\r\nx\r\n--" + b + "--\r\n"), "", -2, 4 << 20, false},
		{"a part header more", []byte("--" + b + "\r\nContent-Disposition: form-data; name=\"f\"\r\nContent-Type: text/plain\r\n\r\nx\r\n--" + b + "--\r\n"), "", -2, 4 << 20, false},
		{"quoted-printable", []byte("--" + b + "\r\nContent-Disposition: form-data; name=\"f\"\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\na=3Db\r\n--" + b + "--\r\n"), "", -2, 4 << 20, false},
		{"an escaped name", []byte("--" + b + "\r\nContent-Disposition: form-data; name=\"a\\\"b\"\r\n\r\nx\r\n--" + b + "--\r\n"), "", -2, 4 << 20, false},
		{"a value starting with the boundary", []byte("--" + b + "\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n--" + b + "\r\n--" + b + "--\r\n"), "", -2, 4 << 20, false},
		{"no final boundary", bytes.TrimSuffix(std, []byte("--\r\n")), "", -2, 4 << 20, false},
		{"space after the boundary", []byte("--" + b + " \r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n--" + b + "--\r\n"), "", -2, 4 << 20, false},
		{"empty", nil, "", 0, 4 << 20, false},
		{"no first boundary", bytes.TrimPrefix(std, []byte("--"+b)), "", -2, 4 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			length := tc.length
			if length == -2 {
				length = int64(len(tc.body))
			}
			if got := checkSimpleForm(t, tc.body, b, tc.query, length, tc.max); got != tc.simple {
				t.Errorf("fast path taken: %v, want %v", got, tc.simple)
			}
		})
	}
	// A body too long to be read at once, and a boundary simpleForm does
	// not take, are left untouched.
	if checkSimpleForm(t, writeForm(b, "a", strings.Repeat("x", maxSimpleForm)), b, "", -1, 4<<20) {
		t.Error("a body over maxSimpleForm took the fast path")
	}
	if checkSimpleForm(t, writeForm("a b", "a", "1"), "a b", "", int64(len(writeForm("a b", "a", "1"))), 4<<20) {
		t.Error("a boundary with a space took the fast path")
	}
}

// More parts than simpleForm reads go to ParseMultipartForm, which reads
// up to 1000.
func TestSimpleFormParts(t *testing.T) {
	const b = "B"
	var fields []string
	for range maxSimpleParts + 1 {
		fields = append(fields, "a", "1")
	}
	body := writeForm(b, fields...)
	if checkSimpleForm(t, body, b, "", int64(len(body)), 4<<20) {
		t.Errorf("%d parts took the fast path", maxSimpleParts+1)
	}
	body = writeForm(b, fields[:2*maxSimpleParts]...)
	if !checkSimpleForm(t, body, b, "", int64(len(body)), 4<<20) {
		t.Errorf("%d parts did not take the fast path", maxSimpleParts)
	}
}

// A read that fails is seen by ParseMultipartForm as it would have been.
func TestSimpleFormReadError(t *testing.T) {
	const b = "B"
	body := writeForm(b, "a", "1")
	boom := errors.New("connection reset")
	failing := func() *http.Request {
		r := formRequest(nil, b, "", int64(len(body)))
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:10]), iotestErr{boom}))
		return r
	}
	_, want := stdForm(failing(), 4<<20)
	r := failing()
	if _, ok := simpleForm(r, b, 4<<20); ok {
		t.Fatal("a failed read took the fast path")
	}
	if _, got := stdForm(r, 4<<20); got != want || want == "" {
		t.Fatalf("ParseMultipartForm after simpleForm: %q, untouched: %q", got, want)
	}
}

type iotestErr struct{ err error }

func (e iotestErr) Read([]byte) (int, error) { return 0, e.err }

// FuzzSimpleForm checks simpleForm against ParseMultipartForm on any
// body: the same form when it reads one, and when it declines, the same
// form or error from ParseMultipartForm reading after it as from the
// body untouched.
func FuzzSimpleForm(f *testing.F) {
	const b = "xYz"
	f.Add(writeForm(b, "app_key", "key", "url", "http://x/", "data", "{}"), uint8(0), int16(0))
	f.Add(writeForm(b, "a", "\r\n--xYz", "b", "--xYz--"), uint8(0), int16(0))
	f.Add(writeForm(b, "a", "1", "a", ""), uint8(1), int16(-3))
	f.Add([]byte("--xYz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n\r\n--xYz \r\n--xYz--"), uint8(0), int16(0))
	f.Add([]byte("--xYz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n--xYz\r\n\r\n--xYz--\r\n"), uint8(0), int16(0))
	f.Fuzz(func(t *testing.T, body []byte, max uint8, lengthDelta int16) {
		limit := int64(4 << 20)
		if max > 0 {
			limit = int64(max) * 4
		}
		checkSimpleForm(t, body, b, "", int64(len(body))+int64(lengthDelta%8), limit)
	})
}

// FuzzFormMediaType checks formMediaType against mime.ParseMediaType: the
// same media type, boundary and error.
func FuzzFormMediaType(f *testing.F) {
	for _, s := range []string{"multipart/form-data; boundary=------------------------d74496d66958873e",
		"multipart/form-data; boundary=a'b+c-d.e_f", "multipart/form-data; boundary=a(b", `multipart/form-data; boundary="a b"`,
		"multipart/form-data; boundary=", "multipart/form-data; boundary=x; charset=utf-8", "Multipart/Form-Data; Boundary=X",
		"application/x-www-form-urlencoded", "", "multipart/form-data"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		mt, b, err := formMediaType(ct)
		wantMT, params, wantErr := mime.ParseMediaType(ct)
		if mt != wantMT || b != params["boundary"] || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("%q: %q %q %v, ParseMediaType %q %q %v", ct, mt, b, err, wantMT, params["boundary"], wantErr)
		}
	})
}

// The byte tables hold exactly the bytes RFC 2045's tokens and RFC 2046's
// boundaries share (plainTokenByte) and those of a boundary without space
// (boundaryByte).
func TestByteTables(t *testing.T) {
	for c := range 256 {
		alnum := '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if want := alnum || strings.ContainsRune("'+-._", rune(c)); plainTokenByte[c] != want {
			t.Errorf("plainTokenByte[%q] = %v", rune(c), plainTokenByte[c])
		}
		if want := alnum || strings.ContainsRune("'()+_,-./:=?", rune(c)); boundaryByte[c] != want {
			t.Errorf("boundaryByte[%q] = %v", rune(c), boundaryByte[c])
		}
	}
}
