package dispatch

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/htqueue/htq/webhook"
)

func TestDispatchSuccess(t *testing.T) {
	type seen struct {
		method string
		header http.Header
		body   []byte
	}
	got := make(chan seen, 2)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.Header.Clone(), b}
		w.Header().Set("X-Reply", "yes")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "hello")
	})
	const now = 1_700_000_000
	d := newDispatcher(t, Config{Allow: loopback, Now: fixedClock(now)})
	v, err := webhook.NewVerifier(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = fixedClock(now + 1)

	body := []byte(`{"x":1}`)
	for attempt := range 2 {
		req := Request{
			TaskID: "01J9Z3K6Q8", Queue: "emails", RetryCount: attempt,
			URL: tg.URL + "/hook?a=1", Method: "put",
			Header: http.Header{"Content-Type": {"application/json"}, "x-custom": {"a", "b"}},
			Body:   body,
		}
		res, err := d.Dispatch(bg, req)
		if err != nil {
			t.Fatalf("attempt %d: Dispatch: %v", attempt, err)
		}
		if o := (Policy{}).Classify(err); o != Succeeded {
			t.Errorf("Classify = %v", o)
		}
		if res.Status != http.StatusCreated || string(res.Body) != "hello" || res.Truncated || res.Header.Get("X-Reply") != "yes" || res.Duration <= 0 {
			t.Errorf("Result = %+v", res)
		}
		s := <-got
		if s.method != http.MethodPut || !bytes.Equal(s.body, body) {
			t.Errorf("target saw %s %q", s.method, s.body)
		}
		for k, want := range map[string]string{
			HeaderTaskID: "01J9Z3K6Q8", HeaderQueue: "emails", HeaderRetryCount: strconv.Itoa(attempt),
			"Content-Type": "application/json", "User-Agent": DefaultUserAgent,
			webhook.HeaderID: "01J9Z3K6Q8", webhook.HeaderTimestamp: strconv.Itoa(now),
		} {
			if g := s.header.Get(k); g != want {
				t.Errorf("header %s = %q, want %q", k, g, want)
			}
		}
		if g := s.header.Values("X-Custom"); len(g) != 2 || g[0] != "a" || g[1] != "b" {
			t.Errorf("X-Custom = %q", g)
		}
		if err := v.Verify(s.header, s.body); err != nil {
			t.Errorf("the target cannot verify the signature: %v", err)
		}
	}
}

func TestDispatchRotation(t *testing.T) {
	oldS, _ := webhook.GenerateSecret()
	newS, _ := webhook.GenerateSecret()
	headers := make(chan http.Header, 1)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { headers <- r.Header.Clone() })
	s1, _ := webhook.NewSigner(oldS)
	d := newDispatcher(t, Config{Allow: loopback, Signer: s1})

	r := task(tg.URL)
	r.Body = []byte("b")
	if _, err := d.Dispatch(bg, r); err != nil {
		t.Fatal(err)
	}
	if err := webhook.Verify(oldS, <-headers, r.Body); err != nil {
		t.Errorf("before rotation: %v", err)
	}
	s2, _ := webhook.NewSigner(oldS, newS)
	d.SetSigner(s2)
	if _, err := d.Dispatch(bg, r); err != nil {
		t.Fatal(err)
	}
	h := <-headers
	for _, s := range []string{oldS, newS} {
		if err := webhook.Verify(s, h, r.Body); err != nil {
			t.Errorf("during rotation: %v", err)
		}
	}
}

