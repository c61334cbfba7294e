package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Names of the session cookie and of the header that carries the
// session's CSRF token.
const (
	CookieName = "htq_session"
	CSRFHeader = "X-CSRF-Token"
)

// A session is a signed cookie, "v1.<id>.<expiry>.<mac>": no server keeps
// it, so every htq serve process that shares the API token accepts it,
// and a restart keeps it. Its key is derived from the API token in force,
// so changing (or rotating) the token ends every session. Logging out
// deletes the cookie and remembers the session as revoked in this process
// until it expires.
type sessions struct {
	token func() string
	ttl   time.Duration
	clock clockwork.Clock

	mu       sync.Mutex
	keyToken string // the token key was derived from
	key      []byte
	revoked  map[string]time.Time // session id → expiry
}

// session is a valid session read from a request.
type session struct {
	id      string
	expires time.Time
}

func newSessions(token func() string, ttl time.Duration, clock clockwork.Clock) *sessions {
	return &sessions{token: token, ttl: ttl, clock: clock, revoked: make(map[string]time.Time)}
}

// sessionKey returns the key of the token in force, derived again when
// the token changed.
func (s *sessions) sessionKey() []byte {
	tok := s.token()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.key == nil || tok != s.keyToken {
		m := hmac.New(sha256.New, []byte(tok))
		m.Write([]byte("htq ui session key v1"))
		s.key, s.keyToken = m.Sum(nil), tok
	}
	return s.key
}

// mac returns the MAC of the parts under the session key, for one purpose.
func (s *sessions) mac(purpose string, parts ...string) []byte {
	m := hmac.New(sha256.New, s.sessionKey())
	m.Write([]byte(purpose))
	for _, p := range parts {
		m.Write([]byte{0})
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// create returns a new session and its cookie value.
func (s *sessions) create() (session, string, error) {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return session{}, "", fmt.Errorf("ui: new session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	exp := s.clock.Now().Add(s.ttl).Truncate(time.Second)
	expText := strconv.FormatInt(exp.Unix(), 10)
	sig := base64.RawURLEncoding.EncodeToString(s.mac("session", id, expText))
	return session{id: id, expires: exp}, "v1." + id + "." + expText + "." + sig, nil
}

// read returns the request's session, and false when it has none that is
// valid: no cookie, a bad signature, expired or revoked.
func (s *sessions) read(r *http.Request) (session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return session{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 4 || parts[0] != "v1" {
		return session{}, false
	}
	id, expText, sigText := parts[1], parts[2], parts[3]
	sig, err := base64.RawURLEncoding.DecodeString(sigText)
	if err != nil || !hmac.Equal(sig, s.mac("session", id, expText)) {
		return session{}, false
	}
	unix, err := strconv.ParseInt(expText, 10, 64)
	if err != nil {
		return session{}, false
	}
	exp := time.Unix(unix, 0)
	now := s.clock.Now()
	if !now.Before(exp) {
		return session{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, gone := s.revoked[id]; gone {
		return session{}, false
	}
	return session{id: id, expires: exp}, true
}

// csrf returns the session's CSRF token: the page sends it in the
// X-CSRF-Token header of every API call.
func (s *sessions) csrf(ss session) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("csrf", ss.id))
}

// checkCSRF reports whether got is the session's CSRF token.
func (s *sessions) checkCSRF(ss session, got string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf(ss))) == 1
}

// revoke ends a session in this process before its expiry, and forgets
// the sessions revoked earlier that have expired since.
func (s *sessions) revoke(ss session) {
	now := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, exp := range s.revoked {
		if !now.Before(exp) {
			delete(s.revoked, id)
		}
	}
	s.revoked[ss.id] = ss.expires
}

// setCookie sends the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no other site's page sends it), Secure behind TLS, and
// Path=/ because the API under /v1 accepts it too.
func setCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	c := &http.Cookie{Name: CookieName, Value: value, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: isTLS(r)}
	if value == "" {
		c.MaxAge = -1
	} else {
		c.Expires = expires
	}
	http.SetCookie(w, c)
}

// isTLS reports whether the browser reached us over HTTPS, directly or
// through a proxy that says so.
func isTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}
