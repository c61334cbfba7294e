package base

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Limits of MetaStore records (see broker.MetaStore).
const (
	MaxMetaKeyLen   = 512
	MaxMetaValueLen = 1 << 20
)

// ValidateMeta checks a MetaStore key (1 to MaxMetaKeyLen bytes of
// printable UTF-8) and value (at most MaxMetaValueLen bytes).
func ValidateMeta(key string, value []byte) error {
	if key == "" || len(key) > MaxMetaKeyLen || !utf8.ValidString(key) {
		return fmt.Errorf("%w: meta key of %d bytes (want 1 to %d bytes of UTF-8)", ErrInvalidArgument, len(key), MaxMetaKeyLen)
	}
	for _, r := range key {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: meta key %q has a character that is not printable", ErrInvalidArgument, key)
		}
	}
	if len(value) > MaxMetaValueLen {
		return fmt.Errorf("%w: meta value of %d bytes, the limit is %d", ErrInvalidArgument, len(value), MaxMetaValueLen)
	}
	return nil
}
