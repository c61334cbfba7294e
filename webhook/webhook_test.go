package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The example of the Standard Webhooks specification and its reference
// libraries: an independent vector, not computed by this package.
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

// refSign computes a v1 signature with crypto/hmac directly, as a receiver
// in another language would.
func refSign(t *testing.T, secret, id string, ts int64, body []byte) string {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + string(body)))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func fixedNow(sec int64) func() time.Time {
	return func() time.Time { return time.Unix(sec, 0) }
}

func mustSigner(t *testing.T, secrets ...string) *Signer {
	t.Helper()
	s, err := NewSigner(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustVerifier(t *testing.T, now int64, secrets ...string) *Verifier {
	t.Helper()
	v, err := NewVerifier(secrets...)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = fixedNow(now)
	return v
}

func TestSpecVector(t *testing.T) {
	if got := refSign(t, specSecret, specID, specTimestamp, []byte(specBody)); got != specSignature {
		t.Fatalf("reference HMAC disagrees with the spec vector: %s", got)
	}
	s := mustSigner(t, specSecret)
	h := s.Sign(specID, time.Unix(specTimestamp, 0), []byte(specBody))
	if got := h.Get(HeaderSignature); got != specSignature {
		t.Errorf("signature = %q, want %q", got, specSignature)
	}
	if got := h.Get(HeaderID); got != specID {
		t.Errorf("id = %q", got)
	}
	if got := h.Get(HeaderTimestamp); got != strconv.Itoa(specTimestamp) {
		t.Errorf("timestamp = %q", got)
	}
	v := mustVerifier(t, specTimestamp+10, specSecret)
	if err := v.Verify(h, []byte(specBody)); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestSignMatchesReference(t *testing.T) {
	secret, err := GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		body := make([]byte, r.IntN(2000))
		for j := range body {
			body[j] = byte(r.UintN(256))
		}
		id := "task-" + strconv.Itoa(i)
		ts := int64(1_700_000_000 + r.IntN(1_000_000))
		got := mustSigner(t, secret).Signature(id, time.Unix(ts, 0), body)
		if want := refSign(t, secret, id, ts, body); got != want {
			t.Fatalf("case %d: signature %q, reference %q", i, got, want)
		}
	}
}

func TestRotation(t *testing.T) {
	oldS, _ := GenerateSecret()
	newS, _ := GenerateSecret()
	other, _ := GenerateSecret()
	const now = 1_700_000_000
	body := []byte("payload")

	both := mustSigner(t, oldS, newS).Sign("id1", time.Unix(now, 0), body)
	sig := both.Get(HeaderSignature)
	parts := strings.Split(sig, " ")
	if len(parts) != 2 {
		t.Fatalf("two keys gave %d signatures: %q", len(parts), sig)
	}
	if parts[0] != refSign(t, oldS, "id1", now, body) || parts[1] != refSign(t, newS, "id1", now, body) {
		t.Fatalf("signatures do not match the reference: %q", sig)
	}
	for name, secret := range map[string]string{"old": oldS, "new": newS} {
		if err := mustVerifier(t, now, secret).Verify(both, body); err != nil {
			t.Errorf("receiver with the %s key: %v", name, err)
		}
	}
	if err := mustVerifier(t, now, other).Verify(both, body); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("receiver with another key: %v, want ErrInvalidSignature", err)
	}
	// After the rotation the sender signs with the new key only; a receiver
	// still holding only the old key rejects it.
	onlyNew := mustSigner(t, newS).Sign("id1", time.Unix(now, 0), body)
	if err := mustVerifier(t, now, oldS).Verify(onlyNew, body); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("old key after rotation: %v, want ErrInvalidSignature", err)
	}
	// A receiver in the middle of its own rotation holds both keys.
	if err := mustVerifier(t, now, oldS, newS).Verify(onlyNew, body); err != nil {
		t.Errorf("receiver with both keys: %v", err)
	}
}

