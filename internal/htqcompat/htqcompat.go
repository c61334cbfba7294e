// Package htqcompat is htq serve's compatibility layer for HTQ, the older
// Node.js task service: its form-encoded /api/addQueue, /api/deleteQueue,
// /api/allQueue, /api/countQueue and /api/addTask, answered byte for byte
// as HTQ answered them (error codes 1000-1004, its messages, text/html).
// Its handlers decode HTQ's forms, call the queue model (model.Registry)
// and the htq Client and Inspector, and encode HTQ's answers.
package htqcompat

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/htqueue/htq"
	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/model"
)

// HTQ's error codes, as HTQ (github.com/star7th/htq) answered them, and
// one of htq's own.
const (
	htqOK            = 0
	htqAuthFailed    = 1000
	htqAddFailed     = 1001
	htqQueueExists   = 1002
	htqQueueNotFound = 1003
	htqDeleteFailed  = 1004
	// htqQueryFailed is htq's own: HTQ's allQueue and countQueue had no
	// failure answer, and "add failed" would mislead.
	htqQueryFailed = 1005
)

// HTQ's messages, kept word for word so that a client comparing them keeps
// working: "added", "add failed", "authentication failed", "queue name
// already exists", "deleted", "delete failed", "queue does not exist,
// create it first". htq appends ": <reason>" to the failures it can
// explain.
const (
	htqMsgAdded         = "添加成功"
	htqMsgAddFailed     = "添加失败"
	htqMsgAuthFailed    = "认证失败"
	htqMsgQueueExists   = "队列名已经存在"
	htqMsgDeleted       = "删除成功"
	htqMsgDeleteFailed  = "删除失败"
	htqMsgQueueNotFound = "队列不存在，请先创建"
	htqMsgQueryFailed   = "查询失败" // "query failed": htq's, for htqQueryFailed
)

// Options configure the HTQ-compatible handler.
type Options struct {
	// Registry is the queue model the handlers call.
	Registry *model.Registry
	// Client enqueues tasks; Inspector reads and deletes queues.
	Client    *htq.Client
	Inspector *htq.Inspector
	// AppKey and AppToken are the credentials HTQ's clients send as the
	// form fields app_key and app_token; when both are empty every call
	// is refused (1000).
	AppKey, AppToken string
	// Location is the time zone of execute_time.
	Location *time.Location
	// MaxBodyBytes bounds a form body.
	MaxBodyBytes int64
	// StatusOf maps an error to the HTTP status the native API gives it;
	// a call that fails with a 5xx (storage unavailable) answers that
	// status, the other failures 200 as HTQ did.
	StatusOf func(error) int
	// RetryAfter, when not empty, is the Retry-After header of a 503
	// answer (the storage is unavailable).
	RetryAfter string
	// Logger receives the server-side failures.
	Logger *slog.Logger
}

// Handler serves HTQ's /api/* endpoints.
type Handler struct {
	opts             Options
	appKey, appToken []byte
	logger           *slog.Logger
	mux              *http.ServeMux
}

// New returns the handler of HTQ's /api/* endpoints.
func New(opts Options) *Handler {
	h := &Handler{opts: opts, appKey: []byte(opts.AppKey), appToken: []byte(opts.AppToken), logger: opts.Logger}
	h.mux = http.NewServeMux()
	for _, rt := range routes {
		h.mux.Handle(rt.pattern, h.Route(rt.pattern))
	}
	return h
}

// routes are HTQ's endpoints.
var routes = []struct {
	pattern string
	serve   func(*Handler, http.ResponseWriter, *http.Request)
}{
	{"POST /api/addQueue", (*Handler).htqAddQueue},
	{"POST /api/deleteQueue", (*Handler).htqDeleteQueue},
	{"POST /api/allQueue", (*Handler).htqAllQueue},
	{"POST /api/countQueue", (*Handler).htqCountQueue},
	{"POST /api/addTask", (*Handler).htqAddTask},
}

