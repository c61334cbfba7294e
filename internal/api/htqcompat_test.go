package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/htqcompat"
	"github.com/htqueue/htq/internal/model"
)

func creds(fields map[string]string) map[string]string {
	out := map[string]string{"app_key": "key", "app_token": "tok"}
	for k, v := range fields {
		out[k] = v
	}
	return out
}

func TestHTQCompatible(t *testing.T) {
	for _, backend := range backends {
		for _, multi := range []bool{false, true} {
			name := backend + "/urlencoded"
			if multi {
				name = backend + "/multipart"
			}
			t.Run(name, func(t *testing.T) { testHTQ(t, newEnv(t, backend, nil), multi) })
		}
	}
}

func testHTQ(t *testing.T, e *env, multi bool) {
	post := func(path string, fields map[string]string) (int, string) {
		t.Helper()
		status, data, hdr := e.form(path, multi, fields, nil)
		if ct := hdr.Get("Content-Type"); ct != "text/html; charset=utf-8" || hdr.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: headers %v", path, hdr)
		}
		return status, string(data)
	}
	expect := func(path string, fields map[string]string, want string) {
		t.Helper()
		if status, got := post(path, fields); status != http.StatusOK || got != want {
			t.Errorf("%s %v:\n got %d %s\nwant 200 %s", path, fields, status, got, want)
		}
	}
	const (
		ok        = `{"error_code":0,"message":"添加成功"}`
		authFail  = `{"error_code":1000,"message":"认证失败"}`
		exists    = `{"error_code":1002,"message":"队列名已经存在"}`
		deleted   = `{"error_code":0,"message":"删除成功"}`
		notExists = `{"error_code":1003,"message":"队列不存在，请先创建"}`
	)
	// 1000 on every endpoint with wrong credentials.
	for _, path := range []string{"/api/addQueue", "/api/deleteQueue", "/api/allQueue", "/api/countQueue", "/api/addTask"} {
		expect(path, map[string]string{"app_key": "key", "app_token": "bad", "queue_name": "q"}, authFail)
		expect(path, map[string]string{"queue_name": "q"}, authFail)
	}
	// addQueue: 0, then 1002; 1001 for a bad type or stepping time.
	expect("/api/addQueue", creds(map[string]string{"queue_name": "mail", "type": "real_time", "stepping_time": "0", "max_time_interval": "0"}), ok)
	expect("/api/addQueue", creds(map[string]string{"queue_name": "mail", "type": "timing"}), exists)
	expect("/api/addQueue", creds(map[string]string{"queue_name": "scan", "type": "variable", "stepping_time": "30", "max_time_interval": "600"}), ok)
	expect("/api/addQueue", creds(map[string]string{"queue_name": "at", "type": "timing"}), ok)
	for _, bad := range []map[string]string{
		{"queue_name": "x", "type": "fast"},
		{"queue_name": "x"},
		{"queue_name": "", "type": "real_time"},
		{"queue_name": "x", "type": "variable", "stepping_time": "ten"},
		{"queue_name": "x", "type": "variable", "stepping_time": "60", "max_time_interval": "30"},
		{"queue_name": "x", "type": "real_time", "max_concurrency": "many"},
		{"queue_name": "x", "type": "real_time", "rate_limit": "-1"},
		{"queue_name": "x", "type": "real_time", "retry_4xx": "perhaps"},
	} {
		status, got := post("/api/addQueue", creds(bad))
		if status != http.StatusOK || !strings.HasPrefix(got, `{"error_code":1001,"message":"添加失败: `) {
			t.Errorf("addQueue %v: %d %s", bad, status, got)
		}
	}
	if qi, err := e.insp.GetQueueInfo("x"); err == nil {
		t.Errorf("a refused addQueue created its queue: %+v", qi)
	}
	// htq's extensions of addQueue set what the native API sets.
	expect("/api/addQueue", creds(map[string]string{"queue_name": "limited", "type": "real_time", "max_concurrency": "3",
		"rate_limit": "2.5", "rate_burst": "4", "max_attempts": "7", "min_backoff_ms": "100", "max_backoff_ms": "5000",
		"dispatch_timeout_ms": "2000", "retry_4xx": "true"}), ok)
	var lim struct {
		MaxAttempts       int   `json:"max_attempts"`
		MinBackoffMS      int64 `json:"min_backoff_ms"`
		DispatchTimeoutMS int64 `json:"dispatch_timeout_ms"`
		Retry4xx          bool  `json:"retry_4xx"`
		Settings          struct {
			MaxConcurrency int     `json:"max_concurrency"`
			RateLimit      float64 `json:"rate_limit"`
			RateBurst      int     `json:"rate_burst"`
		} `json:"settings"`
	}
	e.must(http.StatusOK, "GET", "/v1/queues/limited", nil, &lim)
	if lim.Settings.MaxConcurrency != 3 || lim.Settings.RateLimit != 2.5 || lim.Settings.RateBurst != 4 ||
		lim.MaxAttempts != 7 || lim.MinBackoffMS != 100 || lim.DispatchTimeoutMS != 2000 || !lim.Retry4xx {
		t.Errorf("queue made by addQueue with extensions: %+v", lim)
	}
	expect("/api/deleteQueue", creds(map[string]string{"queue_name": "limited"}), deleted)
	// allQueue: HTQ's array; a pull queue is not listed.
	e.must(http.StatusCreated, "POST", "/v1/queues", map[string]any{"name": "typed", "mode": "pull"}, nil)
	expect("/api/allQueue", creds(nil), `[{"queue_name":"at","attribute":{"type":"timing"}},{"queue_name":"mail","attribute":{"type":"real_time"}},`+
		`{"queue_name":"scan","attribute":{"type":"variable","stepping_time":"30","max_time_interval":"600"}}]`)

	// addTask: data as a form body for POST, as the query for GET; header
	// as headers; execute_time in the configured zone.
	expect("/api/addTask", creds(map[string]string{"queue_name": "mail", "url": "https://example.com/send?x=1", "method": "post",
		"header": `{"X-Token":"abc","X-N":5}`, "data": `{"to":"a@b.c","n":3,"tags":["a","b"],"o":{"k":true},"z":null}`}), ok)
	expect("/api/addTask", creds(map[string]string{"queue_name": "mail", "url": "https://example.com/get?x=1", "data": `{"id":7}`, "execute_time": "0"}), ok)
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	expect("/api/addTask", creds(map[string]string{"queue_name": "at", "url": "https://example.com/later", "execute_time": at.Format(htqcompat.ExecuteTimeLayout)}), ok)
	expect("/api/addTask", creds(map[string]string{"queue_name": "scan", "url": "https://example.com/scan"}), ok)
	// A queue that does not exist is created as real_time.
	expect("/api/addTask", creds(map[string]string{"queue_name": "auto", "url": "https://example.com/"}), ok)

	tasks, err := e.insp.ListPendingTasks("mail")
	if err != nil || len(tasks) != 2 {
		t.Fatalf("mail tasks %v, %v", tasks, err)
	}
	byURL := map[string]*model.URLTask{}
	for _, ti := range tasks {
		ut, err := model.DecodeURLTask(ti.Payload)
		if err != nil || ti.Type != model.TypeURL {
			t.Fatalf("task %+v: %v", ti, err)
		}
		byURL[strings.Split(ut.URL, "?")[0]] = ut
	}
	postTask := byURL["https://example.com/send"]
	if postTask == nil || postTask.Method != "POST" || postTask.URL != "https://example.com/send?x=1" ||
		postTask.Body != "n=3&o=%7B%22k%22%3Atrue%7D&tags=a&tags=b&to=a%40b.c&z=" ||
		postTask.Headers["X-Token"] != "abc" || postTask.Headers["X-N"] != "5" || postTask.Headers["Content-Type"] != "application/x-www-form-urlencoded" {
		t.Errorf("POST task %+v", postTask)
	}
	getTask := byURL["https://example.com/get"]
	if getTask == nil || getTask.Method != "GET" || getTask.URL != "https://example.com/get?x=1&id=7" || getTask.Body != "" {
		t.Errorf("GET task %+v", getTask)
	}
	later, err := e.insp.ListScheduledTasks("at")
	if err != nil || len(later) != 1 || !later[0].NextProcessAt.Equal(at) {
		t.Errorf("timing task %v, %v (want due %v)", later, err, at)
	}
	scan, _ := e.insp.ListPendingTasks("scan")
	if len(scan) != 1 || !strings.Contains(string(scan[0].Payload), `"variable":{"interval_s":0}`) {
		t.Errorf("variable task %v", scan)
	}
	var q model.QueueView
	e.must(http.StatusOK, "GET", "/v1/queues/auto", nil, &q)
	if q.Mode != model.ModeRealTime || q.Settings.MaxConcurrency != 1 {
		t.Errorf("auto-created queue %+v %+v", q.Queue, q.Settings)
	}

	// addTask failures: 1001 with the reason, and nothing written.
	for _, bad := range []map[string]string{
		{"queue_name": "mail", "url": "https://example.com/", "execute_time": "tomorrow"},
		{"queue_name": "mail", "url": "https://example.com/", "execute_time": "2026-02-30 10:00:00"},
		{"queue_name": "mail", "url": "https://example.com/", "execute_time": "2026-01-01T10:00:00Z"},
		{"queue_name": "mail", "url": ""},
		{"queue_name": "mail", "url": "ftp://example.com/"},
		{"queue_name": "mail", "url": "https://example.com/", "header": `["x"]`},
		{"queue_name": "mail", "url": "https://example.com/", "data": `{"a":`},
		{"queue_name": "mail", "url": "https://example.com/", "method": "TRACE"},
		{"queue_name": "typed", "url": "https://example.com/"},
		{"queue_name": "bad:name", "url": "https://example.com/"},
		{"queue_name": "neverq", "url": "gopher://x/"},
	} {
		status, got := post("/api/addTask", creds(bad))
		if status != http.StatusOK || !strings.HasPrefix(got, `{"error_code":1001,"message":"添加失败: `) {
			t.Errorf("addTask %v: %d %s", bad, status, got)
		}
		if strings.Contains(bad["execute_time"], "tomorrow") && !strings.Contains(got, "YYYY-MM-DD HH:MM:SS") {
			t.Errorf("bad execute_time message %s", got)
		}
	}
	if n := e.queueSize("mail"); n != 2 {
		t.Errorf("mail holds %d tasks after refused tasks, want 2", n)
	}
	if n := e.queueSize("typed"); n != 0 {
		t.Errorf("typed holds %d tasks", n)
	}
	if _, err := e.insp.GetQueueInfo("neverq"); err == nil {
		t.Error("a refused task created its queue")
	}

	// countQueue: the tasks not yet finished; 0 for an unknown queue.
	expect("/api/countQueue", creds(map[string]string{"queue_name": "mail"}), `{"error_code":0,"count":2}`)
	expect("/api/countQueue", creds(map[string]string{"queue_name": "at"}), `{"error_code":0,"count":1}`)
	expect("/api/countQueue", creds(map[string]string{"queue_name": "nope"}), `{"error_code":0,"count":0}`)

	// deleteQueue: 0 with its tasks, 1003 when unknown, 1004 while a task runs.
	expect("/api/deleteQueue", creds(map[string]string{"queue_name": "mail"}), deleted)
	expect("/api/deleteQueue", creds(map[string]string{"queue_name": "mail"}), notExists)
	if n := e.queueSize("mail"); n != 0 {
		t.Errorf("deleted queue holds %d tasks", n)
	}
	if _, err := htq.NewClient(e.st).Enqueue(htq.NewTask("busy", nil), htq.Queue("typed")); err != nil {
		t.Fatal(err)
	}
	var got fetchResponse
	e.must(http.StatusOK, "POST", "/v1/fetch", map[string]any{"queues": []string{"typed"}}, &got)
	status, body := post("/api/deleteQueue", creds(map[string]string{"queue_name": "typed"}))
	if status != http.StatusOK || !strings.HasPrefix(body, `{"error_code":1004,"message":"删除失败: `) {
		t.Errorf("delete of a busy queue: %d %s", status, body)
	}
	// The PHP SDK's allQueue parses.
	_, body = post("/api/allQueue", creds(nil))
	var all []map[string]any
	if err := json.Unmarshal([]byte(body), &all); err != nil || len(all) != 3 {
		t.Errorf("allQueue after delete: %s", body)
	}
}

func TestHTQDisabledAndOversized(t *testing.T) {
	e := newEnv(t, "embedded", func(o *Options) { o.HTQAppKey, o.HTQAppToken = "", ""; o.MaxBodyBytes = 1024 })
	status, data, _ := e.form("/api/allQueue", false, map[string]string{"app_key": "", "app_token": ""}, nil)
	if status != http.StatusOK || string(data) != `{"error_code":1000,"message":"认证失败"}` {
		t.Errorf("HTQ without credentials configured: %d %s", status, data)
	}
	status, data, _ = e.form("/api/addTask", true, map[string]string{"url": strings.Repeat("x", 4096)}, nil)
	if status != http.StatusRequestEntityTooLarge || !strings.HasPrefix(string(data), `{"error_code":1001`) {
		t.Errorf("oversized HTQ form: %d %s", status, data)
	}
}
