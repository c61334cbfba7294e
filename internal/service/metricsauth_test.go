package service_test

import (
	"net/http"
	"testing"
)

// TestMetricsAuthDefault: /metrics names every queue, so it asks for the
// token unless the service listens on loopback only; MetricsAuth says
// otherwise either way.
func TestMetricsAuthDefault(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name string
		addr string
		auth *bool
		want int
	}{
		{"loopback", "127.0.0.1:0", nil, http.StatusOK},
		{"every interface", ":0", nil, http.StatusUnauthorized},
		{"loopback, asked", "127.0.0.1:0", &yes, http.StatusUnauthorized},
		{"every interface, not asked", ":0", &no, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, "mem:")
			cfg.Addr, cfg.MetricsAuth = tc.addr, tc.auth
			svc := startService(t, cfg)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			resp, err := (&http.Client{Transport: tr}).Get(svc.URL() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("GET /metrics without the token: %d, want %d", resp.StatusCode, tc.want)
			}
			c := newClient(t, svc.URL(), testToken)
			c.must(http.StatusOK, "GET", "/metrics", nil, nil)
		})
	}
}