// ServeHTTP serves one request of /api/*.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Route returns the handler of one of Routes' patterns, to mount on a mux
// of the caller's without a second mux in between (h itself for any other
// pattern).
func (h *Handler) Route(pattern string) http.Handler {
	for _, rt := range routes {
		if rt.pattern == pattern {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.serve(h, w, r) })
		}
	}
	return h
}

// Routes lists the patterns the handler serves, to mount it on a mux.
func Routes() []string {
	out := make([]string, len(routes))
	for i, rt := range routes {
		out[i] = rt.pattern
	}
	return out
}

// ExecuteTimeLayout is the layout of HTQ's execute_time.
const ExecuteTimeLayout = "2006-01-02 15:04:05"

type htqReply struct {
	ErrorCode int    `json:"error_code"`
	Message   string `json:"message"`
}

// writeHTQ answers as HTQ did: the JSON text without a trailing newline,
// as text/html (HTQ's Express res.send of a string; a client that parses
// the text itself keeps working), with HTQ's Access-Control-Allow-Origin: *
// but not its Allow-Credentials: true (which browsers refuse beside "*",
// and which would let any site call with the caller's credentials if the
// origin were ever echoed; HTQ's clients are servers).
func writeHTQ(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error_code":1001,"message":"添加失败: encode response"}`)
	}
	writeHTQBody(w, status, body)
}

// htqAdded is the answer to an added task or queue, encoded once.
var htqAdded, _ = json.Marshal(htqReply{ErrorCode: htqOK, Message: htqMsgAdded})

// writeHTQBody answers body, encoded JSON, as writeHTQ does.
func writeHTQBody(w http.ResponseWriter, status int, body []byte) {
	hdr := w.Header()
	// One slice per value for every answer: an answer's header is only
	// read once set (Add would append to a copy, its capacity being its
	// length).
	hdr["Content-Type"] = htqContentType
	hdr["Content-Length"] = model.ContentLength(len(body))
	hdr["Access-Control-Allow-Origin"] = htqAllowOrigin
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

var (
	htqContentType = []string{"text/html; charset=utf-8"}
	htqAllowOrigin = []string{"*"}
)

// writeHTQReply answers an htqReply as writeHTQ does, without
// encoding/json's reflection (TestWriteHTQReply compares the two).
func writeHTQReply(w http.ResponseWriter, status int, r htqReply) {
	b := make([]byte, 0, 40+len(r.Message))
	b = append(b, `{"error_code":`...)
	b = strconv.AppendInt(b, int64(r.ErrorCode), 10)
	b = append(b, `,"message":`...)
	b = model.AppendString(b, r.Message)
	writeHTQBody(w, status, append(b, '}'))
}

// htqFail answers an HTQ error code, with reason after HTQ's message.
// Storage failures get HTTP 503, the rest 200 as in HTQ.
func (h *Handler) htqFail(w http.ResponseWriter, r *http.Request, code int, msg string, err error) {
	status := http.StatusOK
	if err != nil {
		var tooBig *http.MaxBytesError
		switch s := h.opts.StatusOf(err); {
		case errors.As(err, &tooBig):
			status = http.StatusRequestEntityTooLarge
		case s >= 500:
			status = s
			h.logger.Error("HTQ request failed", "path", r.URL.Path, "err", err)
		}
		if status == http.StatusServiceUnavailable && h.opts.RetryAfter != "" {
			w.Header().Set("Retry-After", h.opts.RetryAfter)
		}
		msg += ": " + err.Error()
	}
	writeHTQReply(w, status, htqReply{ErrorCode: code, Message: msg})
}

// htqForm parses a urlencoded or multipart/form-data body (at most
// MaxBodyBytes; a multipart one in its plain shape by simpleForm) and
// checks app_key and app_token in constant time. It answers the request
// itself and returns false when the call cannot go on: a body that does
// not parse with the endpoint's failure code and message.
func (h *Handler) htqForm(w http.ResponseWriter, r *http.Request, failCode int, failMsg string) (url.Values, bool) {
	r.Body = http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes)
	var err error
	var f url.Values
	mt, boundary, perr := formMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		err = r.ParseForm()
		f = r.PostForm
	} else {
		simple := false
		if perr == nil {
			f, simple = simpleForm(r, boundary, h.opts.MaxBodyBytes)
		}
		if !simple {
			err = r.ParseMultipartForm(h.opts.MaxBodyBytes)
			f = r.PostForm
			if r.MultipartForm != nil {
				defer r.MultipartForm.RemoveAll()
			}
		}
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if !errors.As(err, &tooBig) {
			err = fmt.Errorf("%w: form: %v", base.ErrInvalidArgument, err)
		}
		h.htqFail(w, r, failCode, failMsg, err)
		return nil, false
	}
	keyOK := subtle.ConstantTimeCompare([]byte(f.Get("app_key")), h.appKey)
	tokenOK := subtle.ConstantTimeCompare([]byte(f.Get("app_token")), h.appToken)
	if len(h.appKey) == 0 && len(h.appToken) == 0 || keyOK&tokenOK != 1 {
		writeHTQ(w, http.StatusOK, htqReply{ErrorCode: htqAuthFailed, Message: htqMsgAuthFailed})
		return nil, false
	}
	return f, true
}

