package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// rawConn is a minimal HTTP/1.1 client on one keep-alive connection: it
// writes a request built once (rawRequest) and reads an answer framed by
// Content-Length. The load generator shares the two cores with htq serve,
// and net/http's client spends about as much CPU per request as the
// server does; this one leaves more of the machine to what is measured
// (-client nethttp measures with net/http, as before).
type rawConn struct {
	addr    string
	timeout time.Duration
	c       net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	body    []byte
}

func newRawConn(addr string, timeout time.Duration) *rawConn {
	return &rawConn{addr: addr, timeout: timeout}
}

// rawRequest is the bytes of one request with a JSON body and the token.
func rawRequest(method, host, path string, body []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		method, path, host, token, len(body))
	b.Write(body)
	return b.Bytes()
}

var errChunked = errors.New("raw client: answer without Content-Length")

// do sends req and returns the status and the body (valid until the next
// call).
func (rc *rawConn) do(req []byte) (int, []byte, error) {
	if rc.c == nil {
		c, err := net.DialTimeout("tcp", rc.addr, rc.timeout)
		if err != nil {
			return 0, nil, err
		}
		rc.c, rc.r, rc.w = c, bufio.NewReaderSize(c, 64<<10), bufio.NewWriterSize(c, 64<<10)
	}
	status, body, err := rc.exchange(req)
	if err != nil {
		rc.close()
	}
	return status, body, err
}

func (rc *rawConn) exchange(req []byte) (int, []byte, error) {
	_ = rc.c.SetDeadline(time.Now().Add(rc.timeout))
	if _, err := rc.w.Write(req); err != nil {
		return 0, nil, err
	}
	if err := rc.w.Flush(); err != nil {
		return 0, nil, err
	}
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, nil, fmt.Errorf("raw client: bad status line %q", line)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("raw client: bad status line %q", line)
	}
	length, closeAfter := -1, false
	for {
		line, err := rc.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if length, err = strconv.Atoi(string(value)); err != nil {
				return 0, nil, fmt.Errorf("raw client: Content-Length %q", value)
			}
		case bytes.EqualFold(name, []byte("Connection")) && bytes.EqualFold(value, []byte("close")):
			closeAfter = true
		}
	}
	if length < 0 {
		return 0, nil, errChunked
	}
	if cap(rc.body) < length {
		rc.body = make([]byte, length)
	}
	rc.body = rc.body[:length]
	if _, err := io.ReadFull(rc.r, rc.body); err != nil {
		return 0, nil, err
	}
	if closeAfter {
		rc.close()
	}
	return status, rc.body, nil
}

func (rc *rawConn) close() {
	if rc.c != nil {
		rc.c.Close()
		rc.c = nil
	}
}

// enqueuedCount reads "enqueued" from the start of a batch answer
// ({"enqueued":N,…}), without decoding the rest.
func enqueuedCount(body []byte) (int, bool) {
	rest, ok := bytes.CutPrefix(body, []byte(`{"enqueued":`))
	if !ok {
		return 0, false
	}
	end := bytes.IndexByte(rest, ',')
	if end < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(rest[:end]))
	return n, err == nil
}