func TestDispatchBodyLimit(t *testing.T) {
	const limit = DefaultMaxResponseBytes
	for _, size := range []int{0, 10, limit - 1, limit, limit + 1, 1 << 20} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%d/chunked=%v", size, chunked), func(t *testing.T) {
				payload := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
				tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
					if !chunked {
						w.Header().Set("Content-Length", strconv.Itoa(size))
					}
					for p := payload; len(p) > 0; {
						n := min(len(p), 4096)
						w.Write(p[:n])
						p = p[n:]
						if chunked {
							w.(http.Flusher).Flush()
						}
					}
				})
				d := newDispatcher(t, Config{Allow: loopback})
				res, err := d.Dispatch(bg, task(tg.URL))
				if err != nil {
					t.Fatal(err)
				}
				want := payload[:min(size, limit)]
				if !bytes.Equal(res.Body, want) {
					t.Errorf("body is %d bytes, want the first %d", len(res.Body), len(want))
				}
				if res.Truncated != (size > limit) {
					t.Errorf("Truncated = %v for %d bytes", res.Truncated, size)
				}
			})
		}
	}
}

// TestEndlessBody: a target that writes forever costs 64 KiB and no time,
// and its connection is closed rather than drained.
func TestEndlessBody(t *testing.T) {
	handlerDone := make(chan struct{})
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(handlerDone)
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	d := newDispatcher(t, Config{Allow: loopback, Timeout: 10 * time.Second})
	var res *Result
	var err error
	within(t, 2*time.Second, func() { res, err = d.Dispatch(bg, task(tg.URL)) })
	if err != nil {
		t.Fatalf("Dispatch: %v", err)
	}
	if !res.Truncated || len(res.Body) != DefaultMaxResponseBytes {
		t.Errorf("Truncated=%v, %d bytes", res.Truncated, len(res.Body))
	}
	select {
	case <-handlerDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the endless handler still writes: the connection was not closed")
	}
}

// TestConnectionReuse: answers read to their end leave the connection in
// the pool, whatever the status.
func TestConnectionReuse(t *testing.T) {
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			http.Error(w, "nope", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, strings.Repeat("y", 1000))
	})
	d := newDispatcher(t, Config{Allow: loopback})
	for i := range 20 {
		path := "/ok"
		if i%2 == 1 {
			path = "/fail"
		}
		r := task(tg.URL + path)
		r.Body = bytes.Repeat([]byte("b"), 5000)
		d.Dispatch(bg, r)
	}
	if n := tg.conns.Load(); n != 1 {
		t.Errorf("20 sequential dispatches used %d connections, want 1", n)
	}
}

