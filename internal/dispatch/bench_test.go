package dispatch

import (
	"io"
	"net/http"
	"runtime"
	"testing"
)

// BenchmarkDispatch measures URL dispatch at concurrency 100 against a
// fast target on loopback, in the same process (so the target's work is
// on the same CPUs). The figure to read is req/s.
//
//	go test -run '^$' -bench BenchmarkDispatch -benchtime 5s ./internal/dispatch/
func BenchmarkDispatch(b *testing.B) {
	const concurrency = 100
	tg := newTarget(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	d := newDispatcher(b, Config{Allow: loopback})
	body := []byte(`{"order":42,"items":["a","b","c"]}`)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((concurrency + procs - 1) / procs)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		r := Request{
			TaskID: "01J9Z3K6Q8R2M4N5P7S9T1V3W5", Queue: "bench", URL: tg.URL + "/hook",
			Header: http.Header{"Content-Type": {"application/json"}}, Body: body,
		}
		for pb.Next() {
			res, err := d.Dispatch(bg, r)
			if err != nil {
				b.Error(err)
				return
			}
			if res.Status != http.StatusOK {
				b.Errorf("status %d", res.Status)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(tg.conns.Load()), "conns")
}