// htqSeconds reads HTQ's stepping_time or max_time_interval: empty or "0"
// means the default.
func htqSeconds(f url.Values, name string) (int, error) {
	s := strings.TrimSpace(f.Get(name))
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: %s %q: want a whole number of seconds", base.ErrInvalidArgument, name, s)
	}
	return n, nil
}

// htqAddQueue: POST /api/addQueue (queue_name, type, stepping_time,
// max_time_interval, and htq's optional extensions: see
// htqQueueExtensions).
func (h *Handler) htqAddQueue(w http.ResponseWriter, r *http.Request) {
	f, ok := h.htqForm(w, r, htqAddFailed, htqMsgAddFailed)
	if !ok {
		return
	}
	name := f.Get("queue_name")
	if err := base.ValidateQueueName(name); err != nil {
		h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, err)
		return
	}
	mode := model.Mode(f.Get("type"))
	if !mode.IsURL() {
		h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, fmt.Errorf("%w: type %q: want real_time, timing or variable", base.ErrInvalidArgument, f.Get("type")))
		return
	}
	q := &model.Queue{Name: name, Mode: mode, CreatedAt: time.Now().UTC()}
	ext, err := htqQueueExtensions(f)
	if err != nil {
		h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, err)
		return
	}
	ext.ApplyPolicy(q)
	if mode == model.ModeVariable {
		var err error
		if q.SteppingTimeS, err = htqSeconds(f, "stepping_time"); err == nil {
			q.MaxIntervalS, err = htqSeconds(f, "max_time_interval")
		}
		if err != nil {
			h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, err)
			return
		}
	}
	if err := q.WithDefaults().Validate(); err != nil {
		h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, err)
		return
	}
	known, err := h.opts.Registry.Known(r.Context(), name)
	if err != nil {
		h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, err)
		return
	}
	if known {
		writeHTQ(w, http.StatusOK, htqReply{ErrorCode: htqQueueExists, Message: htqMsgQueueExists})
		return
	}
	if _, err := h.opts.Registry.Define(r.Context(), q, ext, model.DefineExplicit); errors.Is(err, model.ErrQueueExists) {
		writeHTQ(w, http.StatusOK, htqReply{ErrorCode: htqQueueExists, Message: htqMsgQueueExists})
		return
	} else if err != nil {
		h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, err)
		return
	}
	writeHTQBody(w, http.StatusOK, htqAdded)
}