func TestDispatchStatus(t *testing.T) {
	const now = 1_700_000_000
	tests := []struct {
		status     int
		retryAfter string
		sentinel   error
		outcome    Outcome
		retry4xx   Outcome // outcome with Policy{RetryClientErrors: true}
		wantAfter  time.Duration
		hasAfter   bool
	}{
		{400, "", ErrClientError, Archive, Retry, 0, false},
		{401, "", ErrClientError, Archive, Retry, 0, false},
		{404, "", ErrClientError, Archive, Retry, 0, false},
		{410, "", ErrClientError, Archive, Retry, 0, false},
		{422, "5", ErrClientError, Archive, Retry, 0, false}, // Retry-After only read on retryable answers
		{429, "", ErrTooManyRequests, Retry, Retry, 0, false},
		{429, "7", ErrTooManyRequests, Retry, Retry, 7 * time.Second, true},
		{429, " 120 ", ErrTooManyRequests, Retry, Retry, 2 * time.Minute, true},
		{429, time.Unix(now+90, 0).UTC().Format(http.TimeFormat), ErrTooManyRequests, Retry, Retry, 90 * time.Second, true},
		{503, time.Unix(now-90, 0).UTC().Format(http.TimeFormat), ErrServerError, Retry, Retry, 0, true},
		{503, "99999999999999999999", ErrServerError, Retry, Retry, DefaultMaxRetryAfter, true},
		{503, "86400", ErrServerError, Retry, Retry, DefaultMaxRetryAfter, true},
		{503, "soon", ErrServerError, Retry, Retry, 0, false},
		{503, "-5", ErrServerError, Retry, Retry, 0, false},
		{500, "", ErrServerError, Retry, Retry, 0, false},
		{502, "", ErrServerError, Retry, Retry, 0, false},
		{504, "", ErrServerError, Retry, Retry, 0, false},
		{304, "", ErrRedirect, Archive, Archive, 0, false},
		{300, "", ErrRedirect, Archive, Archive, 0, false},
		{600, "", ErrUnexpectedStatus, Archive, Archive, 0, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%s", tt.status, tt.retryAfter), func(t *testing.T) {
			tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.retryAfter != "" {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, "why: "+strconv.Itoa(tt.status))
			})
			d := newDispatcher(t, Config{Allow: loopback, Now: fixedClock(now)})
			res, err := d.Dispatch(bg, task(tg.URL))
			if !errors.Is(err, tt.sentinel) {
				t.Fatalf("err = %v, want %v", err, tt.sentinel)
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Status != tt.status {
				t.Fatalf("err = %#v, want a *StatusError with %d", err, tt.status)
			}
			if res == nil || res.Status != tt.status {
				t.Fatalf("Result = %+v", res)
			}
			if tt.status != 304 && string(res.Body) != "why: "+strconv.Itoa(tt.status) {
				t.Errorf("body = %q", res.Body)
			}
			if o := (Policy{}).Classify(err); o != tt.outcome {
				t.Errorf("Classify = %v, want %v", o, tt.outcome)
			}
			if o := (Policy{RetryClientErrors: true}).Classify(err); o != tt.retry4xx {
				t.Errorf("Classify with RetryClientErrors = %v, want %v", o, tt.retry4xx)
			}
			after, ok := RetryAfter(err)
			if after != tt.wantAfter || ok != tt.hasAfter {
				t.Errorf("RetryAfter = %s, %v; want %s, %v", after, ok, tt.wantAfter, tt.hasAfter)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const slack = time.Second

	t.Run("handler never answers", func(t *testing.T) {
		tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		d := newDispatcher(t, Config{Allow: loopback, Timeout: timeout})
		var err error
		took := within(t, timeout+slack, func() { _, err = d.Dispatch(bg, task(tg.URL)) })
		checkTimeout(t, err, took, timeout)
	})

	t.Run("listener accepts and says nothing", func(t *testing.T) {
		addr := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		d := newDispatcher(t, Config{Allow: loopback, Timeout: timeout})
		var err error
		took := within(t, timeout+slack, func() { _, err = d.Dispatch(bg, task("http://"+addr)) })
		checkTimeout(t, err, took, timeout)
	})

	t.Run("headers one byte at a time", func(t *testing.T) {
		addr := rawServer(t, func(c net.Conn) {
			br := bufio.NewReader(c)
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			go io.Copy(io.Discard, br)
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\n"); err != nil {
				return
			}
			for {
				if _, err := c.Write([]byte("X")); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // the trickle is the test
			}
		})
		d := newDispatcher(t, Config{Allow: loopback, Timeout: timeout})
		var err error
		took := within(t, timeout+slack, func() { _, err = d.Dispatch(bg, task("http://"+addr)) })
		checkTimeout(t, err, took, timeout)
	})

	t.Run("body one byte at a time", func(t *testing.T) {
		tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			for {
				if _, err := w.Write([]byte("z")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-r.Context().Done():
					return
				case <-time.After(20 * time.Millisecond): // the trickle is the test
				}
			}
		})
		d := newDispatcher(t, Config{Allow: loopback, Timeout: timeout})
		var res *Result
		var err error
		took := within(t, timeout+slack, func() { res, err = d.Dispatch(bg, task(tg.URL)) })
		checkTimeout(t, err, took, timeout)
		if res == nil || res.Status != http.StatusOK || len(res.Body) == 0 {
			t.Errorf("Result = %+v, want the status and the part of the body read", res)
		}
	})

	t.Run("the request's timeout beats the default", func(t *testing.T) {
		tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		d := newDispatcher(t, Config{Allow: loopback, Timeout: time.Minute})
		r := task(tg.URL)
		r.Timeout = timeout
		var err error
		took := within(t, timeout+slack, func() { _, err = d.Dispatch(bg, r) })
		checkTimeout(t, err, took, timeout)
	})

	t.Run("the caller's deadline", func(t *testing.T) {
		tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		d := newDispatcher(t, Config{Allow: loopback, Timeout: time.Minute})
		ctx, cancel := context.WithTimeout(bg, timeout)
		defer cancel()
		var err error
		took := within(t, timeout+slack, func() { _, err = d.Dispatch(ctx, task(tg.URL)) })
		checkTimeout(t, err, took, timeout)
	})

	t.Run("the caller cancels", func(t *testing.T) {
		tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		d := newDispatcher(t, Config{Allow: loopback, Timeout: time.Minute})
		ctx, cancel := context.WithCancel(bg)
		time.AfterFunc(timeout, cancel)
		var err error
		within(t, timeout+slack, func() { _, err = d.Dispatch(ctx, task(tg.URL)) })
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
		if o := (Policy{}).Classify(err); o != Retry {
			t.Errorf("Classify = %v, want retry", o)
		}
	})
}

