package model

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/internal/embedded"
	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/internal/redistest"
	"github.com/htqueue/htq/internal/storage"
)

func TestMain(m *testing.M) {
	leaktest.Main(m, redistest.StopShared)
}

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func TestDefaults(t *testing.T) {
	v := New("v", ModeVariable, t0)
	if v.SteppingTimeS != DefaultSteppingTime || v.MaxIntervalS != DefaultMaxInterval {
		t.Errorf("variable defaults: %+v", v)
	}
	if v.DispatchTimeout() != 0 || v.MinBackoff() != DefaultMinBackoff || v.MaxBackoff() != DefaultMaxBackoff {
		t.Errorf("URL defaults: %+v", v)
	}
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	p := New("p", ModePull, t0)
	if *p != (Queue{Name: "p", Mode: ModePull, CreatedAt: t0}) {
		t.Errorf("pull queue got URL policies: %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	long := (&Queue{Name: "l", Mode: ModeVariable, SteppingTimeS: 7200}).WithDefaults()
	if long.MaxIntervalS != 7200 {
		t.Errorf("max interval not raised to the stepping time: %d", long.MaxIntervalS)
	}
	if DefaultMaxConcurrency(ModeRealTime) != 1 || DefaultMaxConcurrency(ModeTiming) != 0 || DefaultMaxConcurrency(ModePull) != 0 {
		t.Error("DefaultMaxConcurrency")
	}
	if n, ok := (&Queue{MaxAttempts: 3}).MaxRetry(); !ok || n != 2 {
		t.Errorf("MaxRetry = %d, %v", n, ok)
	}
	if _, ok := (&Queue{}).MaxRetry(); ok {
		t.Error("MaxRetry without policy")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    Queue
		want string
	}{
		{"empty name", Queue{Mode: ModePull}, "queue name is empty"},
		{"bad name", Queue{Name: "a{b}", Mode: ModePull}, "not allowed"},
		{"no mode", Queue{Name: "q"}, "unknown mode"},
		{"bad mode", Queue{Name: "q", Mode: "fast"}, "unknown mode"},
		{"stepping on real_time", Queue{Name: "q", Mode: ModeRealTime, SteppingTimeS: 5}, "variable queues only"},
		{"negative stepping", Queue{Name: "q", Mode: ModeVariable, SteppingTimeS: -1}, "stepping_time_s"},
		{"max below stepping", Queue{Name: "q", Mode: ModeVariable, SteppingTimeS: 10, MaxIntervalS: 5}, "max_interval_s"},
		{"policy on pull", Queue{Name: "q", Mode: ModePull, MaxAttempts: 3}, "URL queues only"},
		{"retry_4xx on pull", Queue{Name: "q", Mode: ModePull, Retry4xx: true}, "URL queues only"},
		{"negative attempts", Queue{Name: "q", Mode: ModeTiming, MaxAttempts: -1}, "max_attempts"},
		{"min over max backoff", Queue{Name: "q", Mode: ModeTiming, MinBackoffMS: 5000, MaxBackoffMS: 10}, "min_backoff_ms"},
		{"negative backoff", Queue{Name: "q", Mode: ModeTiming, MinBackoffMS: -5}, "backoffs"},
		{"huge timeout", Queue{Name: "q", Mode: ModeTiming, DispatchTimeoutMS: 1 << 50}, "dispatch_timeout_ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			err := q.WithDefaults().Validate()
			if !errors.Is(err, base.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v; want ErrInvalidArgument mentioning %q", err, tc.want)
			}
		})
	}
	if _, err := ParseMode("variable"); err != nil {
		t.Error(err)
	}
	if _, err := ParseMode("Variable"); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("ParseMode(Variable) = %v", err)
	}
}

// stores returns every MetaStore the model runs on: the embedded store in
// memory (mem:), and each real backend.
func stores(t *testing.T) map[string]broker.MetaStore {
	out := map[string]broker.MetaStore{"mem": memStore(t)}
	st, err := htq.Open(redistest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	out["redis"] = storage.BrokerOf(st)
	eb, err := embedded.Open(context.Background(), t.TempDir(), embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eb.Close() })
	out["embedded"] = eb
	return out
}

