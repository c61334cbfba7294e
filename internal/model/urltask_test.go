package model

import (
	"reflect"
	"testing"
	"time"
)

// A URL task's due time is a field of its payload: it round-trips, the
// API view leaves it out byte for byte, and payloads written by earlier
// versions (the due time appended as the last member) read the same.
func TestURLTaskProcessAt(t *testing.T) {
	ut := &URLTask{URL: "http://example.com/", Method: "POST", Headers: map[string]string{"process_at": "no"}}
	plain, err := ut.Encode()
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	withDue := *ut
	withDue.ProcessAt = &due
	payload, err := withDue.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeURLTask(payload)
	if err != nil || back.ProcessAt == nil || !back.ProcessAt.Equal(due) {
		t.Fatalf("DecodeURLTask(%s) = %+v, %v", payload, back, err)
	}
	if got := WithoutProcessAt(payload); string(got) != string(plain) {
		t.Errorf("WithoutProcessAt(%s) = %s, want %s", payload, got, plain)
	}
	if got := WithoutProcessAt(plain); string(got) != string(plain) {
		t.Errorf("WithoutProcessAt(%s) = %s", plain, got)
	}
	old := append(plain[:len(plain)-1:len(plain)-1], []byte(`,"process_at":"2030-01-02T03:04:05.000000006Z"}`)...)
	back, err = DecodeURLTask(old)
	if err != nil || back.ProcessAt == nil || !back.ProcessAt.Equal(due) {
		t.Errorf("DecodeURLTask(%s) = %+v, %v", old, back, err)
	}
	back.ProcessAt = nil
	if !reflect.DeepEqual(back, ut) {
		t.Errorf("decoded %+v, want %+v", back, ut)
	}
	if got := WithoutProcessAt([]byte("not json")); string(got) != "not json" {
		t.Errorf("WithoutProcessAt(not json) = %s", got)
	}
}
