package base

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxQueueNameLen is the longest queue name accepted, in bytes.
const MaxQueueNameLen = 100

// MaxPayloadSize is the largest payload accepted by Enqueue, in bytes
// (16 MiB). Larger data belongs in a blob store, with its key in the payload.
const MaxPayloadSize = 16 << 20

// MaxTypeLen is the longest task type accepted, in bytes.
const MaxTypeLen = 1024

// MaxIDLen is the longest task ID accepted, in bytes.
const MaxIDLen = 256

// DefaultQueue is the queue used when none is given.
const DefaultQueue = "default"

// ValidateQueueName checks that name can be used as a queue name: 1 to
// MaxQueueNameLen bytes of valid UTF-8 with no '{', '}', ':' and no control
// characters, so that every storage key of a queue hashes to one Redis
// Cluster slot and no name can collide with another queue's keys.
func ValidateQueueName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: queue name is empty", ErrInvalidArgument)
	}
	if len(name) > MaxQueueNameLen {
		return fmt.Errorf("%w: queue name is %d bytes, more than %d", ErrInvalidArgument, len(name), MaxQueueNameLen)
	}
	return validateKeyPart("queue name", name)
}

// ValidateTaskID checks a caller-chosen task ID: 1 to MaxIDLen bytes of
// valid UTF-8 without control characters.
func ValidateTaskID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: task ID is empty", ErrInvalidArgument)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w: task ID is %d bytes, more than %d", ErrInvalidArgument, len(id), MaxIDLen)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("%w: task ID is not valid UTF-8", ErrInvalidArgument)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: task ID %q contains a control character", ErrInvalidArgument, id)
		}
	}
	return nil
}

// ValidateGroupKey checks a group key: 1 to MaxQueueNameLen bytes with the
// same character rules as queue names.
func ValidateGroupKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: group key is empty", ErrInvalidArgument)
	}
	if len(key) > MaxQueueNameLen {
		return fmt.Errorf("%w: group key is %d bytes, more than %d", ErrInvalidArgument, len(key), MaxQueueNameLen)
	}
	return validateKeyPart("group key", key)
}

// MaxPriority is the highest task priority; 0 is the lowest and the
// default.
const MaxPriority = 9

// ValidateFairKey checks a fair-sharing key: 1 to MaxQueueNameLen bytes
// with the same character rules as queue names.
func ValidateFairKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: fair-sharing key is empty", ErrInvalidArgument)
	}
	if len(key) > MaxQueueNameLen {
		return fmt.Errorf("%w: fair-sharing key is %d bytes, more than %d", ErrInvalidArgument, len(key), MaxQueueNameLen)
	}
	return validateKeyPart("fair-sharing key", key)
}

// ValidateTaskType checks a task type: non-empty, at most MaxTypeLen bytes,
// valid UTF-8 without control characters.
func ValidateTaskType(typ string) error {
	if typ == "" {
		return fmt.Errorf("%w: task type is empty", ErrInvalidArgument)
	}
	if len(typ) > MaxTypeLen {
		return fmt.Errorf("%w: task type is %d bytes, more than %d", ErrInvalidArgument, len(typ), MaxTypeLen)
	}
	if !utf8.ValidString(typ) {
		return fmt.Errorf("%w: task type is not valid UTF-8", ErrInvalidArgument)
	}
	for _, r := range typ {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: task type %q contains a control character", ErrInvalidArgument, typ)
		}
	}
	return nil
}

func validateKeyPart(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalidArgument, what)
	}
	for _, r := range s {
		switch {
		case r == '{' || r == '}' || r == ':':
			return fmt.Errorf("%w: %s %q contains %q (not allowed: '{', '}', ':')", ErrInvalidArgument, what, s, r)
		case unicode.IsControl(r):
			return fmt.Errorf("%w: %s %q contains a control character", ErrInvalidArgument, what, s)
		}
	}
	return nil
}
