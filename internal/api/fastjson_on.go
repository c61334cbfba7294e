//go:build !htq_stdjson

package api

// scanEnqueueBodies makes the enqueue handlers read their bodies with the
// scanner of fastjson.go. Building with -tags htq_stdjson turns it off
// (fastjson_off.go): they then decode with encoding/json alone, as
// decodeJSON does, for an A/B measurement of the scanner.
const scanEnqueueBodies = true
