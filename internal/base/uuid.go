package base

import "encoding/hex"

// FormatUUID writes the 16 bytes of a UUID in their usual text form
// (8-4-4-4-12 lower-case hex digits). The caller sets the version and
// variant bits.
func FormatUUID(b [16]byte) string {
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
