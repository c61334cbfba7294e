package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/htqueue/htq"
)

// DependencyView is the outcome of one dependency of a workflow task as
// htq serve shows it to the task: in a pull worker's fetch answer and in
// the Htq-Dependencies header of a URL task's request.
type DependencyView struct {
	ID        string `json:"id"`
	Queue     string `json:"queue"`
	TaskID    string `json:"task_id"`
	OnFailure string `json:"on_failure"`
	Outcome   string `json:"outcome"`
	LastError string `json:"last_error,omitempty"`
	// Result is what the dependency stored as its result, as JSON when it
	// is valid JSON in UTF-8, else in ResultBase64. A URL task's result is
	// the JSON of its answer (status, headers, body).
	Result       json.RawMessage `json:"result,omitempty"`
	ResultBase64 []byte          `json:"result_base64,omitempty"`
	// ResultOmitted is set in a header that would have been too large
	// with the results (MaxDependencyHeader): read them with
	// GET /v1/workflows/{id}.
	ResultOmitted bool `json:"result_omitted,omitempty"`
}

// NewDependencyViews returns the views of a task's dependency results.
func NewDependencyViews(rs []*htq.DependencyResult) []DependencyView {
	out := make([]DependencyView, len(rs))
	for i, r := range rs {
		v := DependencyView{ID: r.ID, Queue: r.Queue, TaskID: r.TaskID, OnFailure: r.OnFailure.String(),
			Outcome: r.Outcome.String(), LastError: r.LastErr}
		if raw, ok := RawJSON(r.Result); ok {
			v.Result = raw
		} else if len(r.Result) > 0 {
			v.ResultBase64 = r.Result
		}
		out[i] = v
	}
	return out
}

// RawJSON returns data as a JSON value: the bytes themselves when they
// are valid JSON in valid UTF-8 (json.Valid alone takes invalid UTF-8
// inside strings, which encoding/json would copy into an answer as it is).
func RawJSON(data []byte) (json.RawMessage, bool) {
	if len(data) == 0 || !utf8.Valid(data) || !json.Valid(data) {
		return nil, false
	}
	return json.RawMessage(data), true
}

// MaxDependencyHeader bounds the Htq-Dependencies header of a URL task's
// request: past it, the results are left out (result_omitted), so that
// the request passes the header limits of common servers (8 KiB).
const MaxDependencyHeader = 6 << 10

// DependencyHeader returns the value of the Htq-Dependencies header: the
// views as compact JSON with every character outside printable ASCII
// escaped, without the results when it would be longer than
// MaxDependencyHeader.
func DependencyHeader(vs []DependencyView) (string, error) {
	s, err := asciiJSON(vs)
	if err != nil || len(s) <= MaxDependencyHeader {
		return s, err
	}
	short := make([]DependencyView, len(vs))
	for i, v := range vs {
		v.ResultOmitted = v.Result != nil || v.ResultBase64 != nil
		v.Result, v.ResultBase64 = nil, nil
		short[i] = v
	}
	return asciiJSON(short)
}

// asciiJSON encodes v as JSON whose every byte is printable ASCII: a
// header value may not carry control characters, and receivers read
// other bytes differently.
func asciiJSON(v any) (string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode dependencies: %w", err)
	}
	var b bytes.Buffer
	for _, r := range string(data) {
		switch {
		case r >= 0x20 && r < 0x7f:
			b.WriteRune(r)
		case r > 0xffff:
			r -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String(), nil
}
