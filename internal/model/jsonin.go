package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// Client JSON: what the HTTP faces of htq serve accept and how they say
// what is wrong with it. Two rules hold for every field the model
// decodes:
//
//   - An empty JSON array stands for an empty object wherever an object is
//     meant (headers, options, variable; HTQ's header and data forms):
//     PHP's json_encode writes an empty array as [], so HTQ clients in PHP
//     send that when they have nothing to say.
//   - A type error names the field and the JSON that was wanted, never a
//     Go type (TypeErrorText).

// IsEmptyArray reports whether b is the JSON text of an empty array ("[]",
// white space allowed around and inside).
func IsEmptyArray(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '[' || b[len(b)-1] != ']' {
		return false
	}
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

// IsEmptyObject reports whether b is the JSON text of an empty object
// ("{}", white space allowed around and inside).
func IsEmptyObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	return len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

// isNull reports whether b is the JSON null.
func isNull(b []byte) bool { return string(bytes.TrimSpace(b)) == "null" }

// decodeStrict decodes one JSON value b into v, refusing unknown fields,
// as the API's decoder does for the body (a type's UnmarshalJSON does
// not inherit the caller's DisallowUnknownFields). An unknown field is an
// ErrInvalidArgument error that names it within what.
//
// known lists JSON keys of v's fields (see fieldKeys). An object whose
// keys are all among them, written without escapes, cannot hold an
// unknown field: it is decoded by json.Unmarshal, which decodes as a
// Decoder does but needs none of its own (nor its reader and buffer).
// Any other value goes through a Decoder that refuses unknown fields.
func decodeStrict(what string, b []byte, v any, known map[string]bool) error {
	if json.Valid(b) && onlyKeys(b, known) {
		return json.Unmarshal(b, v)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err != nil && strings.HasPrefix(err.Error(), "json: unknown field ") {
		return invalid(what + ": " + strings.TrimPrefix(err.Error(), "json: "))
	}
	return err
}

// fieldKeys returns the JSON keys that the json tags of struct type t
// give its exported fields: keys that encoding/json decodes into a field
// of t (t's fields have no two tags alike).
func fieldKeys(t reflect.Type) map[string]bool {
	keys := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && !f.Anonymous && name != "" && name != "-" {
			keys[name] = true
		}
	}
	return keys
}

// onlyKeys reports whether b, valid JSON, is an object whose every key is
// written without escapes and is in known.
func onlyKeys(b []byte, known map[string]bool) bool {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	for b[i] != '}' {
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		end := bytes.IndexByte(b[i+1:], '"') // b[i] is the key's opening quote
		key := b[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 || !known[string(key)] {
			return false
		}
		i = skipSpace(b, i+1+end+1)         // at the ':'
		i = skipValue(b, skipSpace(b, i+1)) // past the value
		i = skipSpace(b, i)
	}
	return true
}

// skipSpace returns the index of the first byte of b from i on that is
// not JSON white space (len(b) if none).
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the value that starts at b[i],
// in valid JSON.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// plainString returns the text of b when b is a JSON string of printable
// ASCII without escapes (whose text is what is between the quotes).
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	for _, c := range b[1 : len(b)-1] {
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(b[1 : len(b)-1]), true
}

// isNumber reports whether b is a JSON number and nothing else.
func isNumber(b []byte) bool {
	return len(b) > 0 && (b[0] == '-' || '0' <= b[0] && b[0] <= '9') &&
		'0' <= b[len(b)-1] && b[len(b)-1] <= '9' && json.Valid(b)
}

// typeError is the *json.UnmarshalTypeError of a value of JSON kind got
// (as encoding/json names kinds: "string", "number", "array", …, or the
// value's text) where a want was expected; encoding/json prefixes its
// Field with the path of the field that holds it.
func typeError(got string, want reflect.Type) error {
	return &json.UnmarshalTypeError{Value: got, Type: want}
}

// jsonKind is how encoding/json's type errors name the kind of the JSON
// value b.
func jsonKind(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "string " + string(b)
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number " + string(b)
}

var (
	durationType = reflect.TypeFor[Duration]()
	timeType     = reflect.TypeFor[time.Time]()
	rawType      = reflect.TypeFor[json.RawMessage]()
	bytesType    = reflect.TypeFor[[]byte]()
)

// wantJSON describes the JSON a Go type takes, in the words of the API
// documentation.
func wantJSON(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil:
		return "a JSON value"
	case t == durationType:
		return `a duration (a string such as "90s" or "1m30s", or a number of seconds)`
	case t == timeType:
		return `a time in RFC 3339 (such as "2026-11-29T10:00:00Z")`
	case t == rawType:
		return "a JSON value"
	case t == bytesType:
		return "a base64 string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number in range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "a JSON value"
}

// gotJSON describes the value of a type error.
func gotJSON(v string) string {
	kind, rest, _ := strings.Cut(v, " ")
	switch kind {
	case "string":
		if rest != "" {
			return "the string " + rest
		}
		return "a string"
	case "number":
		if rest != "" {
			return rest
		}
		return "a number"
	case "array":
		return "an array"
	case "object":
		return "an object"
	case "bool":
		return "true or false"
	case "null":
		return "null"
	}
	return v
}

// TypeErrorText describes a JSON type error for a client: the field (when
// known) and the JSON wanted, never a Go type. For example
// `field options.max_retry: want a whole number in range, got a string`.
func TypeErrorText(e *json.UnmarshalTypeError) string {
	msg := fmt.Sprintf("want %s, got %s", wantJSON(e.Type), gotJSON(e.Value))
	if path := fieldPath(e.Field); path != "" {
		msg = "field " + path + ": " + msg
	}
	return msg
}

// fieldPath is the JSON path of a type error's Field. encoding/json puts
// the Go names of embedded structs in it (queueRequest's QueueChange);
// every JSON key of htq's API is lower case, so a capitalised element is
// such a name and is left out, unless it is the last one (a header name
// under headers).
func fieldPath(field string) string {
	if field == "" {
		return ""
	}
	parts := strings.Split(field, ".")
	out := parts[:0]
	for i, p := range parts {
		if i < len(parts)-1 && p != "" && p[0] >= 'A' && p[0] <= 'Z' {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}

// JSONErrorText describes an error of encoding/json for a client: a type
// error as TypeErrorText does, a syntax error by its message (which names
// no Go type), any other error by its text.
func JSONErrorText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return TypeErrorText(te)
	}
	return err.Error()
}
