package api

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/apitoken"
	"github.com/htqueue/htq/internal/storage"
)

// With a stored token set, the handler accepts the stored token; a
// rotation through POST /v1/token/rotate makes a new one and keeps the
// old one for the grace period, during which only the new one may rotate.
func TestTokenRotate(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			first, _ := apitoken.Generate()
			e := newEnv(t, backend, func(o *Options) {
				ms := storage.BrokerOf(o.Storage)
				if err := ms.PutMeta(context.Background(), apitoken.CurrentKey, []byte(first)); err != nil {
					t.Fatal(err)
				}
				c, err := apitoken.NewChecker(context.Background(), ms, apitoken.CheckerOptions{Logger: discardLogger()})
				if err != nil {
					t.Fatal(err)
				}
				o.Tokens = c
			})
			get := func(tok string) int {
				status, _ := e.callAuth("GET", "/v1/queues", "Bearer "+tok, nil, nil)
				return status
			}
			if get(first) != http.StatusOK || get(testToken) != http.StatusUnauthorized {
				t.Fatal("the stored token is not the one accepted")
			}
			var out rotateResponse
			before := time.Now()
			status, data := e.callAuth("POST", "/v1/token/rotate", "Bearer "+first, map[string]any{"grace": "1h"}, &out)
			if status != http.StatusOK || out.Token == "" || out.Token == first || out.PreviousValidUntil == nil ||
				out.PreviousValidUntil.Before(before.Add(59*time.Minute)) {
				t.Fatalf("rotate: %d %s", status, data)
			}
			if get(first) != http.StatusOK || get(out.Token) != http.StatusOK {
				t.Error("old or new token refused during the grace period")
			}
			status, data = e.callAuth("POST", "/v1/token/rotate", "Bearer "+first, map[string]any{"grace": 0}, nil)
			if status != http.StatusUnauthorized || errCode(data) != codeUnauthorized {
				t.Errorf("rotate with the old token: %d %s", status, data)
			}
			for _, body := range []string{`{"grace":"-1s"}`, `{"grace":"9999h"}`, `{"grace":"soon"}`, `{"gracee":1}`} {
				status, data = e.callAuth("POST", "/v1/token/rotate", "Bearer "+out.Token, body, nil)
				if status != http.StatusBadRequest {
					t.Errorf("rotate %s: %d %s", body, status, data)
				}
			}
			second := out.Token
			out = rotateResponse{}
			status, data = e.callAuth("POST", "/v1/token/rotate", "Bearer "+second, map[string]any{"grace": 0}, &out)
			if status != http.StatusOK || out.PreviousValidUntil != nil {
				t.Fatalf("rotate without grace: %d %s", status, data)
			}
			if get(second) != http.StatusUnauthorized || get(first) != http.StatusOK || get(out.Token) != http.StatusOK {
				t.Error("after a rotation without grace: the replaced token must go, the one in its grace stay")
			}
		})
	}
}

// A handler given a fixed token refuses to rotate it.
func TestTokenRotateConfigured(t *testing.T) {
	e := newEnv(t, "embedded", nil)
	status, data := e.call("POST", "/v1/token/rotate", map[string]any{"grace": "1h"}, nil)
	if status != http.StatusBadRequest || errCode(data) != codeInvalidArgument {
		t.Errorf("rotate of a configured token: %d %s", status, data)
	}
}
