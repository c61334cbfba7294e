package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/queuemeta"
)

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
