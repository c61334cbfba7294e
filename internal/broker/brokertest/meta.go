package brokertest

import (
	"bytes"
	"errors"
	"strings"

	"github.com/htqueue/htq/internal/base"
)

// metaTests cover broker.MetaStore.
func metaTests() []testCase {
	return []testCase{
		{"RoundTrip", func(e *env) {
			val := []byte{0, 1, 2, 255, '\n'}
			if err := e.b.PutMeta(e.ctx, "queue/a", val); err != nil {
				e.Fatal(err)
			}
			got, err := e.b.GetMeta(e.ctx, "queue/a")
			if err != nil || !bytes.Equal(got, val) {
				e.Fatalf("GetMeta = %v, %v; want %v", got, err, val)
			}
			if err := e.b.PutMeta(e.ctx, "queue/a", []byte("v2")); err != nil {
				e.Fatal(err)
			}
			if got, _ := e.b.GetMeta(e.ctx, "queue/a"); string(got) != "v2" {
				e.Fatalf("after overwrite: %q", got)
			}
		}},
		{"Missing", func(e *env) {
			if _, err := e.b.GetMeta(e.ctx, "nope"); !errors.Is(err, base.ErrNotFound) {
				e.Fatalf("GetMeta of a missing key = %v, want ErrNotFound", err)
			}
			if err := e.b.DeleteMeta(e.ctx, "nope"); err != nil {
				e.Fatalf("DeleteMeta of a missing key = %v", err)
			}
		}},
		{"IfAbsent", func(e *env) {
			ok, err := e.b.PutMetaIfAbsent(e.ctx, "service/token", []byte("first"))
			if err != nil || !ok {
				e.Fatalf("first PutMetaIfAbsent = %v, %v", ok, err)
			}
			ok, err = e.b.PutMetaIfAbsent(e.ctx, "service/token", []byte("second"))
			if err != nil || ok {
				e.Fatalf("second PutMetaIfAbsent = %v, %v", ok, err)
			}
			if got, _ := e.b.GetMeta(e.ctx, "service/token"); string(got) != "first" {
				e.Fatalf("value %q, want the first", got)
			}
		}},
		{"ListByPrefix", func(e *env) {
			for _, k := range []string{"queue/a", "queue/b", "schedule/x", "queuex"} {
				if err := e.b.PutMeta(e.ctx, k, []byte(k)); err != nil {
					e.Fatal(err)
				}
			}
			got, err := e.b.ListMeta(e.ctx, "queue/")
			if err != nil || len(got) != 2 || string(got["queue/a"]) != "queue/a" || string(got["queue/b"]) != "queue/b" {
				e.Fatalf("ListMeta(queue/) = %v, %v", got, err)
			}
			if err := e.b.DeleteMeta(e.ctx, "queue/a"); err != nil {
				e.Fatal(err)
			}
			if got, _ := e.b.ListMeta(e.ctx, "queue/"); len(got) != 1 {
				e.Fatalf("after delete: %v", got)
			}
			all, _ := e.b.ListMeta(e.ctx, "")
			if len(all) != 3 {
				e.Fatalf("ListMeta(\"\") = %d records, want 3", len(all))
			}
		}},
		{"Invalid", func(e *env) {
			for _, k := range []string{"", strings.Repeat("k", base.MaxMetaKeyLen+1), "a\nb", "\xff"} {
				if err := e.b.PutMeta(e.ctx, k, nil); !errors.Is(err, base.ErrInvalidArgument) {
					e.Errorf("PutMeta(%q) = %v, want ErrInvalidArgument", k, err)
				}
			}
			if err := e.b.PutMeta(e.ctx, "big", make([]byte, base.MaxMetaValueLen+1)); !errors.Is(err, base.ErrInvalidArgument) {
				e.Errorf("PutMeta of an oversized value = %v", err)
			}
			if _, err := e.b.GetMeta(e.ctx, "big"); !errors.Is(err, base.ErrNotFound) {
				e.Errorf("an oversized value was written")
			}
		}},
	}
}