// htqDeleteQueue: POST /api/deleteQueue (queue_name) deletes the queue and
// its tasks; it fails (1004) while one of its tasks is running.
func (h *Handler) htqDeleteQueue(w http.ResponseWriter, r *http.Request) {
	f, ok := h.htqForm(w, r, htqDeleteFailed, htqMsgDeleteFailed)
	if !ok {
		return
	}
	name := f.Get("queue_name")
	if base.ValidateQueueName(name) != nil {
		writeHTQ(w, http.StatusOK, htqReply{ErrorCode: htqQueueNotFound, Message: htqMsgQueueNotFound})
		return
	}
	known, err := h.opts.Registry.Known(r.Context(), name)
	if err != nil {
		h.htqFail(w, r, htqDeleteFailed, htqMsgDeleteFailed, err)
		return
	}
	if !known {
		writeHTQ(w, http.StatusOK, htqReply{ErrorCode: htqQueueNotFound, Message: htqMsgQueueNotFound})
		return
	}
	if err := h.opts.Inspector.DeleteQueue(name, true); err != nil && !errors.Is(err, base.ErrQueueNotFound) {
		h.htqFail(w, r, htqDeleteFailed, htqMsgDeleteFailed, err)
		return
	}
	if err := h.opts.Registry.Queues().Delete(r.Context(), name); err != nil {
		h.htqFail(w, r, htqDeleteFailed, htqMsgDeleteFailed, err)
		return
	}
	writeHTQ(w, http.StatusOK, htqReply{ErrorCode: htqOK, Message: htqMsgDeleted})
}

type htqAttribute struct {
	Type            string `json:"type"`
	SteppingTime    string `json:"stepping_time,omitempty"`
	MaxTimeInterval string `json:"max_time_interval,omitempty"`
}

type htqQueue struct {
	QueueName string       `json:"queue_name"`
	Attribute htqAttribute `json:"attribute"`
}

// htqAllQueue: POST /api/allQueue answers a JSON array of the URL queues,
// [{"queue_name":…,"attribute":{"type":…}}], with a variable queue's
// stepping_time and max_time_interval as strings (as HTQ stored the form
// values).
func (h *Handler) htqAllQueue(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.htqForm(w, r, htqQueryFailed, htqMsgQueryFailed); !ok {
		return
	}
	qs, err := h.opts.Registry.Queues().List(r.Context())
	if err != nil {
		h.htqFail(w, r, htqQueryFailed, htqMsgQueryFailed, err)
		return
	}
	out := make([]htqQueue, 0, len(qs))
	for _, q := range qs {
		if !q.Mode.IsURL() {
			continue
		}
		a := htqAttribute{Type: string(q.Mode)}
		if q.Mode == model.ModeVariable {
			a.SteppingTime = strconv.Itoa(q.SteppingTimeS)
			a.MaxTimeInterval = strconv.Itoa(q.MaxIntervalS)
		}
		out = append(out, htqQueue{QueueName: q.Name, Attribute: a})
	}
	writeHTQ(w, http.StatusOK, out)
}

// htqCountQueue: POST /api/countQueue (queue_name) answers
// {"error_code":0,"count":N}, N the tasks not yet finished (pending,
// running, scheduled, waiting for a retry); 0 for an unknown queue, as
// HTQ answered.
func (h *Handler) htqCountQueue(w http.ResponseWriter, r *http.Request) {
	f, ok := h.htqForm(w, r, htqQueryFailed, htqMsgQueryFailed)
	if !ok {
		return
	}
	count := 0
	if name := f.Get("queue_name"); base.ValidateQueueName(name) == nil {
		info, err := h.opts.Inspector.GetQueueInfo(name)
		switch {
		case err == nil:
			count = info.Pending + info.Active + info.Scheduled + info.Retry + info.Aggregating
		case !errors.Is(err, base.ErrQueueNotFound):
			h.htqFail(w, r, htqQueryFailed, htqMsgQueryFailed, err)
			return
		}
	}
	writeHTQ(w, http.StatusOK, struct {
		ErrorCode int `json:"error_code"`
		Count     int `json:"count"`
	}{htqOK, count})
}

