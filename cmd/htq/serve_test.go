package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/webhook"
)

// htqBin is the htq binary built once for the tests that run it.
var htqBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "htq-bin-")
	if err != nil {
		panic(err)
	}
	htqBin = filepath.Join(dir, "htq")
	if out, err := exec.Command("go", "build", "-o", htqBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	leaktest.Main(m, func() {
		redistest.StopShared()
		os.RemoveAll(dir)
	})
}

const binToken = "binary-test-token-0123456789"

var binSecret = func() string {
	s, err := webhook.GenerateSecret()
	if err != nil {
		panic(err)
	}
	return s
}()

// proc is a running `htq serve`.
type proc struct {
	cmd    *exec.Cmd
	base   string
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startBinary runs `htq serve` on broker with the test settings plus
// extra arguments, waits until /readyz answers, and kills it at the end of
// the test if it still runs.
func startBinary(t *testing.T, broker string, extra ...string) *proc {
	t.Helper()
	return startBinaryEnv(t, broker, nil, extra...)
}

// startBinaryEnv is startBinary with the environment variables env added.
func startBinaryEnv(t *testing.T, broker string, env []string, extra ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	args := append([]string{"serve", "--addr", addr, "--storage", broker, "--allow-targets", "127.0.0.0/8",
		"--log-level", "warn", "--shutdown-timeout", "5s"}, extra...)
	p := &proc{cmd: exec.Command(htqBin, args...), base: "http://" + addr,
		stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Env = append(append(os.Environ(), "HTQ_TOKEN=", "HTQ_CONFIG="), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("htq serve stderr:\n%s", p.stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		select {
		case <-p.exited:
			t.Fatalf("htq serve exited at start (%v):\n%s", p.err, p.stderr.String())
		default:
		}
		resp, err := http.Get(p.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("htq serve not ready after 20 s:\n%s", p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(d):
		t.Fatalf("htq serve still runs after %v", d)
		return -1
	}
}

// do sends an API call with the token and decodes the answer into out.
func (p *proc) do(t *testing.T, token, method, path string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

func backends(t *testing.T, fn func(t *testing.T, broker string)) {
	t.Run("redis", func(t *testing.T) { fn(t, redistest.URL(t)) })
	t.Run("embedded", func(t *testing.T) { fn(t, "file:"+filepath.Join(t.TempDir(), "data")) })
}

// SIGTERM stops accepting, lets the running dispatch finish, and exits 0;
// the task is then completed.
func TestBinarySIGTERMDrains(t *testing.T) {
	backends(t, func(t *testing.T, broker string) {
		p := startBinary(t, broker, "--token", binToken, "--signing-secrets", binSecret)
		arrived := make(chan struct{}, 1)
		release := make(chan struct{})
		tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := webhook.Verify(binSecret, r.Header, mustRead(r)); err != nil {
				t.Errorf("unsigned request: %v", err)
			}
			arrived <- struct{}{}
			<-release
			io.WriteString(w, "done slowly")
		}))
		defer tg.Close()
		var task struct{ ID string }
		p.do(t, binToken, "POST", "/v1/queues/slow/tasks", map[string]any{"url": tg.URL, "options": map[string]any{"retention": "1h"}}, http.StatusCreated, &task)
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("the target got no request")
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.exited:
			t.Fatalf("exited before the running dispatch finished:\n%s", p.stderr.String())
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := http.Get(p.base + "/healthz"); err == nil {
			t.Error("still accepting connections while draining")
		}
		close(release)
		if code := p.wait(t, 15*time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGTERM:\n%s", code, p.stderr.String())
		}

		p2 := startBinary(t, broker, "--token", binToken, "--signing-secrets", binSecret)
		var got struct {
			State  string          `json:"state"`
			Result json.RawMessage `json:"result"`
		}
		p2.do(t, binToken, "GET", "/v1/queues/slow/tasks/"+task.ID, nil, http.StatusOK, &got)
		if got.State != "completed" || !strings.Contains(string(got.Result), "done slowly") {
			t.Errorf("after the drain: %+v", got)
		}
		_ = p2.cmd.Process.Signal(syscall.SIGTERM)
		if code := p2.wait(t, 15*time.Second); code != 0 {
			t.Errorf("second process exit code %d", code)
		}
	})
}

func mustRead(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	return b
}

var tokenRE = regexp.MustCompile(`htq_[A-Za-z0-9_-]{43}`)

// generatedToken returns the token htq serve printed on its first start.
// The process writes it before it answers /readyz, but os/exec copies the
// child's stdout into the buffer from a goroutine of its own, which may
// not have run yet: wait up to 5 s for it.
func (p *proc) generatedToken(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if tok := tokenRE.FindString(p.stdout.String()); tok != "" || time.Now().After(deadline) {
			return tok
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The first start on new data prints a generated token once; the next
// start uses it and prints nothing.
func TestBinaryGeneratedToken(t *testing.T) {
	broker := "file:" + filepath.Join(t.TempDir(), "data")
	p := startBinary(t, broker)
	token := p.generatedToken(t)
	if token == "" {
		t.Fatalf("first start printed no token: %q", p.stdout.String())
	}
	p.do(t, token, "GET", "/v1/queues", nil, http.StatusOK, nil)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait(t, 15*time.Second)

	p = startBinary(t, broker)
	if out := p.stdout.String(); out != "" {
		t.Errorf("second start printed %q", out)
	}
	p.do(t, token, "GET", "/v1/queues", nil, http.StatusOK, nil)
	p.do(t, "htq_wrong", "GET", "/v1/queues", nil, http.StatusUnauthorized, nil)
}

// Two processes on one Redis share the queues; when one is killed with
// SIGKILL the other goes on serving the API and dispatching.
func TestBinaryTwoOnOneRedis(t *testing.T) {
	broker := redistest.URL(t)
	a := startBinary(t, broker, "--token", binToken, "--signing-secrets", binSecret)
	b := startBinary(t, broker, "--token", binToken, "--signing-secrets", binSecret)
	hits := make(chan string, 100)
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- r.Header.Get("Htq-Task-Id")
	}))
	defer tg.Close()
	a.do(t, binToken, "POST", "/v1/queues", map[string]any{"name": "shared", "mode": "timing"}, http.StatusCreated, nil)
	want := map[string]bool{}
	for i := 0; i < 10; i++ {
		p := a
		if i%2 == 1 {
			p = b
		}
		var task struct{ ID string }
		p.do(t, binToken, "POST", "/v1/queues/shared/tasks", map[string]any{"url": tg.URL + "/" + strconv.Itoa(i)}, http.StatusCreated, &task)
		want[task.ID] = true
	}
	for len(want) > 0 {
		select {
		case id := <-hits:
			if !want[id] {
				t.Errorf("unexpected or repeated task %s", id)
			}
			delete(want, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("tasks not delivered: %v", want)
		}
	}

	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	a.wait(t, 5*time.Second)
	var task struct{ ID string }
	b.do(t, binToken, "POST", "/v1/queues/shared/tasks", map[string]any{"url": tg.URL + "/after"}, http.StatusCreated, &task)
	select {
	case id := <-hits:
		if id != task.ID {
			t.Errorf("got %s, want %s", id, task.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the surviving process did not dispatch")
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	if code := b.wait(t, 15*time.Second); code != 0 {
		t.Errorf("exit code %d", code)
	}
}

// A config file with an unknown key stops the binary at once with exit
// code 2 and a message naming the key.
func TestBinaryBadConfigFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htq.toml")
	os.WriteFile(path, []byte("addr = \"127.0.0.1:0\"\nconcurrncy = 4\n"), 0o600)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, htqBin, "serve", "--config", path, "--storage", "mem:")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(stderr.String(), "concurrncy") {
		t.Errorf("exit %d (%v): %s", code, err, stderr.String())
	}
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		t.Log(sc.Text())
	}
}
