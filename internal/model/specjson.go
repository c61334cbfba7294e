package model

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// DecodeSpec reads b, the body of a single-task enqueue, into s when b is
// a task in the shape clients send it, as encoding/json's Decoder with
// DisallowUnknownFields reads it (the API's decoder) but without its
// reflection: an object whose keys are TaskSpec's own, each once and
// written without escapes, with no null and no variable, its options
// an object of TaskOptions' keys in the same way, its headers an object
// of strings. It reports false for anything else, errors included, and s
// is then unspecified: the caller decodes b with encoding/json, which
// gives the task or says what is wrong. s shares no memory with b.
// FuzzDecodeSpec checks that encoding/json reads every b that DecodeSpec
// reads to the same TaskSpec.
func DecodeSpec(b []byte, s *TaskSpec) bool {
	if !json.Valid(b) {
		return false
	}
	r := specReader{b: b}
	return r.spec(s)
}

// DecodeSpecs reads b, the body of a batch enqueue ({"tasks": [...]}),
// into specs as DecodeSpec reads one task: when b is an object whose one
// key is tasks, an array of tasks DecodeSpec reads, as encoding/json reads
// it into a struct whose one field is a []TaskSpec tagged "tasks". It
// reports false for anything else, and leaves *specs as it was
// (FuzzDecodeSpecs compares).
func DecodeSpecs(b []byte, specs *[]TaskSpec) bool {
	if !json.Valid(b) {
		return false
	}
	r := specReader{b: b}
	var out []TaskSpec
	if !r.object(func(key []byte) bool {
		if string(key) != "tasks" || out != nil || r.b[r.i] != '[' {
			return false
		}
		out = []TaskSpec{}
		r.i = skipSpace(r.b, r.i+1)
		for r.b[r.i] != ']' {
			if r.b[r.i] == ',' {
				r.i = skipSpace(r.b, r.i+1)
			}
			out = append(out, TaskSpec{})
			if !r.spec(&out[len(out)-1]) {
				return false
			}
			r.i = skipSpace(r.b, r.i)
		}
		r.i++
		return true
	}) {
		return false
	}
	*specs = out
	return true
}

