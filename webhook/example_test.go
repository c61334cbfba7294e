package webhook_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/htqueue/htq/webhook"
)

// A sender signs a message; the three headers go with the request.
func ExampleSigner_Sign() {
	s, err := webhook.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		log.Fatal(err)
	}
	h := s.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`))
	fmt.Println(h.Get("webhook-id"))
	fmt.Println(h.Get("webhook-timestamp"))
	fmt.Println(h.Get("webhook-signature"))
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek
	// 1614265330
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

// During a key rotation the sender signs with both keys; a receiver holding
// either one accepts the request.
func ExampleNewSigner_rotation() {
	oldSecret, _ := webhook.GenerateSecret()
	newSecret, _ := webhook.GenerateSecret()
	s, _ := webhook.NewSigner(oldSecret, newSecret)
	body := []byte("hello")
	h := s.Sign("task-1", time.Now(), body)

	fmt.Println(len(strings.Fields(h.Get("webhook-signature"))), "signatures")
	fmt.Println("old key:", webhook.Verify(oldSecret, h, body))
	fmt.Println("new key:", webhook.Verify(newSecret, h, body))
	// Output:
	// 2 signatures
	// old key: <nil>
	// new key: <nil>
}

// A receiver verifies the raw body before trusting anything in it, and
// answers 2xx only once the work is done (htq retries on 5xx).
func ExampleVerifier_Verify() {
	secret, _ := webhook.GenerateSecret() // in real life: from the receiver's configuration
	v, err := webhook.NewVerifier(secret)
	if err != nil {
		log.Fatal(err)
	}

	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := v.Verify(r.Header, body); err != nil {
			// 4xx: htq archives the task instead of retrying it.
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// webhook-id is the htq task ID, the same on every retry: use it to
		// ignore a request already handled.
		fmt.Fprintf(w, "handled %s", r.Header.Get("webhook-id"))
	})

	srv := httptest.NewServer(handler)
	defer srv.Close()

	s, _ := webhook.NewSigner(secret)
	body := []byte(`{"order":42}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(string(body)))
	s.SignRequest(req, "task-42", time.Now(), body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(out))
	// Output: 200 handled task-42
}

// Verify's errors tell why a request was refused.
func ExampleVerify_errors() {
	secret, _ := webhook.GenerateSecret()
	s, _ := webhook.NewSigner(secret)
	body := []byte("x")

	stale := s.Sign("task-1", time.Now().Add(-10*time.Minute), body)
	err := webhook.Verify(secret, stale, body)
	fmt.Println(errors.Is(err, webhook.ErrTimestampTooOld))

	fresh := s.Sign("task-1", time.Now(), body)
	err = webhook.Verify(secret, fresh, []byte("y"))
	fmt.Println(errors.Is(err, webhook.ErrInvalidSignature))

	err = webhook.Verify(secret, http.Header{}, body)
	fmt.Println(errors.Is(err, webhook.ErrMissingHeaders))
	// Output:
	// true
	// true
	// true
}

func ExampleGenerateSecret() {
	secret, err := webhook.GenerateSecret()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.HasPrefix(secret, "whsec_"), len(secret))
	// Output: true 50
}
