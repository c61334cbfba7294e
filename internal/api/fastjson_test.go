package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/queuemeta"
)

// specBodies are bodies of a single enqueue, read and unread by the fast
// path.
var specBodies = []string{
	`{"type":"a","payload":{"i":1,"d":"x"}}`,
	` { "type" : "a" , "payload" : [1, 2.5e3, "s\"}]", true, false, null, {"k":{}}] } `,
	`{"type":"a","payload":"a string with \\ escapes \u00e9"}`,
	`{"type":"a","payload":["x\\",{"k":"\\\"}"},"\\\\"],"payload_base64":"AA=="}`, `{"type":"a","payload":"\\"}`,
	`{"type":"a","payload":12}`, `{"type":"a","payload":-0.5}`, `{"type":"a","payload":true}`,
	`{"type":"a","payload":null}`, `{"type":"a","payload_base64":"AAEC"}`,
	`{"type":"a","payload":{"n":1},"options":{"max_retry":3,"delay":"1m","unique":90,"task_id":"x","group":"g","retention":"1h","timeout":"5s"}}`,
	`{"type":"a","options":{"process_at":"2030-01-02T03:04:05.5Z","deadline":"2031-01-02T03:04:05+02:00"}}`,
	`{"type":"a","options":null}`, `{"type":"a","options":{"nope":1}}`, `{"type":"a","options":{"max_retry":"x"}}`,
	`{"url":"http://example.com/x","method":"put","headers":{"A":"b"},"body":"hello","timeout_ms":1500}`,
	`{"url":"http://example.com/x","body_base64":"AAEC","variable":{"interval_s":2}}`,
	`{"url":"http://example.com/x","headers":null,"body":null}`, `{"url":"http://example.com/x","timeout_ms":1.5}`,
	`{"url":"http://example.com/x","timeout_ms":99999999999999999999}`, `{"url":"http://example.com/x","variable":{"x":1}}`,
	`{"Type":"a"}`, `{"type":"a","type":"b"}`, `{"type":"a\u00e9"}`, `{"type":1}`, `{"type":null}`, `{"typo":"a"}`,
	`{}`, `[]`, `"x"`, `null`, ``, ` `, `{"type":"a"} x`, `{"type":"a"}{}`, `{"type":"a"`, `{"type":"a",}`,
	`{"type":"a","payload":{"i":1}}` + "\n",
}

// decodeStd decodes body as decodeJSON does.
func decodeStd(body []byte, v any) error { return decodeFrom(bytes.NewReader(body), v) }

// TestFastSpecMatchesEncodingJSON: whatever the fast path reads, it reads
// as encoding/json does.
func TestFastSpecMatchesEncodingJSON(t *testing.T) {
	fast := 0
	for _, body := range specBodies {
		var want TaskSpec
		wantErr := decodeStd([]byte(body), &want)
		if !json.Valid([]byte(body)) {
			if wantErr == nil {
				t.Errorf("%s: encoding/json takes an invalid body", body)
			}
			continue
		}
		var got TaskSpec
		p := parser{b: []byte(body)}
		p.ws()
		if !p.spec(&got) {
			continue
		}
		fast++
		if wantErr != nil {
			t.Errorf("%s: fast path took a body encoding/json refuses (%v)", body, wantErr)
			continue
		}
		if !reflect.DeepEqual(normSpec(got), normSpec(want)) {
			t.Errorf("%s:\n fast %+v\n std  %+v", body, got, want)
		}
	}
	if fast < 10 {
		t.Errorf("fast path read only %d bodies", fast)
	}
}

// normSpec makes an empty payload nil (encoding/json leaves a missing one
// nil as the fast path does; this only guards against []byte{} vs nil).
func normSpec(s TaskSpec) TaskSpec {
	if len(s.Payload) == 0 {
		s.Payload = nil
	}
	return s
}

