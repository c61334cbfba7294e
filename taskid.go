package htq

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"sync"
)

// idSources hands out ChaCha8 generators (a cryptographically strong
// stream cipher), each seeded from crypto/rand, so that a task ID costs no
// system call: EnqueueBatch makes thousands of them per call.
var idSources = sync.Pool{New: func() any {
	var seed [32]byte
	if _, err := crand.Read(seed[:]); err != nil {
		panic("htq: crypto/rand failed: " + err.Error()) // the runtime guarantees it does not
	}
	return rand.NewChaCha8(seed)
}}

// newTaskID returns a random (version 4) UUID in its usual text form.
func newTaskID() string {
	var b [16]byte
	src := idSources.Get().(*rand.ChaCha8)
	_, _ = src.Read(b[:])
	idSources.Put(src)
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	var out [36]byte
	hex.Encode(out[0:8], b[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], b[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], b[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], b[8:10])
	out[23] = '-'
	hex.Encode(out[24:], b[10:])
	return string(out[:])
}