func TestVerifyErrors(t *testing.T) {
	secret, _ := GenerateSecret()
	const now = 1_700_000_000
	body := []byte(`{"a":1}`)
	good := func() http.Header { return mustSigner(t, secret).Sign("msg_1", time.Unix(now, 0), body) }

	tests := []struct {
		name   string
		header func() http.Header
		body   []byte
		now    int64
		tol    time.Duration
		want   error
	}{
		{"ok", good, body, now, 0, nil},
		{"ok at the edge of the past", good, body, now + 300, 0, nil},
		{"ok at the edge of the future", good, body, now - 300, 0, nil},
		{"too old", good, body, now + 301, 0, ErrTimestampTooOld},
		{"too new", good, body, now - 301, 0, ErrTimestampTooNew},
		{"custom tolerance", good, body, now + 61, time.Minute, ErrTimestampTooOld},
		{"tolerance off", good, body, now + 1e6, -1, nil},
		{"body changed", good, []byte(`{"a":2}`), now, 0, ErrInvalidSignature},
		{"body empty", good, nil, now, 0, ErrInvalidSignature},
		{"id changed", func() http.Header { h := good(); h.Set(HeaderID, "msg_2"); return h }, body, now, 0, ErrInvalidSignature},
		{"timestamp changed", func() http.Header { h := good(); h.Set(HeaderTimestamp, strconv.Itoa(now+1)); return h }, body, now, 0, ErrInvalidSignature},
		{"no id", func() http.Header { h := good(); h.Del(HeaderID); return h }, body, now, 0, ErrMissingHeaders},
		{"no timestamp", func() http.Header { h := good(); h.Del(HeaderTimestamp); return h }, body, now, 0, ErrMissingHeaders},
		{"no signature", func() http.Header { h := good(); h.Del(HeaderSignature); return h }, body, now, 0, ErrMissingHeaders},
		{"no headers", func() http.Header { return http.Header{} }, body, now, 0, ErrMissingHeaders},
		{"timestamp in ms", func() http.Header { h := good(); h.Set(HeaderTimestamp, strconv.Itoa(now*1000)); return h }, body, now, 0, ErrTimestampTooNew},
		{"timestamp not a number", func() http.Header { h := good(); h.Set(HeaderTimestamp, "12e9"); return h }, body, now, 0, ErrInvalidTimestamp},
		{"timestamp negative", func() http.Header { h := good(); h.Set(HeaderTimestamp, "-5"); return h }, body, now, 0, ErrInvalidTimestamp},
		{"timestamp overflows", func() http.Header { h := good(); h.Set(HeaderTimestamp, "99999999999999999999999"); return h }, body, now, 0, ErrInvalidTimestamp},
		{"only another version", func() http.Header {
			h := good()
			h.Set(HeaderSignature, strings.Replace(h.Get(HeaderSignature), "v1,", "v1a,", 1))
			return h
		}, body, now, 0, ErrInvalidSignature},
		{"good one among junk", func() http.Header {
			h := good()
			h.Set(HeaderSignature, "v1,AAAA v2,xyz garbage v1,!!! "+h.Get(HeaderSignature))
			return h
		}, body, now, 0, nil},
		{"signature not base64", func() http.Header { h := good(); h.Set(HeaderSignature, "v1,***"); return h }, body, now, 0, ErrInvalidSignature},
		{"truncated signature", func() http.Header {
			h := good()
			s := h.Get(HeaderSignature)
			h.Set(HeaderSignature, s[:len(s)-8])
			return h
		}, body, now, 0, ErrInvalidSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := mustVerifier(t, tt.now, secret)
			v.Tolerance = tt.tol
			err := v.Verify(tt.header(), tt.body)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("Verify: %v, want %v", err, tt.want)
			}
		})
	}
}

// TestMutations flips random bytes of the body, ID and timestamp of a signed
// message: no mutation may verify.
func TestMutations(t *testing.T) {
	secret, _ := GenerateSecret()
	const now = 1_700_000_000
	s := mustSigner(t, secret)
	v := mustVerifier(t, now, secret)
	v.Tolerance = -1 // mutated timestamps must fail on the signature, not the clock
	r := rand.New(rand.NewPCG(3, 4))
	body := []byte(`{"order":42,"items":["a","b"],"note":"hello"}`)
	id := "01J9Z3K6Q8R2M4N5P7S9T1V3W5"
	ts := strconv.Itoa(now)
	for i := range 10_000 {
		b, mid, mts := append([]byte(nil), body...), []byte(id), []byte(ts)
		var target []byte
		switch i % 3 {
		case 0:
			target = b
		case 1:
			target = mid
		default:
			target = mts
		}
		pos := r.IntN(len(target))
		old := target[pos]
		for target[pos] == old {
			if i%3 == 2 {
				target[pos] = byte('0' + r.IntN(10)) // keep the timestamp numeric
			} else {
				target[pos] = byte(r.UintN(256))
			}
		}
		h := s.Sign(id, time.Unix(now, 0), body)
		h.Set(HeaderID, string(mid))
		h.Set(HeaderTimestamp, string(mts))
		if err := v.Verify(h, b); err == nil {
			t.Fatalf("mutation %d verified: id=%q ts=%q body=%q", i, mid, mts, b)
		}
	}
}