func TestStore(t *testing.T) {
	for name, ms := range stores(t) {
		t.Run(name, func(t *testing.T) { testStore(t, ms) })
	}
}

func testStore(t *testing.T, ms broker.MetaStore) {
	ctx := context.Background()
	if _, err := Get(ctx, ms, "nope"); !errors.Is(err, base.ErrQueueNotFound) {
		t.Fatalf("Get of a missing queue = %v", err)
	}
	v := &Queue{Name: "scan", Mode: ModeVariable, SteppingTimeS: 30, MaxIntervalS: 600, CreatedAt: t0}
	if _, err := Create(ctx, ms, v); err != nil {
		t.Fatal(err)
	}
	got, err := Get(ctx, ms, "scan")
	if err != nil {
		t.Fatal(err)
	}
	if *got != *v {
		t.Errorf("Get = %+v; want %+v", got, v)
	}
	old, err := Create(ctx, ms, New("scan", ModeRealTime, t0))
	if !errors.Is(err, ErrQueueExists) || old == nil || old.Mode != ModeVariable {
		t.Errorf("second Create = %+v, %v", old, err)
	}
	if _, err := Create(ctx, ms, &Queue{Name: "bad", Mode: "x"}); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("Create of a bad queue = %v", err)
	}
	if _, err := Get(ctx, ms, "bad"); !errors.Is(err, base.ErrQueueNotFound) {
		t.Errorf("bad queue stored: %v", err)
	}

	// Ensure: the first task fixes the mode.
	q, created, err := Ensure(ctx, ms, "mail", ModeRealTime, t0)
	if err != nil || !created || q.Mode != ModeRealTime {
		t.Fatalf("Ensure = %+v, %v, %v", q, created, err)
	}
	if _, created, err := Ensure(ctx, ms, "mail", ModeRealTime, t0); err != nil || created {
		t.Errorf("second Ensure = %v, %v", created, err)
	}
	if _, _, err := Ensure(ctx, ms, "mail", ModePull, t0); !errors.Is(err, ErrModeMismatch) {
		t.Errorf("Ensure with another mode = %v", err)
	}

	// Update keeps name, mode and creation time.
	u, err := Update(ctx, ms, "scan", func(q *Queue) error { q.SteppingTimeS = 45; q.Name = "other"; return nil })
	if err != nil || u.SteppingTimeS != 45 || u.Name != "scan" {
		t.Fatalf("Update = %+v, %v", u, err)
	}
	if _, err := Update(ctx, ms, "scan", func(q *Queue) error { q.Mode = ModePull; return nil }); !errors.Is(err, ErrModeMismatch) {
		t.Errorf("mode change = %v", err)
	}
	if _, err := Update(ctx, ms, "scan", func(q *Queue) error { q.MaxIntervalS = 1; return nil }); !errors.Is(err, base.ErrInvalidArgument) {
		t.Errorf("bad update = %v", err)
	}
	if _, err := Update(ctx, ms, "none", func(q *Queue) error { return nil }); !errors.Is(err, base.ErrQueueNotFound) {
		t.Errorf("update of a missing queue = %v", err)
	}
	if got, _ := Get(ctx, ms, "scan"); got.SteppingTimeS != 45 || got.MaxIntervalS != 600 {
		t.Errorf("after updates: %+v", got)
	}

	list, err := List(ctx, ms)
	if err != nil || len(list) != 2 || list[0].Name != "mail" || list[1].Name != "scan" {
		t.Fatalf("List = %v, %v", list, err)
	}
	if err := Delete(ctx, ms, "mail"); err != nil {
		t.Fatal(err)
	}
	if err := Delete(ctx, ms, "mail"); err != nil {
		t.Errorf("second Delete = %v", err)
	}
	if list, _ := List(ctx, ms); len(list) != 1 {
		t.Errorf("List after Delete = %v", list)
	}
}

