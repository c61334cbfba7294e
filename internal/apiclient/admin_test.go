package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
	"github.com/htqueue/htq/internal/service"
)

// The admin calls against a real service: bulk actions by state, history,
// servers, a schedule with its runs and history.
func TestAdminCalls(t *testing.T) {
	backends(t, func(t *testing.T, svc *service.Service) {
		ctx := context.Background()
		c := newClient(t, svc.URL(), token)
		delay := model.Duration(time.Hour)
		for range 3 {
			if _, err := c.Enqueue(ctx, "jobs", &model.TaskSpec{Type: "x", Options: &model.TaskOptions{Delay: &delay}}); err != nil {
				t.Fatal(err)
			}
		}
		res, err := c.Bulk(ctx, "jobs", &apiclient.BulkRequest{Action: "archive", State: "scheduled"})
		if err != nil || *res != (apiclient.BulkResult{Action: "archive", State: "scheduled", Count: 3}) {
			t.Fatalf("Bulk archive = %+v, %v", res, err)
		}
		if _, err := c.Bulk(ctx, "jobs", &apiclient.BulkRequest{Action: "archive", State: "archived"}); !errors.Is(err, htq.ErrWrongState) {
			t.Errorf("Bulk archive of archived tasks = %v; want ErrWrongState", err)
		}
		if _, err := c.Bulk(ctx, "nope", &apiclient.BulkRequest{Action: "delete", State: "pending"}); !errors.Is(err, htq.ErrQueueNotFound) {
			t.Errorf("Bulk on a missing queue = %v; want ErrQueueNotFound", err)
		}
		if _, err := c.Bulk(ctx, "jobs", &apiclient.BulkRequest{Action: "explode", State: "pending"}); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("Bulk with an unknown action = %v; want ErrInvalidArgument", err)
		}
		days, err := c.History(ctx, "jobs", 3)
		if err != nil || len(days) != 3 || days[0].Date != time.Now().UTC().Format(time.DateOnly) {
			t.Fatalf("History = %+v, %v", days, err)
		}
		servers, err := c.Servers(ctx)
		if err != nil || len(servers) != 1 || servers[0].Status != "active" || servers[0].ActiveTasks == nil {
			t.Fatalf("Servers = %+v, %v (want htq serve's URL worker)", servers, err)
		}

		s, err := c.CreateSchedule(ctx, &apiclient.ScheduleRequest{Cron: "@every 1s", Queue: "jobs", Task: model.TaskSpec{Type: "tick"}})
		if err != nil {
			t.Fatal(err)
		}
		var runs []*apiclient.ScheduleRun
		deadline := time.Now().Add(15 * time.Second)
		for len(runs) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no tick in the schedule's history within 15 s")
			}
			time.Sleep(100 * time.Millisecond) // the scheduler ticks on its own clock
			if runs, err = c.ScheduleHistory(ctx, s.ID); err != nil {
				t.Fatal(err)
			}
		}
		if runs[0].TaskID == "" || runs[0].Error != "" || runs[0].SchedulerID == "" {
			t.Errorf("ScheduleHistory = %+v", runs[0])
		}
		one, err := c.Schedule(ctx, s.ID)
		if err != nil || one.ID != s.ID || one.NextRunAt == nil || one.PrevRunAt == nil {
			t.Fatalf("Schedule = %+v, %v; want its next and last run", one, err)
		}
		if _, err := c.ScheduleHistory(ctx, "no-such-schedule"); !errors.Is(err, base.ErrNotFound) {
			t.Errorf("ScheduleHistory of an unknown ID = %v; want ErrNotFound", err)
		}
	})
}

