package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/htqueue/htq/internal/dispatch"
	"github.com/htqueue/htq/webhook"
)

// How a worker of htq serve runs one URL task and decides what becomes of
// it.
func ExampleDispatcher_Dispatch() {
	secret, _ := webhook.GenerateSecret() // htq serve keeps it with its data
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		fmt.Fprintf(w, "got %s from %s", body, r.Header.Get("Htq-Queue"))
	}))
	defer target.Close()

	signer, err := webhook.NewSigner(secret)
	if err != nil {
		log.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{
		Signer: signer,
		Allow:  []string{"127.0.0.0/8"}, // the target is on loopback; refused by default
	})
	if err != nil {
		log.Fatal(err)
	}
	defer d.Close()

	res, err := d.Dispatch(context.Background(), dispatch.Request{
		TaskID: "01J9Z3K6Q8", Queue: "emails", RetryCount: 0,
		URL: target.URL + "/send", Method: "POST",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   []byte(`{"to":"a@example.com"}`),
	})
	switch (dispatch.Policy{}).Classify(err) {
	case dispatch.Succeeded:
		fmt.Println(res.Status, string(res.Body))
	case dispatch.Retry:
		after, _ := dispatch.RetryAfter(err) // at least this long, if the target said so
		fmt.Println("retry no sooner than", after, err)
	case dispatch.Archive:
		fmt.Println("archive:", err)
	}
	// Output: 200 got {"to":"a@example.com"} from emails
}

// The target guard refuses private and local addresses at dial time.
func ExampleGuard() {
	signer, _ := webhook.NewSigner("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	d, _ := dispatch.New(dispatch.Config{Signer: signer})
	defer d.Close()

	_, err := d.Dispatch(context.Background(), dispatch.Request{
		TaskID: "t1", Queue: "q", URL: "http://169.254.169.254/latest/meta-data/",
	})
	var te *dispatch.TargetError
	fmt.Println(errors.Is(err, dispatch.ErrTargetNotAllowed), errors.As(err, &te) && te.Addr == "169.254.169.254:80")
	fmt.Println((dispatch.Policy{}).Classify(err))
	// Output:
	// true true
	// archive
}

// The intervals of a variable queue with a stepping time of 10 s and a
// maximum of 25 s.
func ExampleNextInterval() {
	var interval time.Duration
	for _, answer := range []string{"working", "working", "working", "reset", "working", "done"} {
		next, done := dispatch.NextInterval([]byte(answer), nil, interval, 10*time.Second, 25*time.Second)
		if done {
			fmt.Println(answer, "-> the task ends")
			break
		}
		fmt.Println(answer, "-> next run in", next)
		interval = next
	}
	// Output:
	// working -> next run in 10s
	// working -> next run in 20s
	// working -> next run in 25s
	// reset -> next run in 10s
	// working -> next run in 20s
	// done -> the task ends
}