// memStore returns the embedded store in memory, the one mem: opens.
func memStore(t *testing.T) broker.MetaStore {
	b, err := embedded.OpenMemory(embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// countingStore counts GetMeta and PutMetaIfAbsent calls.
type countingStore struct {
	broker.MetaStore
	gets, puts int
}

func (c *countingStore) GetMeta(ctx context.Context, key string) ([]byte, error) {
	c.gets++
	return c.MetaStore.GetMeta(ctx, key)
}

func (c *countingStore) PutMetaIfAbsent(ctx context.Context, key string, value []byte) (bool, error) {
	c.puts++
	return c.MetaStore.PutMetaIfAbsent(ctx, key, value)
}

func TestCache(t *testing.T) {
	ctx := context.Background()
	ms := &countingStore{MetaStore: memStore(t)}
	c := NewCache(ms, time.Minute)
	now := t0
	c.now = func() time.Time { return now }
	for range 3 {
		if _, _, err := c.Ensure(ctx, "q", ModeTiming, t0); err != nil {
			t.Fatal(err)
		}
	}
	if ms.puts != 1 || ms.gets != 0 {
		t.Errorf("3 Ensures: %d creates, %d reads; want 1, 0", ms.puts, ms.gets)
	}
	if _, _, err := c.Ensure(ctx, "q", ModePull, t0); !errors.Is(err, ErrModeMismatch) {
		t.Errorf("Ensure of another mode = %v", err)
	}
	// Another process changes the policy; the cache sees it after its TTL.
	if _, err := Update(ctx, ms.MetaStore, "q", func(q *Queue) error { q.MaxAttempts = 3; return nil }); err != nil {
		t.Fatal(err)
	}
	if q, _ := c.Get(ctx, "q"); q.MaxAttempts != 0 {
		t.Error("cache read the store before its TTL")
	}
	now = now.Add(2 * time.Minute)
	if q, _ := c.Get(ctx, "q"); q.MaxAttempts != 3 {
		t.Error("cache did not read the store after its TTL")
	}
	if q, err := c.Update(ctx, "q", func(q *Queue) error { q.MaxAttempts = 5; return nil }); err != nil || q.MaxAttempts != 5 {
		t.Fatal(q, err)
	}
	if q, _ := c.Get(ctx, "q"); q.MaxAttempts != 5 {
		t.Error("cache did not see its own update")
	}
	if err := c.Delete(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "q"); !errors.Is(err, base.ErrQueueNotFound) {
		t.Errorf("Get after Delete = %v", err)
	}
}

func TestURLTask(t *testing.T) {
	ok := &URLTask{URL: "https://example.com/hook?a=1", Method: "POST", Headers: map[string]string{"X-Sig": "v"},
		Body: "a=b", TimeoutMS: 1500, Variable: &Variable{IntervalS: 30}}
	if _, err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	data, err := ok.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeURLTask(data)
	if err != nil || back.URL != ok.URL || back.Variable.IntervalS != 30 || back.Headers["X-Sig"] != "v" {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []URLTask{
		{Method: "GET"},
		{URL: "ftp://x/", Method: "GET"},
		{URL: "http:///path", Method: "GET"},
		{URL: "http://u:p@x/", Method: "GET"},
		{URL: "http://x/", Method: "TRACE"},
		{URL: "http://x/", Method: "GET", Headers: map[string]string{"Bad Name": "v"}},
		{URL: "http://x/", Method: "GET", Headers: map[string]string{"Host": "v"}},
		{URL: "http://x/", Method: "GET", Headers: map[string]string{"Htq-Task-Id": "v"}},
		{URL: "http://x/", Method: "GET", Headers: map[string]string{"X": "a\r\nb"}},
		{URL: "http://x/", Method: "POST", Body: "a", BodyBase64: "YQ=="},
		{URL: "http://x/", Method: "POST", BodyBase64: "%%%"},
		{URL: "http://x/", Method: "POST", TimeoutMS: -1},
	} {
		if _, err := bad.Validate(); !errors.Is(err, base.ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v; want ErrInvalidArgument", bad, err)
		}
	}
}
