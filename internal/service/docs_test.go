package service_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The examples of docs/api.md run as written: every ```sh block, in
// order, in one bash session against a real htq serve started here, with
// H, T, K and S set as the document says. Each curl call must answer 2xx
// (or, when the output shown is an error object, an error status), and
// when a ```json block follows a ```sh block it is that block's output,
// compared as the document's "About the examples" explains: "…" stands
// for any value, "ab…" for any string that starts with "ab", any RFC 3339
// time for any time, and a member "…": "…" for the members not shown.

const apiDoc = "../../docs/api.md"

// docHTQKey and docHTQToken are the HTQ credentials the examples run
// with ($K and $S).
const (
	docHTQKey   = "shop"
	docHTQToken = "shop-secret-0123456789"
)

// docBlock is one ```sh block and the ```json block that shows its
// output (empty when none does).
type docBlock struct {
	line   int
	script string
	want   string
}

var fence = regexp.MustCompile("(?m)^```(\\w*)\n")

// docBlocks reads the sh blocks of a Markdown document and their outputs.
func docBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	var blocks []docBlock
	pos, shEnd := 0, -1 // shEnd: where the last sh block's fence ends
	for {
		m := fence.FindStringSubmatchIndex(doc[pos:])
		if m == nil {
			return blocks
		}
		lang := doc[pos+m[2] : pos+m[3]]
		start := pos + m[1]
		end := strings.Index(doc[start:], "\n```")
		if end < 0 {
			t.Fatalf("%s: unclosed block at line %d", path, strings.Count(doc[:start], "\n"))
		}
		body := doc[start : start+end+1]
		after := start + end + len("\n```")
		switch {
		case lang == "sh":
			blocks = append(blocks, docBlock{line: strings.Count(doc[:start], "\n") + 1, script: body})
			shEnd = after
		case lang == "json" && shEnd >= 0 && strings.TrimSpace(doc[shEnd:pos+m[0]]) == "":
			blocks[len(blocks)-1].want = body
		}
		pos = after
	}
}

// bash is one bash session whose output is read block by block.
type bash struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	out, errs chan string
}

const endMark = "@@end-of-block@@"

func startBash(t *testing.T, dir string, env []string) *bash {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	b := &bash{cmd: cmd, stdin: stdin, out: make(chan string), errs: make(chan string)}
	split := func(r io.Reader, ch chan<- string) {
		defer close(ch)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var chunk strings.Builder
		for sc.Scan() {
			if sc.Text() == endMark {
				ch <- strings.TrimSuffix(chunk.String(), "\n")
				chunk.Reset()
				continue
			}
			chunk.WriteString(sc.Text() + "\n")
		}
	}
	go split(stdout, b.out)
	go split(stderr, b.errs)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	// curl reports each call's status on standard error.
	b.run(t, `curl() { command curl --write-out '%{stderr}HTTP %{http_code}\n' "$@"; }`)
	return b
}

// run runs a script and returns what it wrote to standard output and
// standard error.
func (b *bash) run(t *testing.T, script string) (stdout, stderr string) {
	t.Helper()
	mark := fmt.Sprintf("\nprintf '\\n%s\\n'; printf '\\n%s\\n' >&2\n", endMark, endMark)
	if _, err := io.WriteString(b.stdin, script+mark); err != nil {
		t.Fatalf("bash: %v", err)
	}
	timeout := time.After(60 * time.Second)
	for got := 0; got < 2; got++ {
		select {
		case s, ok := <-b.out:
			if !ok {
				t.Fatal("bash exited")
			}
			stdout = s
		case s, ok := <-b.errs:
			if !ok {
				t.Fatal("bash exited")
			}
			stderr = s
		case <-timeout:
			t.Fatalf("the script did not end within 60 s:\n%s", script)
		}
	}
	return stdout, stderr
}

