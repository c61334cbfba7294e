//go:build htq_stdjson

package api

// scanEnqueueBodies is off in a build with -tags htq_stdjson: the enqueue
// handlers decode their bodies with encoding/json alone (see
// fastjson_on.go).
const scanEnqueueBodies = false
