package apiclient_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/model"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/service"
)

func TestMain(m *testing.M) { leaktest.Main(m, redistest.StopShared) }

const token = "apiclient-test-token-0123456789"

// backends runs fn against a real htq serve (in this process, over real
// HTTP) on each storage backend.
func backends(t *testing.T, fn func(t *testing.T, svc *service.Service)) {
	for name, broker := range map[string]func(t *testing.T) string{
		"redis":    func(t *testing.T) string { return redistest.URL(t) },
		"embedded": func(t *testing.T) string { return "file:" + filepath.Join(t.TempDir(), "data") },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			svc, err := service.Start(ctx, service.Config{
				Addr: "127.0.0.1:0", Storage: broker(t), Token: token, TimeZone: "UTC",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Stdout: io.Discard,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				svc.Shutdown(ctx)
			})
			fn(t, svc)
		})
	}
}

func newClient(t *testing.T, server, tok string) *apiclient.Client {
	t.Helper()
	c, err := apiclient.New(server, apiclient.Options{Token: tok, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Every call against a real service, and the sentinel errors its failures
// come back as.
func TestCalls(t *testing.T) {
	backends(t, func(t *testing.T, svc *service.Service) {
		ctx := context.Background()
		c := newClient(t, svc.URL(), token)
		in := &model.TaskSpec{Type: "email", Payload: []byte(`{"to":"a@b.c"}`)}
		enq, err := c.Enqueue(ctx, "mail", in)
		if err != nil || enq.ID == "" || enq.State != "pending" || enq.Queue != "mail" {
			t.Fatalf("Enqueue = %+v, %v", enq, err)
		}
		delay := model.Duration(time.Hour)
		later, err := c.Enqueue(ctx, "mail", &model.TaskSpec{Type: "email", Options: &model.TaskOptions{Delay: &delay}})
		if err != nil || later.State != "scheduled" || later.NextProcessAt == nil {
			t.Fatalf("Enqueue later = %+v, %v", later, err)
		}
		if _, err := c.Enqueue(ctx, "mail", &model.TaskSpec{}); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("Enqueue of nothing = %v; want ErrInvalidArgument", err)
		}
		var apiErr *apiclient.Error
		if _, err := c.Enqueue(ctx, "mail", &model.TaskSpec{URL: "http://127.0.0.1/x"}); !errors.Is(err, model.ErrModeMismatch) ||
			!errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Code != "queue_mode_mismatch" {
			t.Errorf("URL task into a pull queue = %v (%+v); want 409 queue_mode_mismatch", err, apiErr)
		}

		qs, err := c.Queues(ctx)
		if err != nil || len(qs) != 1 || qs[0].Name != "mail" || qs[0].Mode != model.ModePull || qs[0].Stats.Pending != 1 || qs[0].Stats.Scheduled != 1 {
			t.Fatalf("Queues = %+v, %v", qs, err)
		}
		if err := c.PauseQueue(ctx, "mail"); err != nil {
			t.Fatal(err)
		}
		q, err := c.Queue(ctx, "mail")
		if err != nil || !q.Paused || q.Stats.InState("scheduled") != 1 {
			t.Fatalf("Queue after pause = %+v, %v", q, err)
		}
		if err := c.ResumeQueue(ctx, "mail"); err != nil {
			t.Fatal(err)
		}
		mc, rate := 3, 2.5
		q, err = c.UpdateQueue(ctx, "mail", &model.QueueChange{MaxConcurrency: &mc, RateLimit: &rate})
		if err != nil || q.Paused || q.Settings.MaxConcurrency != 3 || q.Settings.RateLimit != 2.5 {
			t.Fatalf("UpdateQueue = %+v, %v", q, err)
		}

		list, err := c.Tasks(ctx, "mail", apiclient.ListQuery{State: "pending", PageSize: 10})
		if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != enq.ID || string(list.Tasks[0].Payload) != `{"to":"a@b.c"}` {
			t.Fatalf("Tasks = %+v, %v", list, err)
		}
		task, err := c.Task(ctx, "mail", later.ID)
		if err != nil || task.State != "scheduled" {
			t.Fatalf("Task = %+v, %v", task, err)
		}
		if err := c.Act(ctx, apiclient.ActionRun, "mail", later.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.Act(ctx, apiclient.ActionRun, "mail", later.ID); !errors.Is(err, htq.ErrWrongState) {
			t.Errorf("run of a pending task = %v; want ErrWrongState", err)
		}
		if err := c.Act(ctx, apiclient.ActionCancel, "mail", later.ID); !errors.Is(err, htq.ErrWrongState) {
			t.Errorf("cancel of a pending task = %v; want ErrWrongState", err)
		}
		if err := c.Act(ctx, apiclient.ActionArchive, "mail", later.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.Act(ctx, apiclient.ActionDelete, "mail", later.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Task(ctx, "mail", later.ID); !errors.Is(err, htq.ErrTaskNotFound) {
			t.Errorf("Task of a deleted task = %v; want ErrTaskNotFound", err)
		}
		if err := c.Act(ctx, "explode", "mail", enq.ID); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("unknown action = %v", err)
		}

		s, err := c.CreateSchedule(ctx, &apiclient.ScheduleRequest{Cron: "@every 1h", Queue: "mail", Task: model.TaskSpec{Type: "digest"}})
		if err != nil || s.ID == "" {
			t.Fatalf("CreateSchedule = %+v, %v", s, err)
		}
		if _, err := c.CreateSchedule(ctx, &apiclient.ScheduleRequest{Cron: "every day", Queue: "mail", Task: model.TaskSpec{Type: "digest"}}); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("bad cron = %v", err)
		}
		ss, err := c.Schedules(ctx)
		if err != nil || len(ss) != 1 || ss[0].ID != s.ID {
			t.Fatalf("Schedules = %+v, %v", ss, err)
		}
		if err := c.DeleteSchedule(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.DeleteSchedule(ctx, s.ID); !errors.Is(err, base.ErrNotFound) {
			t.Errorf("second DeleteSchedule = %v; want ErrNotFound", err)
		}

		if err := c.DeleteQueue(ctx, "mail", false); !errors.Is(err, base.ErrQueueNotEmpty) {
			t.Errorf("DeleteQueue of a queue with tasks = %v; want ErrQueueNotEmpty", err)
		}
		if err := c.DeleteQueue(ctx, "mail", true); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Queue(ctx, "mail"); !errors.Is(err, htq.ErrQueueNotFound) {
			t.Errorf("Queue of a deleted queue = %v; want ErrQueueNotFound", err)
		}
		if _, err := c.Tasks(ctx, "nope", apiclient.ListQuery{}); !errors.Is(err, htq.ErrQueueNotFound) {
			t.Errorf("Tasks of a missing queue = %v; want ErrQueueNotFound", err)
		}
		if _, err := c.RotateToken(ctx, time.Hour); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("RotateToken of a configured token = %v; want ErrInvalidArgument", err)
		}

		bad := newClient(t, svc.URL(), "wrong-token")
		_, err = bad.Queues(ctx)
		if !errors.Is(err, apiclient.ErrUnauthorized) || !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
			t.Errorf("wrong token = %v; want ErrUnauthorized", err)
		}
	})
}

// A service that does not answer, or an answer that is not the API's.
func TestTransportFailures(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = newClient(t, addr, token).Queues(ctx)
	if !errors.Is(err, apiclient.ErrUnreachable) || !strings.Contains(err.Error(), "http://"+addr) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("closed port = %v; want ErrUnreachable naming the address and the cause", err)
	}

	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html>bad gateway</html>")
	}))
	defer proxy.Close()
	_, err = newClient(t, proxy.URL, token).Queues(ctx)
	var apiErr *apiclient.Error
	if !errors.Is(err, apiclient.ErrServer) || !errors.As(err, &apiErr) || apiErr.Status != 502 || !strings.Contains(err.Error(), "502 Bad Gateway") {
		t.Errorf("502 from a proxy = %v", err)
	}

	for _, s := range []string{"", "ftp://x", "http://", "http://h:1?x=1", "http://u:p@h:1", "::"} {
		if _, err := apiclient.New(s, apiclient.Options{}); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("New(%q) = %v; want ErrInvalidArgument", s, err)
		}
	}
	for in, want := range map[string]string{
		"127.0.0.1:5999":               "http://127.0.0.1:5999",
		"https://htq.example.com/":     "https://htq.example.com",
		"http://10.0.0.1:5999/prefix/": "http://10.0.0.1:5999/prefix",
	} {
		c, err := apiclient.New(in, apiclient.Options{})
		if err != nil || c.Server() != want {
			t.Errorf("New(%q).Server() = %v, %v; want %s", in, c, err, want)
		}
	}
}
