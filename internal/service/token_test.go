package service_test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/htqueue/htq/internal/apitoken"
	"github.com/htqueue/htq/internal/service"
)

type rotated struct {
	Token string     `json:"token"`
	Until *time.Time `json:"previous_valid_until"`
}

// Beside an embedded store the current token is mirrored in the data
// directory's token file, also after a rotation; a start with --token
// removes the file.
func TestTokenFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := testConfig(t, "file:"+dir)
	cfg.Token = ""
	svc := startService(t, cfg)
	if tok, err := apitoken.ReadFile(dir); err != nil || tok != svc.Token() {
		t.Fatalf("token file %q, %v; service token %q", tok, err, svc.Token())
	}
	old := svc.Token()
	var out rotated
	newClient(t, svc.URL(), old).must(http.StatusOK, "POST", "/v1/token/rotate", map[string]any{"grace": "1m"}, &out)
	if tok, _ := apitoken.ReadFile(dir); tok != out.Token || svc.Token() != out.Token {
		t.Errorf("after rotation: file %q, Token() %q, want %q", tok, svc.Token(), out.Token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := svc.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	cfg.Token = testToken
	svc2, err := service.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer svc2.Shutdown(ctx)
	if _, err := apitoken.ReadFile(dir); err == nil {
		t.Error("token file kept by a service given --token")
	}
}

// Two services on one Redis: a rotation through one is seen by the other
// at the new token's first use (even when it loaded its set just before);
// the old token works on both until its grace ends.
func TestTokenRotationSharedRedis(t *testing.T) {
	broker := backendRedis(t)
	cfg := testConfig(t, broker)
	cfg.Token = ""
	a := startService(t, cfg)
	b := startService(t, cfg)
	old := a.Token()
	if b.Token() != old {
		t.Fatalf("two services, two tokens: %q %q", old, b.Token())
	}
	var out rotated
	newClient(t, a.URL(), old).must(http.StatusOK, "POST", "/v1/token/rotate", map[string]any{"grace": 2}, &out)
	for _, svc := range []*service.Service{a, b} {
		newClient(t, svc.URL(), out.Token).must(http.StatusOK, "GET", "/v1/queues", nil, nil)
		newClient(t, svc.URL(), old).must(http.StatusOK, "GET", "/v1/queues", nil, nil)
	}
	// After the 2 s grace the old token is refused by both.
	time.Sleep(time.Until(*out.Until))
	for _, svc := range []*service.Service{a, b} {
		newClient(t, svc.URL(), old).must(http.StatusUnauthorized, "GET", "/v1/queues", nil, nil)
	}
}