func checkTimeout(t *testing.T, err error, took, timeout time.Duration) {
	t.Helper()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	if took < timeout-50*time.Millisecond {
		t.Errorf("gave up after %s, before the timeout %s", took, timeout)
	}
	if o := (Policy{}).Classify(err); o != Retry {
		t.Errorf("Classify = %v, want retry", o)
	}
}

// rawServer listens on loopback and runs serve on each connection; the
// listener and connections are closed at the end of the test.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestRedirects(t *testing.T) {
	other := newTarget(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other") })
	v, _ := webhook.NewVerifier(testSecret)
	var mu sync.Mutex
	hits := map[string]int{}
	var main *target
	main = newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits[r.URL.Path]++
		mu.Unlock()
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
		case "/final":
			b, _ := io.ReadAll(r.Body)
			if err := v.Verify(r.Header, b); err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, "final %s %s", r.Method, b)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/other-port":
			http.Redirect(w, r, other.URL+"/x", http.StatusFound)
		case "/other-name":
			http.Redirect(w, r, strings.Replace(main.URL, "127.0.0.1", "localhost", 1)+"/final", http.StatusFound)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/scheme":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		}
	})
	hitsOf := func(p string) int { mu.Lock(); defer mu.Unlock(); return hits[p] }
	allow := append([]string{"localhost"}, loopback...)

	t.Run("same host is followed, body and signature kept", func(t *testing.T) {
		d := newDispatcher(t, Config{Allow: allow})
		r := task(main.URL + "/same")
		r.Body = []byte("payload")
		res, err := d.Dispatch(bg, r)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Body) != "final POST payload" {
			t.Errorf("body = %q", res.Body)
		}
	})

	t.Run("redirects off", func(t *testing.T) {
		d := newDispatcher(t, Config{Allow: allow, MaxRedirects: -1})
		before := hitsOf("/final")
		res, err := d.Dispatch(bg, task(main.URL+"/same"))
		var se *StatusError
		if !errors.Is(err, ErrRedirect) || !errors.As(err, &se) || se.Location != "/final" {
			t.Fatalf("err = %v, want ErrRedirect to /final", err)
		}
		if res.Status != http.StatusTemporaryRedirect || hitsOf("/final") != before {
			t.Errorf("status %d, /final hit %d times", res.Status, hitsOf("/final")-before)
		}
	})

	t.Run("loop stops", func(t *testing.T) {
		d := newDispatcher(t, Config{Allow: allow})
		_, err := d.Dispatch(bg, task(main.URL+"/loop"))
		if !errors.Is(err, ErrRedirect) || !strings.Contains(err.Error(), "more than 3") {
			t.Fatalf("err = %v, want ErrRedirect (too many)", err)
		}
		if n := hitsOf("/loop"); n != 1+DefaultMaxRedirects {
			t.Errorf("/loop hit %d times, want %d", n, 1+DefaultMaxRedirects)
		}
	})

	for _, path := range []string{"/other-port", "/other-name", "/metadata", "/scheme"} {
		t.Run("refused "+path, func(t *testing.T) {
			d := newDispatcher(t, Config{Allow: allow})
			res, err := d.Dispatch(bg, task(main.URL+path))
			if !errors.Is(err, ErrRedirect) {
				t.Fatalf("err = %v, want ErrRedirect", err)
			}
			if o := (Policy{}).Classify(err); o != Archive {
				t.Errorf("Classify = %v, want archive", o)
			}
			if res.Status != http.StatusFound {
				t.Errorf("status = %d", res.Status)
			}
			t.Log(err)
		})
	}
	if n := other.requests.Load(); n != 0 {
		t.Errorf("the other host was reached %d times", n)
	}
	if n := hitsOf("/final"); n != 1 {
		t.Errorf("/final hit %d times, want 1 (only the same-host redirect)", n)
	}
}

