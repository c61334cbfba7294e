package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"time"
)

// scenarioRequestCPU measures issue 12's point 1: the user+system CPU of
// the htq serve process per HTTP request, with a standard net/http client
// from c.conns goroutines (32 by default), for three kinds of request, each
// after 2,000 of warm-up:
//
//   - v1: POST /v1/queues/{q}/tasks, one URL task as JSON, due in an hour
//     (so nothing dispatches while it is measured);
//   - addtask: HTQ's POST /api/addTask as a multipart form (as HTQ's
//     clients send it), execute_time an hour ahead;
//   - refused: the same addTask with a target the guard refuses
//     (10.0.0.0/8 is not allowed), which touches no storage.
//
// One JSON line per kind (scenario serve-request-cpu, field request). With
// -backend floor the same requests go to bench/serve/floor, which answers
// them as htq serve does (201 under /v1/, error_code 1001 for the refused
// target, 0 otherwise): its lines (impl floor) are the net/http floor that
// make bench prints beside htq serve's.
func scenarioRequestCPU(c config, sv *service) error {
	const v1Queue, htqQueue = "bench-v1", "bench-htq"
	body, _ := json.Marshal(map[string]any{"name": v1Queue, "mode": "real_time", "max_concurrency": 100})
	if err := sv.call(sv.hc, "POST", "/v1/queues", body, http.StatusCreated, nil); err != nil {
		return err
	}
	if _, err := sv.htqForm("/api/addQueue", map[string]string{"queue_name": htqQueue, "type": "real_time"}, sv.hc); err != nil {
		return fmt.Errorf("addQueue: %w", err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: c.conns, MaxConnsPerHost: c.conns, DisableCompression: true}, Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	later := time.Now().Add(time.Hour).Format("2006-01-02 15:04:05") // htq serve reads it in its own (the same) time zone
	v1Body := []byte(`{"url":"http://127.0.0.1:1/x","method":"POST","body":"{}","options":{"delay":3600}}`)
	addTask := func(target string, wantCode int) func(int64) error {
		return func(i int64) error {
			code, err := sv.htqForm("/api/addTask", map[string]string{
				"queue_name": htqQueue, "url": fmt.Sprintf("%s?i=%d", target, i), "method": "POST",
				"header": "{}", "data": "{}", "execute_time": later,
			}, hc)
			if err != nil {
				return err
			}
			if (wantCode == 0) != (code == 0) {
				return fmt.Errorf("addTask to %s: error_code %d", target, code)
			}
			return nil
		}
	}
	kinds := []struct {
		name string
		send func(i int64) error
	}{
		{"v1", func(int64) error {
			return sv.call(hc, "POST", "/v1/queues/"+v1Queue+"/tasks", v1Body, http.StatusCreated, nil)
		}},
		{"addtask", addTask("http://127.0.0.1:1/x", 0)},
		{"refused", addTask("http://10.9.9.9/x", 1)},
	}
	for _, k := range kinds {
		phase := func(n int) (time.Duration, []time.Duration, error) {
			return loadPhase(c, n, func(int) string { return sv.addr }, func(_ int, _ *rawConn, i int64) error { return k.send(i) })
		}
		if _, _, err := phase(2000); err != nil {
			return fmt.Errorf("%s warm-up: %w", k.name, err)
		}
		cpu := sv.mark()
		elapsed, lat, err := phase(c.nRequestCPU)
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		done := len(lat)
		f := cpu.fields(done)
		p50, p99 := percentiles(lat)
		emit(c, "serve-request-cpu", with(f, map[string]any{
			"request": k.name, "metric": "serve_cpu_us_per_request", "value": f["serve_cpu_us_per_unit"],
			"requests_per_s": round(float64(done) / elapsed.Seconds()), "n": done, "conns": c.conns,
			"client": "nethttp", "truncated": done < c.nRequestCPU, "p50_ms": p50, "p99_ms": p99,
		}))
	}
	return nil
}

// htqForm POSTs HTQ's credentials and fields as a multipart form to path
// and returns the error_code of HTQ's JSON answer.
func (sv *service) htqForm(path string, fields map[string]string, hc *http.Client) (int, error) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	_ = w.WriteField("app_key", htqAppKey)
	_ = w.WriteField("app_token", htqAppToken)
	for k, v := range fields {
		_ = w.WriteField(k, v)
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	resp, err := hc.Post(sv.base+path, w.FormDataContentType(), &b)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var ans struct {
		Code *int `json:"error_code"`
	}
	if err := json.Unmarshal(data, &ans); err != nil || ans.Code == nil {
		return 0, fmt.Errorf("%s: status %d, not HTQ's answer: %.300s", path, resp.StatusCode, data)
	}
	return *ans.Code, nil
}
