package main

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP trace receiver: it keeps the spans it is sent and
// the service.name of their resource.
type collector struct {
	coltrace.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracepb.Span
	service string
	got     chan struct{}
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 100)} }

func (c *collector) add(req *coltrace.ExportTraceServiceRequest) {
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				c.service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	c.got <- struct{}{}
}

// Export receives OTLP over gRPC.
func (c *collector) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	c.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// ServeHTTP receives OTLP over HTTP (protobuf) on /v1/traces.
func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := &coltrace.ExportTraceServiceRequest{}
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
		http.Error(w, "bad export", http.StatusBadRequest)
		return
	}
	c.add(req)
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Write(out)
}

// waitNames waits until spans with every name have arrived.
func (c *collector) waitNames(t *testing.T, names ...string) map[string]*tracepb.Span {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		c.mu.Lock()
		byName := map[string]*tracepb.Span{}
		for _, s := range c.spans {
			byName[s.Name] = s
		}
		c.mu.Unlock()
		done := true
		for _, n := range names {
			done = done && byName[n] != nil
		}
		if done {
			return byName
		}
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("spans %v not all exported within 20 s; got %v", names, byName)
		}
	}
}

// TestBinaryExportsTraces runs `htq serve` with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at a collector, over OTLP/HTTP and OTLP/gRPC: an enqueue with
// a caller's traceparent gives the enqueue, attempt and request spans in
// the caller's trace, from the resource "htq", and the spans of a task
// still running at SIGTERM are sent before the process exits.
func TestBinaryExportsTraces(t *testing.T) {
	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	for _, protocol := range []string{"http/protobuf", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			col := newCollector()
			var endpoint string
			if protocol == "grpc" {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				gs := grpc.NewServer()
				coltrace.RegisterTraceServiceServer(gs, col)
				go gs.Serve(l)
				t.Cleanup(gs.Stop)
				endpoint = "http://" + l.Addr().String()
			} else {
				hs := httptest.NewServer(col)
				t.Cleanup(hs.Close)
				endpoint = hs.URL
			}
			release, arrived := make(chan struct{}), make(chan struct{}, 1)
			tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/slow" {
					arrived <- struct{}{}
					<-release
				}
			}))
			var once sync.Once
			unblock := func() { once.Do(func() { close(release) }) }
			t.Cleanup(tg.Close)
			t.Cleanup(unblock)
			p := startBinaryEnv(t, "file:"+filepath.Join(t.TempDir(), "data"),
				[]string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL=" + protocol,
					"OTEL_EXPORTER_OTLP_INSECURE=true", "OTEL_BSP_SCHEDULE_DELAY=50", "OTEL_SERVICE_NAME="},
				"--token", binToken, "--signing-secrets", binSecret)

			enqueue := func(path string) {
				req, _ := http.NewRequest("POST", p.base+"/v1/queues/hooks/tasks",
					strings.NewReader(`{"url":"`+tg.URL+path+`"}`))
				req.Header.Set("Authorization", "Bearer "+binToken)
				req.Header.Set("Traceparent", "00-"+trace+"-00f067aa0ba902b7-01")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Fatalf("enqueue: %d", resp.StatusCode)
				}
			}
			enqueue("/fast")
			spans := col.waitNames(t, "send hooks", "process hooks", "POST")
			for name, s := range spans {
				if got := hex.EncodeToString(s.TraceId); got != trace {
					t.Errorf("span %q in trace %s, want the caller's %s", name, got, trace)
				}
			}
			col.mu.Lock()
			service := col.service
			col.spans = nil
			col.mu.Unlock()
			if service != "htq" {
				t.Errorf("service.name %q, want htq", service)
			}

			// A task running at SIGTERM: its spans end during the drain
			// and are flushed before exit.
			enqueue("/slow")
			select {
			case <-arrived:
			case <-time.After(10 * time.Second):
				t.Fatal("the slow request did not arrive")
			}
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			// Answer once the signal has had time to start the drain (if
			// it has not, the spans are exported all the same).
			time.AfterFunc(200*time.Millisecond, unblock)
			if code := p.wait(t, 30*time.Second); code != 0 {
				t.Fatalf("exit code %d:\n%s", code, p.stderr.String())
			}
			col.waitNames(t, "process hooks", "POST")
		})
	}
}