func TestSameHost(t *testing.T) {
	tests := []struct {
		from, to string
		want     bool
	}{
		{"http://a.example/x", "http://a.example/y", true},
		{"http://a.example/x", "http://A.EXAMPLE./y", true},
		{"http://a.example/x", "http://a.example:80/y", true},
		{"http://a.example/x", "https://a.example/y", true},
		{"http://a.example:8080/x", "https://a.example/y", false},
		{"https://a.example/x", "http://a.example/y", false},
		{"http://a.example/x", "http://a.example:81/y", false},
		{"http://a.example/x", "http://b.example/y", false},
		{"http://a.example/x", "http://a.example.evil/y", false},
		{"http://127.0.0.1:5000/", "http://localhost:5000/", false},
	}
	for _, tt := range tests {
		if got := sameHost(mustURL(t, tt.from), mustURL(t, tt.to)); got != tt.want {
			t.Errorf("sameHost(%s, %s) = %v", tt.from, tt.to, got)
		}
	}
}

func TestInvalidRequests(t *testing.T) {
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {})
	d := newDispatcher(t, Config{Allow: loopback})
	mod := func(f func(*Request)) Request { r := task(tg.URL); f(&r); return r }
	tests := map[string]Request{
		"no task ID":         mod(func(r *Request) { r.TaskID = "" }),
		"no queue":           mod(func(r *Request) { r.Queue = "" }),
		"negative retries":   mod(func(r *Request) { r.RetryCount = -1 }),
		"ftp":                mod(func(r *Request) { r.URL = "ftp://127.0.0.1/x" }),
		"file":               mod(func(r *Request) { r.URL = "file:///etc/passwd" }),
		"gopher":             mod(func(r *Request) { r.URL = "gopher://127.0.0.1:6379/_INFO" }),
		"no scheme":          mod(func(r *Request) { r.URL = "//127.0.0.1/x" }),
		"opaque":             mod(func(r *Request) { r.URL = "http:127.0.0.1" }),
		"no host":            mod(func(r *Request) { r.URL = "http:///x" }),
		"user info":          mod(func(r *Request) { r.URL = strings.Replace(tg.URL, "://", "://user:secret@", 1) }),
		"port 0":             mod(func(r *Request) { r.URL = "http://127.0.0.1:0/" }),
		"port too big":       mod(func(r *Request) { r.URL = "http://127.0.0.1:70000/" }),
		"unparsable":         mod(func(r *Request) { r.URL = "http://[::1/" }),
		"TRACE":              mod(func(r *Request) { r.Method = "TRACE" }),
		"CONNECT":            mod(func(r *Request) { r.Method = "CONNECT" }),
		"bad method":         mod(func(r *Request) { r.Method = "GE T" }),
		"Htq-Task-Id set":    mod(func(r *Request) { r.Header = http.Header{"Htq-Task-Id": {"x"}} }),
		"webhook-id set":     mod(func(r *Request) { r.Header = http.Header{"webhook-id": {"x"}} }),
		"signature set":      mod(func(r *Request) { r.Header = http.Header{"Webhook-Signature": {"v1,x"}} }),
		"Host set":           mod(func(r *Request) { r.Header = http.Header{"Host": {"evil"}} }),
		"Content-Length set": mod(func(r *Request) { r.Header = http.Header{"Content-Length": {"5"}} }),
		"Transfer-Encoding":  mod(func(r *Request) { r.Header = http.Header{"Transfer-Encoding": {"chunked"}} }),
		"bad header name":    mod(func(r *Request) { r.Header = http.Header{"Bad Header": {"x"}} }),
		"header injection":   mod(func(r *Request) { r.Header = http.Header{"X-A": {"a\r\nX-Injected: 1"}} }),
		"NUL in header":      mod(func(r *Request) { r.Header = http.Header{"X-A": {"a\x00b"}} }),
		"negative timeout":   mod(func(r *Request) { r.Timeout = -time.Second }),
		"timeout too long":   mod(func(r *Request) { r.Timeout = DefaultMaxTimeout + time.Second }),
	}
	for name, r := range tests {
		t.Run(name, func(t *testing.T) {
			if err := d.Validate(r); !errors.Is(err, ErrInvalidRequest) {
				t.Errorf("Validate = %v, want ErrInvalidRequest", err)
			}
			res, err := d.Dispatch(bg, r)
			if !errors.Is(err, ErrInvalidRequest) || res != nil {
				t.Fatalf("Dispatch = %v, %v; want ErrInvalidRequest", res, err)
			}
			if o := (Policy{}).Classify(err); o != Archive {
				t.Errorf("Classify = %v, want archive", o)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the URL's password: %v", err)
			}
		})
	}
	if n := tg.requests.Load(); n != 0 {
		t.Errorf("%d invalid requests reached the target", n)
	}
	// Valid odd cases.
	for _, r := range []Request{
		mod(func(r *Request) { r.Method = "delete" }),
		mod(func(r *Request) { r.Method = "" }),
		mod(func(r *Request) { r.URL = strings.Replace(tg.URL, "http://", "HTTP://", 1) }),
		mod(func(r *Request) { r.Header = http.Header{"X-Tab": {"a\tb"}, "Authorization": {"Bearer t"}} }),
		mod(func(r *Request) { r.Timeout = DefaultMaxTimeout }),
	} {
		if err := d.Validate(r); err != nil {
			t.Errorf("Validate(%+v) = %v", r, err)
		}
		if _, err := d.Dispatch(bg, r); err != nil {
			t.Errorf("Dispatch(%+v) = %v", r, err)
		}
	}
}

