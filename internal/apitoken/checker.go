package apitoken

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/htqueue/htq/internal/broker"
)

// Defaults of CheckerOptions.
const (
	// DefaultMaxAge is how old the set may get before a check reloads it.
	DefaultMaxAge = 2 * time.Second
	// DefaultMinAge is how old the set must be before an unknown token
	// reloads it (bounding the loads a stream of wrong tokens causes).
	DefaultMinAge = 100 * time.Millisecond
)

// CheckerOptions configures a Checker. Zero fields take their defaults.
type CheckerOptions struct {
	// MaxAge: a check reloads a set older than this (default
	// DefaultMaxAge), so a rotation through another process is seen within
	// that time even by holders of the old token.
	MaxAge time.Duration
	// MinAge: an unknown token reloads a set once it is this old (default
	// DefaultMinAge), bounding the loads a stream of wrong tokens causes.
	MinAge time.Duration
	// OnChange is called with the new current token whenever a load finds
	// it changed, one call at a time (htq serve mirrors it in the token
	// file).
	OnChange func(current string)
	// Logger receives failed reloads (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Checker answers whether a token is accepted, from a Set it keeps and
// reloads from the storage. It is safe for concurrent use.
type Checker struct {
	ms   broker.MetaStore
	opts CheckerOptions
	snap atomic.Pointer[snapshot]
	mu   sync.Mutex // one reload at a time
}

// snapshot is a loaded set and when it was loaded (or last tried).
type snapshot struct {
	set *Set
	at  time.Time
}

// NewChecker loads the set stored in ms. No stored token is an error
// wrapping base.ErrNotFound.
func NewChecker(ctx context.Context, ms broker.MetaStore, opts CheckerOptions) (*Checker, error) {
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.MinAge <= 0 {
		opts.MinAge = DefaultMinAge
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Checker{ms: ms, opts: opts}
	now := opts.Now()
	set, err := Load(ctx, ms, now)
	if err != nil {
		return nil, err
	}
	c.snap.Store(&snapshot{set: set, at: now})
	return c, nil
}

// Current returns the current token as last loaded.
func (c *Checker) Current() string { return c.snap.Load().set.Current }

// Accepts reports whether tok is accepted. It reloads the set first when
// it is older than MaxAge. A token it does not accept may be new, from a
// rotation through another process: the set is then reloaded unless a load
// began after the call did, once it is MinAge old (the call waits for
// that), so that a new token is accepted at its first use and unknown
// tokens cost at most one load per MinAge. A failed reload keeps the set
// it had (and is logged).
func (c *Checker) Accepts(ctx context.Context, tok string) bool {
	arrived := c.opts.Now()
	s := c.snap.Load()
	if arrived.Sub(s.at) > c.opts.MaxAge {
		s = c.reload(ctx, arrived.Add(-c.opts.MaxAge))
	}
	if s.set.Accepts(tok, arrived) {
		return true
	}
	if wait := c.opts.MinAge - arrived.Sub(s.at); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
	}
	s = c.reload(ctx, arrived)
	return s.set.Accepts(tok, c.opts.Now())
}

// IsCurrent reports whether tok is the current token, after the same
// reloads as Accepts.
func (c *Checker) IsCurrent(ctx context.Context, tok string) bool {
	if !c.Accepts(ctx, tok) {
		return false
	}
	return equal(tok, c.snap.Load().set.Current)
}

// Rotate rotates the stored token (see Rotate) and loads the new set.
func (c *Checker) Rotate(ctx context.Context, grace time.Duration) (*Set, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	set, err := Rotate(ctx, c.ms, grace, now)
	if err != nil {
		return nil, err
	}
	c.swap(set, now)
	return set, nil
}

// reload loads the set unless the one held was loaded after since.
func (c *Checker) reload(ctx context.Context, since time.Time) *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.snap.Load()
	if s.at.After(since) {
		return s // loaded by the call we waited for
	}
	now := c.opts.Now()
	set, err := Load(ctx, c.ms, now)
	if err != nil {
		c.opts.Logger.Warn("reload of the API tokens failed; keeping the ones loaded before", "err", err)
		s = &snapshot{set: s.set, at: now}
		c.snap.Store(s)
		return s
	}
	return c.swap(set, now)
}

// swap stores a new set, calling OnChange when its current token differs.
// The caller holds mu.
func (c *Checker) swap(set *Set, now time.Time) *snapshot {
	old := c.snap.Load()
	s := &snapshot{set: set, at: now}
	c.snap.Store(s)
	if old.set.Current != set.Current && c.opts.OnChange != nil {
		c.opts.OnChange(set.Current)
	}
	return s
}
