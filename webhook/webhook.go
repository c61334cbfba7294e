// Package webhook signs and verifies HTTP requests in the Standard Webhooks
// format (https://www.standardwebhooks.com), the format htq uses for every
// request it sends to a URL task's target.
//
// A signed request carries three headers:
//
//	webhook-id:        the message ID (htq: the task ID, the same on every retry)
//	webhook-timestamp: the Unix time of the attempt, in seconds
//	webhook-signature: one or more "v1,<base64 HMAC-SHA256>" separated by spaces
//
// The HMAC is computed with the secret's key over "<id>.<timestamp>.<body>",
// the body being the exact bytes of the request body. Secrets are written
// "whsec_<base64 key>". During a key rotation the sender signs with both the
// old and the new key, so a receiver holding either one accepts the request.
//
// A sender uses a [Signer]; a receiver uses a [Verifier] (or [Verify]), which
// also rejects requests whose timestamp is more than five minutes away from
// its clock, so a captured request cannot be replayed later.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a signed request. http.Header canonicalises them
// ("Webhook-Id"); HTTP header names are case-insensitive.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// SecretPrefix starts the text form of a secret: "whsec_" followed by the
// standard base64 encoding of the key.
const SecretPrefix = "whsec_"

// DefaultTolerance is how far a request's timestamp may be from the
// receiver's clock, in either direction, before Verify rejects it.
const DefaultTolerance = 5 * time.Minute

// Key sizes accepted by ParseSecret, and the size GenerateSecret uses. The
// Standard Webhooks specification asks for keys of 24 to 64 bytes.
const (
	MinKeySize     = 24
	MaxKeySize     = 64
	GeneratedBytes = 32
)

// maxSignatures bounds how many entries of a webhook-signature header Verify
// looks at, so a hostile header cannot make it do unbounded work.
const maxSignatures = 16

// Errors returned by this package. The errors returned are wrapped with
// context; test them with errors.Is.
var (
	// ErrInvalidSecret means a secret is not "whsec_" followed by the base64
	// of a 24 to 64 byte key.
	ErrInvalidSecret = errors.New("webhook: invalid secret")
	// ErrNoSecret means a Signer or Verifier was made without any secret.
	ErrNoSecret = errors.New("webhook: no secret")
	// ErrMissingHeaders means the request lacks webhook-id,
	// webhook-timestamp or webhook-signature, or one of them is empty.
	ErrMissingHeaders = errors.New("webhook: missing headers")
	// ErrInvalidTimestamp means webhook-timestamp is not a Unix time in
	// decimal seconds.
	ErrInvalidTimestamp = errors.New("webhook: invalid timestamp")
	// ErrTimestampTooOld means the request was signed longer ago than the
	// tolerance allows (a late or replayed request).
	ErrTimestampTooOld = errors.New("webhook: timestamp too old")
	// ErrTimestampTooNew means the request's timestamp is further in the
	// future than the tolerance allows (a clock far off, or a forgery).
	ErrTimestampTooNew = errors.New("webhook: timestamp too new")
	// ErrInvalidSignature means no v1 signature of the request matches any
	// of the receiver's keys: the body, the ID or the timestamp were changed,
	// or the request was signed with another secret.
	ErrInvalidSignature = errors.New("webhook: invalid signature")
)

// GenerateSecret returns a new random secret in its text form,
// "whsec_" followed by the base64 of 32 random bytes.
func GenerateSecret() (string, error) {
	key := make([]byte, GeneratedBytes)
	if _, err := rand.Read(key); err != nil {
		return "", fmt.Errorf("webhook: generate secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// ParseSecret decodes a secret's text form into its key. The "whsec_"
// prefix may be left out; the rest must be standard base64 (with padding)
// of a key of MinKeySize to MaxKeySize bytes.
func ParseSecret(secret string) ([]byte, error) {
	enc := strings.TrimPrefix(strings.TrimSpace(secret), SecretPrefix)
	if enc == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalidSecret)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		// Never echo the secret, not even in part.
		return nil, fmt.Errorf("%w: not base64 after %q", ErrInvalidSecret, SecretPrefix)
	}
	if len(key) < MinKeySize || len(key) > MaxKeySize {
		return nil, fmt.Errorf("%w: key is %d bytes, want %d to %d", ErrInvalidSecret, len(key), MinKeySize, MaxKeySize)
	}
	return key, nil
}

func parseSecrets(secrets []string) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, ErrNoSecret
	}
	keys := make([][]byte, 0, len(secrets))
	for i, s := range secrets {
		k, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("secret %d: %w", i+1, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// mac returns HMAC-SHA256(key, id "." ts "." body).
func mac(key []byte, id, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(id))
	h.Write([]byte{'.'})
	h.Write([]byte(ts))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// A Signer signs outgoing requests. It holds one key, or two during a
// rotation (the request then carries one signature per key). A Signer is
// safe for concurrent use.
type Signer struct {
	keys [][]byte
}

// NewSigner returns a Signer for the given secrets ("whsec_…"). Give one
// secret normally and two during a rotation: the current one and the next.
func NewSigner(secrets ...string) (*Signer, error) {
	keys, err := parseSecrets(secrets)
	if err != nil {
		return nil, fmt.Errorf("webhook: new signer: %w", err)
	}
	return &Signer{keys: keys}, nil
}

// Signature returns the value of the webhook-signature header for a message
// with this ID, timestamp and body: one "v1,<base64>" entry per key,
// separated by spaces.
func (s *Signer) Signature(id string, ts time.Time, body []byte) string {
	return s.signature(id, strconv.FormatInt(ts.Unix(), 10), body)
}

func (s *Signer) signature(id, ts string, body []byte) string {
	var b strings.Builder
	for i, k := range s.keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac(k, id, ts, body)))
	}
	return b.String()
}