func TestConfig(t *testing.T) {
	s, _ := webhook.NewSigner(testSecret)
	for name, cfg := range map[string]Config{
		"no signer":              {},
		"negative timeout":       {Signer: s, Timeout: -1},
		"timeout above max":      {Signer: s, Timeout: time.Hour, MaxTimeout: time.Minute},
		"negative body limit":    {Signer: s, MaxResponseBytes: -1},
		"negative retry after":   {Signer: s, MaxRetryAfter: -1},
		"negative idle":          {Signer: s, MaxIdleConnsPerHost: -1},
		"negative dial timeout":  {Signer: s, DialTimeout: -1},
		"bad allowlist CIDR":     {Signer: s, Allow: []string{"10.0.0.0/33"}},
		"bad allowlist name":     {Signer: s, Allow: []string{"no such thing!"}},
		"empty allowlist entry":  {Signer: s, Allow: []string{""}},
		"allowlist zone":         {Signer: s, Allow: []string{"fe80::1%eth0"}},
		"allowlist bare star":    {Signer: s, Allow: []string{"*."}},
		"allowlist star in name": {Signer: s, Allow: []string{"a.*.com"}},
	} {
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New = %v, want ErrInvalidConfig", name, err)
		}
	}
	d, err := New(Config{Signer: s})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.cfg.Timeout != DefaultTimeout || d.cfg.MaxRedirects != DefaultMaxRedirects || d.cfg.MaxResponseBytes != DefaultMaxResponseBytes {
		t.Errorf("defaults not applied: %+v", d.cfg)
	}
	if d.transport.Proxy != nil {
		t.Error("the transport takes a proxy")
	}
	if d.transport.MaxIdleConnsPerHost < 100 {
		t.Errorf("MaxIdleConnsPerHost = %d, below the dispatch concurrency", d.transport.MaxIdleConnsPerHost)
	}
}

