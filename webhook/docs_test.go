package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The PHP and Python verifiers of docs/webhooks.md must accept what the
// Signer makes and refuse what Verify refuses. They run when php and
// python3 are installed.

const docsPath = "../docs/webhooks.md"

// codeBlock returns the first fenced block of lang in the document, cut
// before the line holding cut (if any).
func codeBlock(t *testing.T, lang, cut string) string {
	t.Helper()
	doc, err := os.ReadFile(docsPath)
	if err != nil {
		t.Fatalf("read %s: %v", docsPath, err)
	}
	_, rest, ok := strings.Cut(string(doc), "```"+lang+"\n")
	if !ok {
		t.Fatalf("no %s block in %s", lang, docsPath)
	}
	block, _, _ := strings.Cut(rest, "```\n")
	if cut != "" {
		if i := strings.Index(block, cut); i >= 0 {
			block = block[:i]
		}
	}
	return block
}

type docCase struct {
	name   string
	secret string
	header http.Header
	body   []byte
	ok     bool
}

func docCases(t *testing.T) []docCase {
	oldS, _ := GenerateSecret()
	newS, _ := GenerateSecret()
	now := time.Now()
	body := []byte("{\"a\":1,\"bin\":\"\x00\xff\"}\n")
	sign := func(ts time.Time, secrets ...string) http.Header {
		return mustSigner(t, secrets...).Sign("01J9Z3K6Q8", ts, body)
	}
	tampered := sign(now, oldS)
	tampered.Set(HeaderID, "01J9Z3K6Q9")
	noSig := sign(now, oldS)
	noSig.Del(HeaderSignature)
	return []docCase{
		{"valid", oldS, sign(now, oldS), body, true},
		{"rotation, old key", oldS, sign(now, oldS, newS), body, true},
		{"rotation, new key", newS, sign(now, oldS, newS), body, true},
		{"other key", newS, sign(now, oldS), body, false},
		{"body changed", oldS, sign(now, oldS), append(body[:len(body):len(body)], ' '), false},
		{"id changed", oldS, tampered, body, false},
		{"too old", oldS, sign(now.Add(-6*time.Minute), oldS), body, false},
		{"too new", oldS, sign(now.Add(6*time.Minute), oldS), body, false},
		{"missing signature", oldS, noSig, body, false},
		{"empty body", oldS, mustSigner(t, oldS).Sign("x", now, nil), nil, true},
	}
}

// runDocVerifier feeds the cases as a JSON list to the program and
// expects one line per case, "ok" or "refused…", in agreement with Verify.
func runDocVerifier(t *testing.T, name string, args ...string) {
	cases := docCases(t)
	var in []map[string]any
	for _, c := range cases {
		if err := Verify(c.secret, c.header, c.body); (err == nil) != c.ok {
			t.Fatalf("%s: Verify = %v, the case is wrong", c.name, err)
		}
		in = append(in, map[string]any{
			"secret": c.secret,
			"headers": map[string]string{
				"webhook-id":        c.header.Get(HeaderID),
				"webhook-timestamp": c.header.Get(HeaderTimestamp),
				"webhook-signature": c.header.Get(HeaderSignature),
			},
			"body": base64.StdEncoding.EncodeToString(c.body),
		})
	}
	data, _ := json.Marshal(in)
	cmd := exec.Command(name, args...)
	cmd.Stdin = bytes.NewReader(data)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%s printed %d lines for %d cases:\n%s", name, len(lines), len(cases), out)
	}
	for i, c := range cases {
		want := "refused"
		if c.ok {
			want = "ok"
		}
		if !strings.HasPrefix(lines[i], want) {
			t.Errorf("%s: the %s verifier says %q, want %s", c.name, name, lines[i], want)
		}
	}
}

func TestDocsPHP(t *testing.T) {
	if _, err := exec.LookPath("php"); err != nil {
		t.Fatal("php is needed to check the PHP example of docs/webhooks.md: run `make deps` (apt-get install php-cli)")
	}
	src := codeBlock(t, "php", "// The endpoint.") + `
foreach (json_decode(stream_get_contents(STDIN), true) as $in) {
    $headers = array_filter($in['headers'], fn($v) => $v !== '');
    try {
        htq_verify($in['secret'], $headers, base64_decode($in['body']));
        echo "ok\n";
    } catch (RuntimeException $e) {
        echo "refused: " . $e->getMessage() . "\n";
    }
}
`
	f := writeTemp(t, "verify.php", src)
	runDocVerifier(t, "php", f)
}

func TestDocsPython(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatal("python3 is needed to check the Python example of docs/webhooks.md: run `make deps` (apt-get install python3)")
	}
	src := codeBlock(t, "python", "") + `

import base64 as _b64, json as _json, sys as _sys

for _in in _json.load(_sys.stdin):
    _headers = {k: v for k, v in _in["headers"].items() if v}
    try:
        htq_verify(_in["secret"], _headers, _b64.b64decode(_in["body"]))
        print("ok")
    except WebhookError as e:
        print("refused:", e)
`
	f := writeTemp(t, "verify.py", src)
	runDocVerifier(t, "python3", f)
}

func writeTemp(t *testing.T, name, src string) string {
	t.Helper()
	f := t.TempDir() + "/" + name
	if err := os.WriteFile(f, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