func TestFastBatchMatchesEncodingJSON(t *testing.T) {
	var elems []string
	for _, b := range specBodies {
		if strings.HasPrefix(strings.TrimSpace(b), "{") && json.Valid([]byte(b)) {
			elems = append(elems, b)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	bodies := []string{`{"tasks":[]}`, `{"tasks":null}`, `{}`, `{"tasks":[1]}`, `{"tasks":[{"type":"a"}],"x":1}`,
		`{"tasks":[{"type":"a"}],"tasks":[]}`, `{"Tasks":[{"type":"a"}]}`, ` {"tasks" : [ {"type":"a"} , {"type":"b"} ] } `}
	for range 200 {
		n := 1 + r.IntN(6)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = elems[r.IntN(len(elems))]
		}
		bodies = append(bodies, `{"tasks":[`+strings.Join(parts, ",")+`]}`)
	}
	fast := 0
	for _, body := range bodies {
		var want batchRequest
		wantErr := decodeStd([]byte(body), &want)
		var got batchRequest
		p := parser{b: []byte(body)}
		p.ws()
		if !json.Valid([]byte(body)) || !p.batch(&got) {
			continue
		}
		fast++
		if wantErr != nil {
			t.Errorf("%s: fast path took a body encoding/json refuses (%v)", body, wantErr)
			continue
		}
		if len(got.Tasks) != len(want.Tasks) {
			t.Errorf("%s: %d tasks, want %d", body, len(got.Tasks), len(want.Tasks))
			continue
		}
		for i := range got.Tasks {
			if !reflect.DeepEqual(normSpec(got.Tasks[i]), normSpec(want.Tasks[i])) {
				t.Errorf("%s: task %d:\n fast %+v\n std  %+v", body, i, got.Tasks[i], want.Tasks[i])
			}
		}
	}
	if fast < 20 {
		t.Errorf("fast path read only %d bodies", fast)
	}
}

// TestAppendEnqueuedMatchesEncodingJSON: the answers written by hand are
// those encoding/json writes.
func TestAppendEnqueuedMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 120000000, time.UTC)
	whole := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range []enqueueResponse{
		{ID: "0b6e1c8e-1d1a-4bfa-8f1f-3a1b2c3d4e5f", Queue: "q", Type: "t", State: "pending", NextProcessAt: &at},
		{ID: "x", Queue: "q", Type: "t", State: "scheduled", NextProcessAt: &whole},
		{ID: "<&>", Queue: "é", Type: "a\"b\\c\n\x01\u2028", State: "aggregating"},
	} {
		var want bytes.Buffer
		_ = json.NewEncoder(&want).Encode(r)
		got := append(appendEnqueued(nil, &r), '\n')
		if string(got) != want.String() {
			t.Errorf("\n got %s want %s", got, want.String())
		}
	}
}

func TestDueTime(t *testing.T) {
	due := time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	ut := &queuemeta.URLTask{URL: "http://example.com/", Method: "POST", Headers: map[string]string{"process_at": "no"}}
	payload, err := ut.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := DueTime(payload); ok {
		t.Errorf("due time found in %s", payload)
	}
	with := WithDueTime(payload, due)
	got, ok := DueTime(with)
	if !ok || !got.Equal(due) {
		t.Errorf("DueTime(%s) = %v, %v", with, got, ok)
	}
	back, err := queuemeta.DecodeURLTask(with)
	if err != nil || !reflect.DeepEqual(back, ut) {
		t.Errorf("DecodeURLTask(%s) = %+v, %v", with, back, err)
	}
	if got := WithoutDueTime(with); string(got) != string(payload) {
		t.Errorf("WithoutDueTime(%s) = %s", with, got)
	}
	empty := WithDueTime([]byte(`{}`), due)
	if _, ok := DueTime(empty); !ok || !json.Valid(empty) || string(WithoutDueTime(empty)) != `{}` {
		t.Errorf("WithDueTime({}) = %s", empty)
	}
}