// spec reads the task object at i into s (see DecodeSpec).
func (r *specReader) spec(s *TaskSpec) bool {
	*s = TaskSpec{}
	var seen uint16
	return r.object(func(key []byte) bool {
		var bit uint16
		ok := true
		switch string(key) {
		case "type":
			bit, ok = 1<<0, r.str(&s.Type)
		case "payload":
			bit = 1 << 1
			raw, isNull := r.value()
			s.Payload, ok = append(json.RawMessage(nil), raw...), !isNull
		case "payload_base64":
			bit, ok = 1<<2, r.str(&s.PayloadBase64)
		case "url":
			bit, ok = 1<<3, r.str(&s.URL)
		case "method":
			bit, ok = 1<<4, r.str(&s.Method)
		case "headers":
			bit, ok = 1<<5, r.headers(&s.Headers)
		case "body":
			bit, s.Body = 1<<6, new(string)
			ok = r.str(s.Body)
		case "body_base64":
			bit, ok = 1<<7, r.str(&s.BodyBase64)
		case "timeout_ms":
			bit, ok = 1<<8, r.wholeInt64(&s.TimeoutMS)
		case "options":
			bit, s.Options = 1<<9, new(TaskOptions)
			ok = r.options(s.Options)
		default: // variable, an unknown key, another spelling of a known one
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

// options reads a TaskOptions object as TaskOptions.UnmarshalJSON does.
func (r *specReader) options(o *TaskOptions) bool {
	var seen uint16
	return r.object(func(key []byte) bool {
		var bit uint16
		ok := true
		switch string(key) {
		case "delay":
			bit, o.Delay = 1<<0, new(Duration)
			ok = r.duration(o.Delay)
		case "process_at":
			bit, o.ProcessAt = 1<<1, new(time.Time)
			ok = r.timeValue(o.ProcessAt)
		case "max_retry":
			bit, o.MaxRetry = 1<<2, new(int)
			ok = r.wholeInt(o.MaxRetry)
		case "timeout":
			bit, o.Timeout = 1<<3, new(Duration)
			ok = r.duration(o.Timeout)
		case "deadline":
			bit, o.Deadline = 1<<4, new(time.Time)
			ok = r.timeValue(o.Deadline)
		case "unique":
			bit, o.Unique = 1<<5, new(Duration)
			ok = r.duration(o.Unique)
		case "task_id":
			bit, ok = 1<<6, r.str(&o.TaskID)
		case "retention":
			bit, o.Retention = 1<<7, new(Duration)
			ok = r.duration(o.Retention)
		case "priority":
			bit, o.Priority = 1<<8, new(int)
			ok = r.wholeInt(o.Priority)
		case "key":
			bit, ok = 1<<9, r.str(&o.Key)
		case "group":
			bit, ok = 1<<10, r.str(&o.Group)
		case "callback":
			bit, ok = 1<<11, r.str(&o.Callback)
		case "failure_callback":
			bit, ok = 1<<12, r.str(&o.FailureCallback)
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

// headers reads an object of strings as Headers.UnmarshalJSON does.
func (r *specReader) headers(h *Headers) bool {
	out := Headers{}
	if !r.object(func(key []byte) bool {
		var v string
		if !r.str(&v) {
			return false
		}
		out[string(key)] = v
		return true
	}) {
		return false
	}
	*h = out
	return true
}

// specReader reads valid JSON (json.Valid) from b at i.
type specReader struct {
	b []byte
	i int
}

// object reads the object at i: for each key, ASCII written without
// escapes, it calls fn with i at the key's value, which fn reads. It reports false
// when i is not at an object, a key has an escape or fn returns false.
func (r *specReader) object(fn func(key []byte) bool) bool {
	r.i = skipSpace(r.b, r.i)
	if r.i == len(r.b) || r.b[r.i] != '{' {
		return false
	}
	r.i = skipSpace(r.b, r.i+1)
	for r.b[r.i] != '}' {
		if r.b[r.i] == ',' {
			r.i = skipSpace(r.b, r.i+1)
		}
		start := r.i + 1 // past the key's opening quote
		end := start
		for r.b[end] != '"' {
			if r.b[end] == '\\' || r.b[end] >= utf8.RuneSelf {
				return false // left to encoding/json: an escape, or UTF-8 it checks
			}
			end++
		}
		r.i = skipSpace(r.b, end+1) // at the ':'
		r.i = skipSpace(r.b, r.i+1)
		if !fn(r.b[start:end]) {
			return false
		}
		r.i = skipSpace(r.b, r.i)
	}
	r.i++
	return true
}

// value returns the value at i, moving past it, and whether it is null.
func (r *specReader) value() ([]byte, bool) {
	start := r.i
	r.i = skipValue(r.b, r.i)
	v := r.b[start:r.i]
	return v, string(v) == "null"
}

// str reads a string into *s: as it is when it is valid UTF-8 without
// escapes, else through encoding/json (its escapes, invalid UTF-8 made
// U+FFFD). It reports false when the value is not a string.
func (r *specReader) str(s *string) bool {
	if r.b[r.i] != '"' {
		return false
	}
	start := r.i + 1
	end, escaped, high := start, false, false
	for ; r.b[end] != '"'; end++ {
		switch c := r.b[end]; {
		case c == '\\':
			escaped = true
			end++ // the escaped byte, which may be a quote
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	r.i = end + 1
	if escaped || high && !utf8.Valid(r.b[start:end]) {
		return json.Unmarshal(r.b[start-1:r.i], s) == nil
	}
	*s = string(r.b[start:end])
	return true
}

// wholeInt64 reads a whole number as encoding/json reads one into an
// int64.
func (r *specReader) wholeInt64(n *int64) bool {
	v, _ := r.value()
	x, err := strconv.ParseInt(string(v), 10, 64)
	*n = x
	return err == nil
}

// wholeInt reads a whole number as encoding/json reads one into an int.
func (r *specReader) wholeInt(n *int) bool {
	v, _ := r.value()
	x, err := strconv.ParseInt(string(v), 10, strconv.IntSize)
	*n = int(x)
	return err == nil
}

// duration reads a Duration as its UnmarshalJSON does.
func (r *specReader) duration(d *Duration) bool {
	v, isNull := r.value()
	return !isNull && d.UnmarshalJSON(v) == nil
}

// timeValue reads an RFC 3339 time as jsonTime's UnmarshalJSON does.
func (r *specReader) timeValue(t *time.Time) bool {
	v, isNull := r.value()
	return !isNull && (*jsonTime)(t).UnmarshalJSON(v) == nil
}