// TestAPIDocExamples runs docs/api.md's examples against htq serve on
// each backend.
func TestAPIDocExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it): %v", tool, err)
		}
	}
	blocks := docBlocks(t, apiDoc)
	if len(blocks) < 20 {
		t.Fatalf("found only %d sh blocks in %s", len(blocks), apiDoc)
	}
	backends(t, func(t *testing.T, broker string) {
		cfg := testConfig(t, broker)
		cfg.HTQAppKey, cfg.HTQAppToken = docHTQKey, docHTQToken
		svc := startService(t, cfg)
		sh := startBash(t, t.TempDir(), []string{"H=" + svc.URL(), "T=" + testToken, "K=" + docHTQKey, "S=" + docHTQToken})
		for _, b := range blocks {
			stdout, stderr := sh.run(t, b.script)
			where := fmt.Sprintf("%s:%d", apiDoc, b.line)
			var statuses []int
			for _, line := range strings.Split(stderr, "\n") {
				if code, ok := strings.CutPrefix(line, "HTTP "); ok {
					n, _ := strconv.Atoi(code)
					statuses = append(statuses, n)
				} else if strings.TrimSpace(line) != "" {
					t.Errorf("%s: the example wrote to standard error: %s", where, line)
				}
			}
			if len(statuses) == 0 {
				t.Errorf("%s: the example made no HTTP call:\n%s", where, b.script)
			}
			wantError := strings.HasPrefix(strings.TrimSpace(b.want), `{"error"`)
			for _, s := range statuses {
				if (s < 200 || s > 299) != wantError {
					t.Errorf("%s: the example answered HTTP %d:\n%s\n→ %s", where, s, b.script, stdout)
				}
			}
			if b.want == "" {
				continue
			}
			if err := matchJSONStream(b.want, stdout); err != nil {
				t.Errorf("%s: the output is not what the document shows: %v\nexample:\n%s\noutput:\n%s\ndocument:\n%s", where, err, b.script, stdout, b.want)
			}
		}
	})
}

// matchJSONStream compares the JSON values of got with those shown in
// want, one by one.
func matchJSONStream(want, got string) error {
	w, err := jsonValues(want)
	if err != nil {
		return fmt.Errorf("the document's JSON: %v", err)
	}
	g, err := jsonValues(got)
	if err != nil {
		return fmt.Errorf("the output is not JSON: %v", err)
	}
	if len(w) != len(g) {
		return fmt.Errorf("%d JSON values, the document shows %d", len(g), len(w))
	}
	for i := range w {
		if err := matchJSON("", w[i], g[i]); err != nil {
			return err
		}
	}
	return nil
}

func jsonValues(s string) ([]any, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var out []any
	for {
		var v any
		err := dec.Decode(&v)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
}

// ellipsis stands for what differs from run to run.
const ellipsis = "…"

// matchJSON compares a value got with the value the document shows.
func matchJSON(path string, want, got any) error {
	if path == "" {
		path = "."
	}
	switch w := want.(type) {
	case string:
		if w == ellipsis {
			return nil
		}
		g, ok := got.(string)
		if !ok {
			return fmt.Errorf("%s: %v, the document shows %q", path, got, w)
		}
		if _, err := time.Parse(time.RFC3339Nano, w); err == nil {
			if _, err := time.Parse(time.RFC3339Nano, g); err != nil {
				return fmt.Errorf("%s: %q is not a time, the document shows %q", path, g, w)
			}
			return nil
		}
		if pre, suf, ok := strings.Cut(w, ellipsis); ok {
			if !strings.HasPrefix(g, pre) || !strings.HasSuffix(g, suf) || len(g) < len(pre)+len(suf) {
				return fmt.Errorf("%s: %q, the document shows %q", path, g, w)
			}
			return nil
		}
		if g != w {
			return fmt.Errorf("%s: %q, the document shows %q", path, g, w)
		}
	case json.Number:
		g, ok := got.(json.Number)
		if !ok {
			return fmt.Errorf("%s: %v, the document shows %s", path, got, w)
		}
		wf, _ := w.Float64()
		gf, _ := g.Float64()
		if wf != gf {
			return fmt.Errorf("%s: %s, the document shows %s", path, g, w)
		}
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %v, the document shows an object", path, got)
		}
		_, more := w[ellipsis]
		for k, wv := range w {
			if k == ellipsis {
				continue
			}
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: no member %q", path, k)
			}
			if err := matchJSON(strings.TrimPrefix(path+"."+k, ".."), wv, gv); err != nil {
				return err
			}
		}
		if !more {
			for k := range g {
				if _, ok := w[k]; !ok {
					return fmt.Errorf("%s: member %q is not in the document (add it, or \"…\": \"…\" for members not shown)", path, k)
				}
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			return fmt.Errorf("%s: %v, the document shows an array", path, got)
		}
		if len(g) != len(w) {
			return fmt.Errorf("%s: %d elements, the document shows %d", path, len(g), len(w))
		}
		for i := range w {
			if err := matchJSON(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); err != nil {
				return err
			}
		}
	default: // true, false, null
		if !bytes.Equal(mustJSON(want), mustJSON(got)) {
			return fmt.Errorf("%s: %v, the document shows %v", path, got, want)
		}
	}
	return nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
