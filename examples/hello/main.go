// Command hello enqueues a few tasks and processes them with a Server, on
// the storage named by HTQ_STORAGE (default redis://127.0.0.1:6379/0).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/htqueue/htq"
)

func main() {
	url := os.Getenv("HTQ_STORAGE")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	st, err := htq.Open(url)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	done := make(chan string, 3)
	mux := htq.NewServeMux()
	mux.HandleFunc("greet", func(ctx context.Context, t *htq.Task) error {
		done <- fmt.Sprintf("hello, %s", t.Payload())
		return nil
	})
	srv := htq.NewServer(st, htq.Config{Concurrency: 4})
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()

	client := htq.NewClient(st)
	for _, name := range []string{"Ada", "Grace", "Linus"} {
		info, err := client.Enqueue(htq.NewTask("greet", []byte(name)), htq.ProcessIn(100*time.Millisecond))
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("enqueued %s (%s)\n", info.ID, info.State)
	}
	for i := 0; i < 3; i++ {
		fmt.Println(<-done)
	}
}
