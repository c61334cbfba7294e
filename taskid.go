package htq

import (
	crand "crypto/rand"
	"math/rand/v2"
	"sync"

	"github.com/htqueue/htq/internal/base"
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
	return base.FormatUUID(b)
}
