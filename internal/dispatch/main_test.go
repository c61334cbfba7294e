package dispatch

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/leaktest"
	"github.com/htqueue/htq/webhook"
)

// TestMain checks that no dispatch leaves a goroutine behind: a hostile
// target must not hold one past the task's timeout.
func TestMain(m *testing.M) {
	leaktest.Main(m, nil)
}

// testSecret is the example secret of the Standard Webhooks specification.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// loopback is the allowlist of tests whose targets are httptest servers.
var loopback = []string{"127.0.0.0/8", "::1"}

func newDispatcher(t testing.TB, cfg Config) *Dispatcher {
	t.Helper()
	if cfg.Signer == nil {
		s, err := webhook.NewSigner(testSecret)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Signer = s
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(d.Close)
	return d
}

func task(url string) Request {
	return Request{TaskID: "task-1", Queue: "q1", URL: url}
}

// target is an httptest server that counts the connections it accepts and
// the requests it serves.
type target struct {
	*httptest.Server
	conns    atomic.Int64
	requests atomic.Int64
}

func newTarget(t testing.TB, h http.HandlerFunc) *target {
	t.Helper()
	tg := &target{}
	tg.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.requests.Add(1)
		h(w, r)
	}))
	tg.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			tg.conns.Add(1)
		}
	}
	tg.Start()
	t.Cleanup(tg.Close)
	return tg
}

// within fails the test if f takes longer than limit, and returns how long
// it took.
func within(t *testing.T, limit time.Duration, f func()) time.Duration {
	t.Helper()
	start := time.Now()
	f()
	took := time.Since(start)
	if took > limit {
		t.Errorf("took %s, want at most %s", took, limit)
	}
	return took
}

func fixedClock(sec int64) func() time.Time {
	return func() time.Time { return time.Unix(sec, 0) }
}

var bg = context.Background()