func TestSecrets(t *testing.T) {
	s, err := GenerateSecret()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, SecretPrefix) {
		t.Fatalf("secret %q lacks the prefix", s)
	}
	key, err := ParseSecret(s)
	if err != nil || len(key) != GeneratedBytes {
		t.Fatalf("ParseSecret(generated) = %d bytes, %v", len(key), err)
	}
	s2, _ := GenerateSecret()
	if s == s2 {
		t.Fatal("two generated secrets are equal")
	}
	if _, err := ParseSecret(strings.TrimPrefix(specSecret, SecretPrefix)); err != nil {
		t.Errorf("secret without prefix: %v", err)
	}
	for _, bad := range []string{"", "whsec_", "whsec_not base64!", "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 16)), "whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 65))} {
		if _, err := ParseSecret(bad); !errors.Is(err, ErrInvalidSecret) {
			t.Errorf("ParseSecret(%q) = %v, want ErrInvalidSecret", bad, err)
		} else if len(bad) > 10 && strings.Contains(err.Error(), bad[6:]) {
			t.Errorf("error leaks the secret: %v", err)
		}
	}
	if _, err := NewSigner(); !errors.Is(err, ErrNoSecret) {
		t.Errorf("NewSigner() = %v, want ErrNoSecret", err)
	}
	if _, err := NewVerifier("nope"); !errors.Is(err, ErrInvalidSecret) {
		t.Errorf("NewVerifier(bad) = %v, want ErrInvalidSecret", err)
	}
	if err := Verify("nope", http.Header{}, nil); !errors.Is(err, ErrInvalidSecret) {
		t.Errorf("Verify(bad secret) = %v, want ErrInvalidSecret", err)
	}
}

func TestSignRequest(t *testing.T) {
	s := mustSigner(t, specSecret)
	req, err := http.NewRequest(http.MethodPost, "http://example.com/hook", strings.NewReader(specBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(HeaderSignature, "v1,stale")
	s.SignRequest(req, specID, time.Unix(specTimestamp, 0), []byte(specBody))
	if got := req.Header.Values(HeaderSignature); len(got) != 1 || got[0] != specSignature {
		t.Errorf("signature header = %q", got)
	}
	// Receivers see the names in any case.
	raw := http.Header{"webhook-id": {specID}, "webhook-timestamp": {strconv.Itoa(specTimestamp)}, "webhook-signature": {specSignature}}
	canon := http.Header{}
	for k, v := range raw {
		canon[http.CanonicalHeaderKey(k)] = v
	}
	if err := mustVerifier(t, specTimestamp, specSecret).Verify(canon, []byte(specBody)); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestVerifyBoundsWork(t *testing.T) {
	secret, _ := GenerateSecret()
	h := mustSigner(t, secret).Sign("x", time.Unix(1_700_000_000, 0), nil)
	good := h.Get(HeaderSignature)
	// A valid signature hidden after many bogus ones is not searched for.
	h.Set(HeaderSignature, strings.Repeat("v1,AAAA ", 1000)+good)
	if err := mustVerifier(t, 1_700_000_000, secret).Verify(h, nil); !errors.Is(err, ErrInvalidSignature) {
		t.Errorf("Verify = %v, want ErrInvalidSignature", err)
	}
}

func BenchmarkSign(b *testing.B) {
	s, _ := NewSigner(specSecret)
	body := make([]byte, 1024)
	now := time.Now()
	for b.Loop() {
		_ = s.Signature("01J9Z3K6Q8R2M4N5P7S9T1V3W5", now, body)
	}
}