// The event stream: events of the queues asked for, in order, resumed
// after an ID, and the errors of a refused stream.
func TestEvents(t *testing.T) {
	backends(t, func(t *testing.T, svc *service.Service) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := newClient(t, svc.URL(), token)
		// Follow "ev" until it is resumed. The stream follows from the
		// moment it is open: enqueue until the first event shows.
		events := make(chan *apiclient.Event, 64)
		streamErr := make(chan error, 1)
		go func() {
			streamErr <- c.Events(ctx, apiclient.EventsQuery{Queues: []string{"ev"}}, func(ev *apiclient.Event) error {
				events <- ev
				if ev.Kind == "resumed" {
					return errEnough
				}
				return nil
			})
		}()
		var first *apiclient.Event
		for first == nil {
			if _, err := c.Enqueue(ctx, "other", &model.TaskSpec{Type: "x"}); err != nil { // not followed
				t.Fatal(err)
			}
			if _, err := c.Enqueue(ctx, "ev", &model.TaskSpec{Type: "x"}); err != nil {
				t.Fatal(err)
			}
			select {
			case first = <-events:
			case <-time.After(200 * time.Millisecond):
			case <-ctx.Done():
				t.Fatal("no event")
			}
		}
		if err := c.PauseQueue(ctx, "ev"); err != nil {
			t.Fatal(err)
		}
		if err := c.ResumeQueue(ctx, "ev"); err != nil {
			t.Fatal(err)
		}
		if err := <-streamErr; !errors.Is(err, errEnough) {
			t.Fatalf("Events = %v; want the callback's error", err)
		}
		close(events)
		got := []*apiclient.Event{first}
		for ev := range events {
			got = append(got, ev)
		}
		if first.Kind != "enqueued" || first.Queue != "ev" || first.State != "pending" || first.TaskID == "" ||
			!strings.HasPrefix(first.ID, "ev:") || first.Time.IsZero() {
			t.Errorf("first event %+v", first)
		}
		// Enqueues sent before the first event showed may follow it.
		last := got[len(got)-1]
		if len(got) < 3 || got[len(got)-2].Kind != "paused" || last.Kind != "resumed" {
			t.Errorf("events %+v; want enqueued…, paused, resumed", got)
		}

		// Resumed after the first: what followed it comes from the log.
		var again []*apiclient.Event
		err := c.Events(ctx, apiclient.EventsQuery{Queues: []string{"ev"}, After: first.ID}, func(ev *apiclient.Event) error {
			again = append(again, ev)
			if ev.ID == last.ID {
				return errEnough
			}
			return nil
		})
		if !errors.Is(err, errEnough) || len(again) != len(got)-1 || again[0].ID != got[1].ID {
			t.Errorf("resumed: %v, %+v; want the %d events after the first", err, again, len(got)-1)
		}

		if err := c.Events(ctx, apiclient.EventsQuery{After: "no-colon"}, nil); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("Events after a malformed ID = %v; want ErrInvalidArgument", err)
		}
		if err := c.Events(ctx, apiclient.EventsQuery{Queues: []string{"bad{name"}}, nil); !errors.Is(err, htq.ErrInvalidArgument) {
			t.Errorf("Events of a bad queue name = %v; want ErrInvalidArgument", err)
		}
		if err := newClient(t, svc.URL(), "wrong").Events(ctx, apiclient.EventsQuery{}, nil); !errors.Is(err, apiclient.ErrUnauthorized) {
			t.Errorf("Events with a wrong token = %v; want ErrUnauthorized", err)
		}
		short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
		defer stop()
		if err := c.Events(short, apiclient.EventsQuery{Queues: []string{"quiet"}}, nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Events until ctx ends = %v; want its deadline", err)
		}
	})
}

var errEnough = errors.New("enough")

// A stream that ends, breaks or is not a stream.
func TestEventsTransport(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("queue") {
		case "ends": // two events, one in two data lines, then the end
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("retry: 2000\n\n: ping\n\nid: ends:1-0\nevent: enqueued\ndata: {\"id\":\"ends:1-0\",\"kind\":\"enqueued\",\n" +
				"data: \"queue\":\"ends\",\"time\":\"2026-12-01T10:00:00Z\"}\n\nevent: gap\ndata: {\"kind\":\"gap\",\"queue\":\"ends\",\"time\":\"2026-12-01T10:00:01Z\"}\n\n"))
		case "garbled":
			_, _ = w.Write([]byte("data: {not json\n\n"))
		case "cut":
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte("data: {\"kind\":\"enqueued\""))
		}
	}))
	defer srv.Close()
	c := newClient(t, srv.URL, token)
	var got []string
	err := c.Events(ctx, apiclient.EventsQuery{Queues: []string{"ends"}}, func(ev *apiclient.Event) error {
		got = append(got, ev.Kind+" "+ev.ID)
		return nil
	})
	if err != nil || strings.Join(got, ",") != "enqueued ends:1-0,gap " {
		t.Errorf("a stream that ends: %v, %q", err, got)
	}
	if err := c.Events(ctx, apiclient.EventsQuery{Queues: []string{"garbled"}}, func(*apiclient.Event) error { return nil }); !errors.Is(err, apiclient.ErrServer) {
		t.Errorf("a garbled event = %v; want ErrServer", err)
	}
	if err := c.Events(ctx, apiclient.EventsQuery{Queues: []string{"cut"}}, func(*apiclient.Event) error { return nil }); !errors.Is(err, apiclient.ErrUnreachable) {
		t.Errorf("a broken stream = %v; want ErrUnreachable", err)
	}
}
