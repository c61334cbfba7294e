// Package apitoken keeps the API tokens htq serve accepts when none is
// configured (--token, HTQ_TOKEN): the current token, generated on the
// first start and stored with the data, and the earlier tokens a rotation
// keeps valid until their grace period ends.
//
// Both live in the storage's meta records, so every htq serve process on
// one storage accepts the same set: a Checker reloads it every few seconds,
// and at once when a token it does not know arrives. Beside an embedded
// store, whose data directory htq serve holds locked, the current token is
// mirrored in a file of the directory (FileName) so that the command line
// on that machine can still find it.
package apitoken

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
)

// Meta record keys and the token file.
const (
	// CurrentKey holds the current token in plain text.
	CurrentKey = "service/token"
	// GraceKey holds the earlier tokens still accepted: a JSON array of
	// Grace.
	GraceKey = "service/token-grace"
	// FileName is the file in an embedded store's data directory that
	// mirrors the current token (mode 0600).
	FileName = "token"
	// Prefix starts every generated token, so a leaked one is easy to
	// recognise (and to search for in logs and repositories).
	Prefix = "htq_"
	// MaxGrace bounds the grace period of a rotation.
	MaxGrace = 30 * 24 * time.Hour
)

// Grace is an earlier token, accepted until Until.
type Grace struct {
	Token string    `json:"token"`
	Until time.Time `json:"until"`
}

// Set is the tokens a service accepts: Current, and each of Grace until
// its end.
type Set struct {
	Current string
	Grace   []Grace
}

// Accepts reports whether tok is the current token or an earlier one
// whose grace has not ended at now. Each comparison takes constant time.
func (s *Set) Accepts(tok string, now time.Time) bool {
	ok := equal(tok, s.Current)
	for _, g := range s.Grace {
		if now.Before(g.Until) && equal(tok, g.Token) {
			ok = true
		}
	}
	return ok
}

func equal(a, b string) bool {
	return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// Generate returns a new random token: Prefix and 32 random bytes in
// unpadded base64url.
func Generate() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("apitoken: generate: %w", err)
	}
	return Prefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// Load reads the set stored in ms; earlier tokens whose grace ended at now
// are left out. No stored current token is an error wrapping
// base.ErrNotFound.
func Load(ctx context.Context, ms broker.MetaStore, now time.Time) (*Set, error) {
	data, err := ms.GetMeta(ctx, CurrentKey)
	if errors.Is(err, base.ErrNotFound) {
		return nil, fmt.Errorf("apitoken: no API token is stored (htq serve generates one on its first start): %w", base.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("apitoken: read %s: %w", CurrentKey, err)
	}
	s := &Set{Current: strings.TrimSpace(string(data))}
	if s.Current == "" {
		return nil, fmt.Errorf("apitoken: the stored %s is empty; delete it to have htq serve generate a new token", CurrentKey)
	}
	if s.Grace, err = loadGrace(ctx, ms, now); err != nil {
		return nil, err
	}
	return s, nil
}

func loadGrace(ctx context.Context, ms broker.MetaStore, now time.Time) ([]Grace, error) {
	data, err := ms.GetMeta(ctx, GraceKey)
	if errors.Is(err, base.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("apitoken: read %s: %w", GraceKey, err)
	}
	var all []Grace
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("apitoken: %s: corrupt record: %w", GraceKey, err)
	}
	live := all[:0]
	for _, g := range all {
		if now.Before(g.Until) && g.Token != "" {
			live = append(live, g)
		}
	}
	return live, nil
}

// Rotate replaces the stored current token with a new one; the old one
// stays accepted until now+grace (not at all when grace is 0). The earlier
// tokens are written first, so that at every moment the old token is
// accepted by one record or the other. It returns the new set.
//
// Two rotations at the same moment both succeed and the later write wins:
// the token the other printed is then not accepted (rotate again).
func Rotate(ctx context.Context, ms broker.MetaStore, grace time.Duration, now time.Time) (*Set, error) {
	if grace < 0 || grace > MaxGrace {
		return nil, fmt.Errorf("%w: grace %v: want 0 to %v", base.ErrInvalidArgument, grace, MaxGrace)
	}
	old, err := Load(ctx, ms, now)
	if err != nil {
		return nil, err
	}
	tok, err := Generate()
	if err != nil {
		return nil, err
	}
	next := &Set{Current: tok, Grace: old.Grace}
	if grace > 0 {
		next.Grace = append(next.Grace, Grace{Token: old.Current, Until: now.Add(grace).UTC()})
	}
	data, err := json.Marshal(next.Grace)
	if err != nil {
		return nil, fmt.Errorf("apitoken: encode %s: %w", GraceKey, err)
	}
	if err := ms.PutMeta(ctx, GraceKey, data); err != nil {
		return nil, fmt.Errorf("apitoken: write %s: %w", GraceKey, err)
	}
	if err := ms.PutMeta(ctx, CurrentKey, []byte(tok)); err != nil {
		return nil, fmt.Errorf("apitoken: write %s: %w", CurrentKey, err)
	}
	return next, nil
}

// WriteFile writes tok to dir/FileName (mode 0600), replacing the file in
// one rename so a reader never sees half a token.
func WriteFile(dir, tok string) error {
	f, err := os.CreateTemp(dir, FileName+".*.tmp")
	if err != nil {
		return fmt.Errorf("apitoken: write token file: %w", err)
	}
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, FileName))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("apitoken: write token file: %w", err)
	}
	return nil
}

// ReadFile returns the token in dir/FileName. A missing file is an error
// wrapping os.ErrNotExist.
func ReadFile(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		return "", fmt.Errorf("apitoken: read token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("apitoken: token file %s is empty", filepath.Join(dir, FileName))
	}
	return tok, nil
}

// RemoveFile removes dir/FileName; a missing file is not an error.
func RemoveFile(dir string) error {
	if err := os.Remove(filepath.Join(dir, FileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("apitoken: remove token file: %w", err)
	}
	return nil
}