// parseExecuteTime reads HTQ's execute_time in loc: "" or "0" is now
// (zero time), anything but YYYY-MM-DD HH:MM:SS is an error.
func parseExecuteTime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return time.Time{}, nil
	}
	t, err := time.ParseInLocation(ExecuteTimeLayout, s, loc)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: execute_time %q: want YYYY-MM-DD HH:MM:SS (in %s), or 0 for now", base.ErrInvalidArgument, s, loc)
	}
	return t, nil
}

// htqHeader reads the header field: a JSON object of header names to
// values (strings, or numbers and booleans written as text); empty, {} or
// [] (PHP's json_encode of an empty array) for none.
func htqHeader(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" || model.IsEmptyArray([]byte(s)) || model.IsEmptyObject([]byte(s)) {
		return nil, nil
	}
	var raw map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%w: header: want a JSON object of header names and values: %s", base.ErrInvalidArgument, model.JSONErrorText(err))
	}
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		switch v := v.(type) {
		case string:
			out[k] = v
		case json.Number:
			out[k] = v.String()
		case bool:
			out[k] = strconv.FormatBool(v)
		default:
			return nil, fmt.Errorf("%w: header %q: want a string value", base.ErrInvalidArgument, k)
		}
	}
	return out, nil
}

// htqData reads the data field, a JSON object, as form values: strings as
// they are, numbers and booleans as their JSON text, null as empty, an
// array as the key repeated, a nested object as its JSON text. Empty, {}
// or [] (PHP's json_encode of an empty array) is no data.
func htqData(s string) (url.Values, error) {
	if strings.TrimSpace(s) == "" || model.IsEmptyArray([]byte(s)) || model.IsEmptyObject([]byte(s)) {
		return nil, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return nil, fmt.Errorf("%w: data: want a JSON object: %s", base.ErrInvalidArgument, model.JSONErrorText(err))
	}
	vals := make(url.Values, len(raw))
	for k, v := range raw {
		if len(v) > 0 && v[0] == '[' {
			var items []json.RawMessage
			if err := json.Unmarshal(v, &items); err != nil {
				return nil, fmt.Errorf("%w: data %q: %s", base.ErrInvalidArgument, k, model.JSONErrorText(err))
			}
			for _, item := range items {
				vals.Add(k, formText(item))
			}
			continue
		}
		vals.Add(k, formText(v))
	}
	return vals, nil
}

func formText(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	switch {
	case len(v) == 0 || string(v) == "null":
		return ""
	case v[0] == '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			return s
		}
	case v[0] == '{':
		var buf bytes.Buffer
		if json.Compact(&buf, v) == nil {
			return buf.String()
		}
	}
	return string(v)
}