// TestNoProxyFromEnvironment: proxy variables in the environment are
// ignored; the guard must see the target's address, not a proxy's.
func TestNoProxyFromEnvironment(t *testing.T) {
	canary := newTarget(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "proxied") })
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, canary.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	t.Run("loopback target", func(t *testing.T) {
		tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "direct") })
		d := newDispatcher(t, Config{Allow: loopback})
		res, err := d.Dispatch(bg, task(tg.URL))
		if err != nil || string(res.Body) != "direct" {
			t.Fatalf("Dispatch = %v, %v", res, err)
		}
	})

	// Go never proxies loopback targets, so the test that counts is one
	// with a target on another interface of this machine.
	t.Run("non-loopback target", func(t *testing.T) {
		ip := nonLoopbackIPv4(t)
		ln, err := net.Listen("tcp4", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Skipf("cannot listen on %s: %v", ip, err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "direct") })}
		go srv.Serve(ln)
		defer srv.Close()
		d := newDispatcher(t, Config{Allow: []string{ip}})
		res, err := d.Dispatch(bg, task("http://"+ln.Addr().String()+"/"))
		if err != nil || string(res.Body) != "direct" {
			t.Fatalf("Dispatch = %v, %v", res, err)
		}
	})
	if n := canary.requests.Load(); n != 0 {
		t.Errorf("the proxy from the environment got %d requests", n)
	}
}

func nonLoopbackIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skipf("no interface addresses: %v", err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("no non-loopback IPv4 address on this machine")
	return ""
}

// TestTLSAndHTTP2: https targets work (HTTP/2 when the target offers it)
// and their dials pass the guard like any other.
func TestTLSAndHTTP2(t *testing.T) {
	protos := make(chan int, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.ProtoMajor
		io.WriteString(w, "secure")
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())

	d := newDispatcher(t, Config{Allow: loopback, TLSClientConfig: &tls.Config{RootCAs: pool}})
	res, err := d.Dispatch(bg, task(srv.URL))
	if err != nil || string(res.Body) != "secure" {
		t.Fatalf("Dispatch = %v, %v", res, err)
	}
	if p := <-protos; p != 2 {
		t.Errorf("HTTP/%d, want HTTP/2", p)
	}

	refused := newDispatcher(t, Config{TLSClientConfig: &tls.Config{RootCAs: pool}})
	if _, err := refused.Dispatch(bg, task(srv.URL)); !errors.Is(err, ErrTargetNotAllowed) {
		t.Errorf("not allowlisted: %v, want ErrTargetNotAllowed", err)
	}

	// A certificate the client does not trust is a network error (retried:
	// a certificate can be fixed).
	untrusted := newDispatcher(t, Config{Allow: loopback})
	_, err = untrusted.Dispatch(bg, task(srv.URL))
	if !errors.Is(err, ErrNetwork) {
		t.Errorf("untrusted certificate: %v, want ErrNetwork", err)
	}
}
