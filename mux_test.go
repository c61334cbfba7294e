package htq

import (
	"context"
	"strings"
	"testing"
)

func TestServeMuxLongestPrefix(t *testing.T) {
	mux := NewServeMux()
	var got []string
	reg := func(p string) {
		mux.HandleFunc(p, func(context.Context, *Task) error { got = append(got, p); return nil })
	}
	reg("email:")
	reg("email:welcome")
	reg("image")
	var trace []string
	mux.Use(func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, t *Task) error {
			trace = append(trace, "outer:"+t.Type())
			return next.ProcessTask(ctx, t)
		})
	}, func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, t *Task) error {
			trace = append(trace, "inner")
			return next.ProcessTask(ctx, t)
		})
	})
	for _, typ := range []string{"email:welcome", "email:reset", "image:resize"} {
		if err := mux.ProcessTask(context.Background(), NewTask(typ, nil)); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(got, ",") != "email:welcome,email:,image" {
		t.Fatalf("routed to %v", got)
	}
	if trace[0] != "outer:email:welcome" || trace[1] != "inner" {
		t.Fatalf("middleware order %v", trace)
	}
	err := mux.ProcessTask(context.Background(), NewTask("unknown", nil))
	if err == nil || !strings.Contains(err.Error(), `"unknown"`) {
		t.Fatalf("unknown type: %v", err)
	}
	if _, p := mux.Handler(NewTask("email:x", nil)); p != "email:" {
		t.Fatalf("pattern %q", p)
	}
}

func TestServeMuxRejectsBadRegistrations(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	mux := NewServeMux()
	mux.HandleFunc("a", func(context.Context, *Task) error { return nil })
	mustPanic("duplicate", func() { mux.HandleFunc("a", func(context.Context, *Task) error { return nil }) })
	mustPanic("empty", func() { mux.Handle("", HandlerFunc(func(context.Context, *Task) error { return nil })) })
	mustPanic("nil", func() { mux.Handle("b", nil) })
}

func TestContextHelpersOutsideServer(t *testing.T) {
	if _, ok := GetTaskID(context.Background()); ok {
		t.Fatal("GetTaskID ok on a plain context")
	}
	if _, ok := GetRetryCount(context.Background()); ok {
		t.Fatal("GetRetryCount ok on a plain context")
	}
}