// htqAddTask: POST /api/addTask (queue_name, url, method, header, data,
// execute_time) adds a URL task; a queue that does not exist is created
// as real_time, as HTQ did.
func (h *Handler) htqAddTask(w http.ResponseWriter, r *http.Request) {
	f, ok := h.htqForm(w, r, htqAddFailed, htqMsgAddFailed)
	if !ok {
		return
	}
	fail := func(err error) { h.htqFail(w, r, htqAddFailed, htqMsgAddFailed, err) }
	name := f.Get("queue_name")
	if err := base.ValidateQueueName(name); err != nil {
		fail(err)
		return
	}
	at, err := parseExecuteTime(f.Get("execute_time"), h.opts.Location)
	if err != nil {
		fail(err)
		return
	}
	headers, err := htqHeader(f.Get("header"))
	if err != nil {
		fail(err)
		return
	}
	data, err := htqData(f.Get("data"))
	if err != nil {
		fail(err)
		return
	}
	method := strings.ToUpper(strings.TrimSpace(f.Get("method")))
	if method == "" {
		method = http.MethodGet
	}
	spec := model.TaskSpec{URL: strings.TrimSpace(f.Get("url")), Method: method, Headers: headers}
	if spec.URL == "" {
		fail(fmt.Errorf("%w: url is empty", base.ErrInvalidArgument))
		return
	}
	if len(data) > 0 {
		switch method {
		case http.MethodPost, http.MethodPut, http.MethodPatch:
			body := data.Encode()
			spec.Body = &body
			if !hasHeader(headers, "Content-Type") {
				if spec.Headers == nil {
					spec.Headers = make(map[string]string, 1)
				}
				spec.Headers["Content-Type"] = "application/x-www-form-urlencoded"
			}
		default:
			u, err := url.Parse(spec.URL)
			if err != nil {
				fail(fmt.Errorf("%w: url %q: %v", base.ErrInvalidArgument, spec.URL, err))
				return
			}
			if u.RawQuery != "" {
				u.RawQuery += "&"
			}
			u.RawQuery += data.Encode()
			spec.URL = u.String()
		}
	}
	if !at.IsZero() {
		spec.Options = &model.TaskOptions{ProcessAt: &at}
	}
	ctx := r.Context()
	q, isNew, err := h.opts.Registry.Resolve(ctx, name, model.ModeRealTime)
	if err != nil {
		fail(err)
		return
	}
	if q.Mode == model.ModeVariable {
		spec.Variable = &model.Variable{}
	}
	task, opts, err := h.opts.Registry.Build(ctx, &spec, q)
	if err != nil {
		fail(err)
		return
	}
	if isNew {
		if _, err := h.opts.Registry.Define(ctx, q, nil, model.DefineFirstTask); err != nil {
			fail(err)
			return
		}
	}
	if _, err := h.opts.Client.EnqueueContext(model.EnqueueContext(ctx), task, append(opts, htq.Queue(name))...); err != nil {
		fail(err)
		return
	}
	writeHTQBody(w, http.StatusOK, htqAdded)
}

func hasHeader(h map[string]string, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// htqQueueExtensions reads the optional form fields with which addQueue
// sets what the native API sets on a queue (HTQ had none of them; an HTQ
// client that sends none gets HTQ's behaviour): max_concurrency,
// rate_limit, rate_burst, lease_ms, max_attempts, min_backoff_ms,
// max_backoff_ms, dispatch_timeout_ms, completed_retention_s and retry_4xx.
// A malformed value is an error, never ignored.
func htqQueueExtensions(f url.Values) (*model.QueueChange, error) {
	req := &model.QueueChange{}
	ints := []struct {
		name string
		dst  **int
	}{{"max_concurrency", &req.MaxConcurrency}, {"rate_burst", &req.RateBurst}, {"max_attempts", &req.MaxAttempts}}
	for _, it := range ints {
		if v := f.Get(it.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: %s %q: want a whole number, 0 or more", base.ErrInvalidArgument, it.name, v)
			}
			*it.dst = &n
		}
	}
	int64s := []struct {
		name string
		dst  **int64
	}{{"lease_ms", &req.LeaseMS}, {"min_backoff_ms", &req.MinBackoffMS}, {"max_backoff_ms", &req.MaxBackoffMS}, {"dispatch_timeout_ms", &req.DispatchTimeoutMS}}
	for _, it := range int64s {
		if v := f.Get(it.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("%w: %s %q: want a whole number of milliseconds, 0 or more", base.ErrInvalidArgument, it.name, v)
			}
			*it.dst = &n
		}
	}
	if v := f.Get("completed_retention_s"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < model.KeepNoCompleted {
			return nil, fmt.Errorf("%w: completed_retention_s %q: want a whole number of seconds, or -1 to keep no completed task", base.ErrInvalidArgument, v)
		}
		req.CompletedRetentionS = &n
	}
	if v := f.Get("rate_limit"); v != "" {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: rate_limit %q: want tasks per second, 0 or more", base.ErrInvalidArgument, v)
		}
		req.RateLimit = &x
	}
	if v := f.Get("retry_4xx"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: retry_4xx %q: want true or false", base.ErrInvalidArgument, v)
		}
		req.Retry4xx = &b
	}
	return req, nil
}
