package service

import (
	"errors"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/internal/model"
	"github.com/htqueue/htq/webhook"
)

// FuzzURLTaskAgreesWithDispatch checks that a URL task the API accepts is
// one the URL worker can send: when model.URLTask.Validate and the
// target check at enqueue (checkTarget) accept a task, the task stored as
// JSON decodes to the same task, and the request the worker builds from
// it passes every check the dispatcher makes before sending. So no task
// is accepted with 201 and then archived unsent at its first dispatch.
func FuzzURLTaskAgreesWithDispatch(f *testing.F) {
	secret, err := webhook.GenerateSecret()
	if err != nil {
		f.Fatal(err)
	}
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		f.Fatal(err)
	}
	disp, err := dispatch.New(dispatch.Config{Signer: signer, MaxTimeout: model.MaxRequestTimeout})
	if err != nil {
		f.Fatal(err)
	}
	defer disp.Close()
	s := &Service{disp: disp}
	x := &urlHandler{disp: disp, defaults: model.Defaults{DispatchTimeout: DefaultDispatchTimeout}}
	q := model.New("q", model.ModeRealTime, time.Now())

	f.Add("http://example.com/", "POST", "X-A", "v", "body", "", int64(0))
	f.Add("http://127.0.0.1:0/", "GET", "Expect", "100", "", "AAE=", int64(1800001))
	f.Add("https://[::1]:443/a?b", "PUT", "X-B", "a\x01b", "\xff", "", int64(-1))
	f.Fuzz(func(t *testing.T, rawURL, method, hname, hvalue, body, bodyB64 string, timeoutMS int64) {
		ut := &model.URLTask{URL: rawURL, Method: method, Headers: map[string]string{hname: hvalue},
			Body: body, BodyBase64: bodyB64, TimeoutMS: timeoutMS}
		u, err := ut.Validate()
		if err != nil {
			return
		}
		if err := s.checkTarget(t.Context(), u); err != nil {
			return
		}
		payload, err := ut.Encode()
		if err != nil {
			t.Fatalf("accepted task %+v does not encode: %v", ut, err)
		}
		stored, err := model.DecodeURLTask(payload)
		if err != nil || !reflect.DeepEqual(stored, ut) {
			t.Fatalf("accepted task %+v is stored as %+v (%v)", ut, stored, err)
		}
		req, err := x.request("id", "q", 0, q, stored)
		if err != nil {
			t.Fatalf("accepted task %+v: the worker builds no request: %v", ut, err)
		}
		if err := disp.Validate(req); err != nil {
			t.Fatalf("accepted task %+v (%s) is refused by the dispatcher: %v", ut, u, err)
		}
	})
}

// A malformed target is a 400 (ErrInvalidArgument), a refused one not.
func TestCheckTargetKinds(t *testing.T) {
	secret, _ := webhook.GenerateSecret()
	signer, err := webhook.NewSigner(secret)
	if err != nil {
		t.Fatal(err)
	}
	disp, err := dispatch.New(dispatch.Config{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	defer disp.Close()
	s := &Service{disp: disp}
	for raw, malformed := range map[string]bool{"http://127.0.0.1:0/": true, "http://127.0.0.1:80/": false} {
		u, _ := url.Parse(raw)
		err := s.checkTarget(t.Context(), u)
		if err == nil || errors.Is(err, dispatch.ErrTargetNotAllowed) == malformed {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
