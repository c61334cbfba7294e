package htq

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestEmbeddedStorage runs a Client and a Server on the file: store: a task
// enqueued before a restart survives it and runs after it.
func TestEmbeddedStorage(t *testing.T) {
	dir := t.TempDir()
	st, err := Open("file:" + dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := NewClient(st).Enqueue(NewTask("persist", []byte("x")), Retention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open("file:" + dir); err == nil {
		t.Fatal("a second Open of the same directory succeeded")
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = Open("file:" + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ran := make(chan string, 1)
	startServer(t, st, quietConfig(Config{}), HandlerFunc(func(ctx context.Context, task *Task) error {
		ran <- string(task.Payload())
		return nil
	}))
	if p := recv(t, ran, 5*time.Second, "task after reopen"); p != "x" {
		t.Fatalf("payload %q", p)
	}
	waitFor(t, 5*time.Second, "completed", func() bool {
		ti, err := brokerOf(st).GetTaskInfo(context.Background(), "default", info.ID)
		return err == nil && ti.State.String() == "completed"
	})
}

func TestMemStorageAndBadFileURL(t *testing.T) {
	st, err := Open("mem:")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := NewClient(st).Enqueue(NewTask("m", nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open("file:"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Open(file:) = %v", err)
	}
}