// FuzzFastJSON feeds the same bytes to the enqueue decoders (the scanner
// with its fall-back to encoding/json, as the handlers call them) and to
// encoding/json alone, as a single task and as a batch, and fails on any
// difference: one accepts what the other refuses, the errors differ, or
// the decoded values do. The body is also wrapped as the task of a batch,
// and twice, so that the batch scanner reads what the fuzzer makes.
func FuzzFastJSON(f *testing.F) {
	for _, b := range specBodies {
		f.Add([]byte(b))
	}
	for _, b := range []string{
		`{"tasks":[{"type":"a","payload":{"i":1}},{"type":"a"},{"type":"b","payload":[1,2]}]}`,
		`{"tasks":[]}`, `{"tasks":null}`, `{"tasks":[{"url":"http://h/x","headers":{"a":"b"},"body":"x"}]}`,
		`{"type":"a","payload":{"i":1}`, `{"type":"a","payload":}`, `{"type":"a" "payload":1}`, `{"type":"a\"}`,
		`{"type":"a","payload":[1,2}`, `{"type":"a","payload":"\x"}`, `{"type":"a","timeout_ms":-}`, "{\"type\":\"a\x00\"}",
		`{"type":"a","payload":{"k":"v"}}}`, `{"tasks":[{"type":"a"},]}`, `{"tasks":[{"type":"a"}`, `{"tasks":{}}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		sameSpec(t, body)
		sameBatch(t, body)
		sameBatch(t, []byte(`{"tasks":[`+string(body)+`]}`))
		sameBatch(t, []byte(`{"tasks":[`+string(body)+`,`+string(body)+`]}`))
	})
}

// sameSpec fails unless specFromBody decodes body as encoding/json does.
func sameSpec(t *testing.T, body []byte) {
	t.Helper()
	var got, want TaskSpec
	gotErr := specFromBody(slices.Clone(body), nil, &got)
	wantErr := decodeStd(body, &want)
	if !sameErr(gotErr, wantErr) {
		t.Fatalf("spec %q:\n fast error %v\n std  error %v", body, gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(normSpec(got), normSpec(want)) {
		t.Fatalf("spec %q:\n fast %s\n std  %s", body, dump(got), dump(want))
	}
}

// sameBatch fails unless batchFromBody decodes body as encoding/json does.
func sameBatch(t *testing.T, body []byte) {
	t.Helper()
	var got, want batchRequest
	gotErr := batchFromBody(slices.Clone(body), nil, &got)
	wantErr := decodeStd(body, &want)
	if !sameErr(gotErr, wantErr) {
		t.Fatalf("batch %q:\n fast error %v\n std  error %v", body, gotErr, wantErr)
	}
	if wantErr != nil {
		return
	}
	if (got.Tasks == nil) != (want.Tasks == nil) || len(got.Tasks) != len(want.Tasks) {
		t.Fatalf("batch %q:\n fast %s\n std  %s", body, dump(got), dump(want))
	}
	for i := range got.Tasks {
		if !reflect.DeepEqual(normSpec(got.Tasks[i]), normSpec(want.Tasks[i])) {
			t.Fatalf("batch %q: task %d:\n fast %s\n std  %s", body, i, dump(got.Tasks[i]), dump(want.Tasks[i]))
		}
	}
}

// sameErr reports whether two decoding errors are both nil or both the
// same error.
func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Error() == b.Error()
}

// dump shows a decoded value with its strings quoted (a difference in
// bytes that print alike shows) and its pointers followed.
func dump(v any) string {
	switch v := v.(type) {
	case TaskSpec:
		s := fmt.Sprintf("%#v", v)
		if v.Body != nil {
			s += fmt.Sprintf(" body=%q", *v.Body)
		}
		if v.Variable != nil {
			s += fmt.Sprintf(" variable=%#v", *v.Variable)
		}
		if v.Options != nil {
			s += fmt.Sprintf(" options=%+v", *v.Options)
		}
		return s
	case batchRequest:
		s := fmt.Sprintf("%d tasks (nil: %t)", len(v.Tasks), v.Tasks == nil)
		for _, t := range v.Tasks {
			s += "\n  " + dump(t)
		}
		return s
	}
	return fmt.Sprintf("%#v", v)
}