// Sign returns the three headers of a message with this ID, timestamp
// (sent as Unix seconds) and body.
func (s *Signer) Sign(id string, ts time.Time, body []byte) http.Header {
	h := make(http.Header, 3)
	s.SignHeader(h, id, ts, body)
	return h
}

// SignHeader sets the three headers of a message with this ID, timestamp
// and body on h, replacing any values they had.
func (s *Signer) SignHeader(h http.Header, id string, ts time.Time, body []byte) {
	sec := strconv.FormatInt(ts.Unix(), 10)
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, sec)
	h.Set(HeaderSignature, s.signature(id, sec, body))
}

// SignRequest sets the three headers on req. body must be the exact bytes
// req sends as its body (the Signer does not read req.Body).
func (s *Signer) SignRequest(req *http.Request, id string, ts time.Time, body []byte) {
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	s.SignHeader(req.Header, id, ts, body)
}

// A Verifier checks incoming signed requests against one or more keys (a
// receiver in the middle of a rotation may hold both). A Verifier is safe
// for concurrent use once its fields are set.
type Verifier struct {
	keys [][]byte

	// Tolerance is how far the request's timestamp may be from Now in
	// either direction. Zero means DefaultTolerance (five minutes); a
	// negative value turns the check off, which is only sensible when
	// checking stored requests long after the fact.
	Tolerance time.Duration

	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
}

// NewVerifier returns a Verifier that accepts requests signed with any of
// the given secrets, with the default tolerance and clock.
func NewVerifier(secrets ...string) (*Verifier, error) {
	keys, err := parseSecrets(secrets)
	if err != nil {
		return nil, fmt.Errorf("webhook: new verifier: %w", err)
	}
	return &Verifier{keys: keys}, nil
}

// Verify checks that header carries a valid signature of body made with one
// of v's keys, and a timestamp within the tolerance. It returns nil or an
// error matching ErrMissingHeaders, ErrInvalidTimestamp,
// ErrTimestampTooOld, ErrTimestampTooNew or ErrInvalidSignature. body must
// be the raw request body, byte for byte, not a re-encoding of it.
//
// The comparison of signatures takes constant time. Entries of the
// signature header with a version other than v1 are ignored.
func (v *Verifier) Verify(header http.Header, body []byte) error {
	id := header.Get(HeaderID)
	ts := header.Get(HeaderTimestamp)
	sigs := header.Get(HeaderSignature)
	var missing []string
	if id == "" {
		missing = append(missing, HeaderID)
	}
	if ts == "" {
		missing = append(missing, HeaderTimestamp)
	}
	if sigs == "" {
		missing = append(missing, HeaderSignature)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s", ErrMissingHeaders, strings.Join(missing, ", "))
	}

	if err := v.checkTimestamp(ts); err != nil {
		return err
	}

	expected := make([][]byte, len(v.keys))
	for i, k := range v.keys {
		expected[i] = mac(k, id, ts, body)
	}
	seen := 0
	for _, entry := range strings.Fields(sigs) {
		version, sig, ok := strings.Cut(entry, ",")
		if !ok || version != "v1" {
			continue
		}
		if seen++; seen > maxSignatures {
			break
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		for _, want := range expected {
			if hmac.Equal(got, want) {
				return nil
			}
		}
	}
	if seen == 0 {
		return fmt.Errorf("%w: no v1 signature", ErrInvalidSignature)
	}
	return ErrInvalidSignature
}

func (v *Verifier) checkTimestamp(ts string) error {
	for _, c := range []byte(ts) {
		if c < '0' || c > '9' {
			return fmt.Errorf("%w: %q", ErrInvalidTimestamp, ts)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrInvalidTimestamp, ts)
	}
	tol := v.Tolerance
	if tol == 0 {
		tol = DefaultTolerance
	}
	if tol < 0 {
		return nil
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	// Compare in seconds, so a timestamp far from now cannot overflow a
	// time.Duration.
	nowSec := now().Unix()
	tolSec := int64(tol / time.Second)
	switch {
	case sec < nowSec-tolSec:
		return fmt.Errorf("%w: %ds before now, tolerance %s", ErrTimestampTooOld, nowSec-sec, tol)
	case sec > nowSec+tolSec:
		return fmt.Errorf("%w: %ds after now, tolerance %s", ErrTimestampTooNew, sec-nowSec, tol)
	}
	return nil
}

// Verify checks a request with a single secret, the default tolerance of
// five minutes and the system clock. See Verifier.Verify.
func Verify(secret string, header http.Header, body []byte) error {
	v, err := NewVerifier(secret)
	if err != nil {
		return err
	}
	return v.Verify(header, body)
}
