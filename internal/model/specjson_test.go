package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
)

// decodeStd reads b as the API's decoder does: one value, unknown fields
// refused, nothing but white space after it.
func decodeStd(b []byte, s *TaskSpec) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

// specSeeds are bodies clients send, and near misses DecodeSpec leaves
// to encoding/json.
var specSeeds = []string{
	`{"url":"http://127.0.0.1:1/x","method":"POST","body":"{}","options":{"delay":3600}}`,
	`{"type":"bench","payload":{"i":1,"d":"xxxx"}}`,
	` {"type":"t","payload":[1,2,{"a":null}],"options":{"max_retry":3,"timeout":"30s","retention":"24h","priority":9,"task_id":"id-1"}} `,
	`{"url":"https://example.com/a?b=c","headers":{"X-A":"1","X-B":"\u00e9\"q"},"body":"{\"k\":\"v\"}","timeout_ms":5000,"options":{"process_at":"2026-12-01T10:00:00Z","deadline":"2026-12-02T10:00:00.5+01:00","unique":60,"key":"k","callback":"http://a/b","failure_callback":"http://a/c"}}`,
	`{"type":"t","payload_base64":"AAEC"}`,
	`{"url":"http://a/","body_base64":"AAEC","headers":{}}`,
	`{"url":"http://a/","headers":[]}`,
	`{"url":"http://a/","variable":{"interval_s":5}}`,
	`{"url":"http://a/","options":[]}`,
	`{"url":"http://a/","options":null}`,
	`{"type":"t","payload":null}`,
	`{"type":"t","type":"u"}`,
	`{"Type":"t"}`,
	`{"typ\u0065":"t"}`,
	`{"type":"t","options":{"delay":"-1x"}}`,
	`{"type":"t","options":{"max_retry":1.5}}`,
	`{"type":"t","options":{"max_retry":99999999999999999999}}`,
	`{"type":"t","options":{"group":"g","delay":null}}`,
	`{"type":"t\xff","payload":"\xfe"}`,
	`{"type":"t"} {}`,
	`{"type":"t"`,
	`{"url":"http://a/","timeout_ms":"5"}`,
	`{"url":"http://a/","headers":{"a":1}}`,
	`[]`,
	`"x"`,
}

// FuzzDecodeSpec checks that every body DecodeSpec reads, encoding/json
// reads to the same TaskSpec, and that what DecodeSpec reads shares no
// memory with the body (the API reads bodies into pooled buffers).
func FuzzDecodeSpec(f *testing.F) {
	for _, s := range specSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, std TaskSpec
		body := bytes.Clone(b)
		if !DecodeSpec(body, &fast) {
			return
		}
		for i := range body {
			body[i] = 'X'
		}
		if err := decodeStd(b, &std); err != nil {
			t.Fatalf("DecodeSpec read %q, encoding/json refuses it: %v", b, err)
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q:\nDecodeSpec    %#v\nencoding/json %#v", b, fast, std)
		}
	})
}

// DecodeSpec reads the bodies clients send (the cost of the others is
// encoding/json's, as before).
func TestDecodeSpecTakesCommonBodies(t *testing.T) {
	for _, s := range specSeeds[:6] {
		var spec TaskSpec
		if !DecodeSpec([]byte(s), &spec) {
			t.Errorf("DecodeSpec leaves %s to encoding/json", s)
		}
	}
	for _, s := range specSeeds[6:] {
		var spec TaskSpec
		if DecodeSpec([]byte(s), &spec) {
			t.Errorf("DecodeSpec reads %s", s)
		}
	}
}

// FuzzDecodeSpecs checks that every batch body DecodeSpecs reads,
// encoding/json reads to the same tasks (as the API's batch request).
func FuzzDecodeSpecs(f *testing.F) {
	for _, s := range specSeeds {
		f.Add([]byte(`{"tasks":[` + s + `]}`))
		f.Add([]byte(`{"tasks":[` + s + `, ` + s + `]}`))
	}
	for _, s := range []string{`{"tasks":[]}`, `{"tasks":null}`, `{"tasks":[],"tasks":[]}`, `{"tasks":[{"type":"a"}],"x":1}`, ` { "tasks" : [ {"type":"a"} , {"url":"http://a/"} ] } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast []TaskSpec
		body := bytes.Clone(b)
		if !DecodeSpecs(body, &fast) {
			return
		}
		for i := range body {
			body[i] = 'X'
		}
		var std struct {
			Tasks []TaskSpec `json:"tasks"`
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&std); err != nil {
			t.Fatalf("DecodeSpecs read %q, encoding/json refuses it: %v", b, err)
		}
		if _, err := dec.Token(); err != io.EOF {
			t.Fatalf("DecodeSpecs read %q, encoding/json finds data after it", b)
		}
		if !reflect.DeepEqual(fast, std.Tasks) {
			t.Fatalf("%q:\nDecodeSpecs   %#v\nencoding/json %#v", b, fast, std.Tasks)
		}
	})
}
