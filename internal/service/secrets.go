package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/htqueue/htq/internal/base"
	"github.com/htqueue/htq/internal/broker"
	"github.com/htqueue/htq/webhook"
)

// SigningSecretKey is the MetaStore key of the generated webhook signing
// secret. (The API token's records are package apitoken's.)
const SigningSecretKey = "service/signing-secret"

// storedSecret returns the value under key, generating and storing one
// with gen when there is none. created is true only for the process whose
// write won: when two processes start at once on one storage, both end up
// with the one that was stored first.
func storedSecret(ctx context.Context, ms broker.MetaStore, key string, gen func() (string, error)) (value string, created bool, err error) {
	data, err := ms.GetMeta(ctx, key)
	switch {
	case err == nil:
		if v := strings.TrimSpace(string(data)); v != "" {
			return v, false, nil
		}
		return "", false, fmt.Errorf("stored %s is empty; delete it to have a new one generated", key)
	case !errors.Is(err, base.ErrNotFound):
		return "", false, fmt.Errorf("read %s: %w", key, err)
	}
	v, err := gen()
	if err != nil {
		return "", false, err
	}
	ok, err := ms.PutMetaIfAbsent(ctx, key, []byte(v))
	if err != nil {
		return "", false, fmt.Errorf("store %s: %w", key, err)
	}
	if ok {
		return v, true, nil
	}
	// Another process stored one between our read and our write.
	data, err = ms.GetMeta(ctx, key)
	if err != nil {
		return "", false, fmt.Errorf("read %s: %w", key, err)
	}
	return strings.TrimSpace(string(data)), false, nil
}

// newSigner returns a webhook signer for the configured secrets.
func newSigner(secrets []string) (*webhook.Signer, error) {
	s, err := webhook.NewSigner(secrets...)
	if err != nil {
		return nil, fmt.Errorf("signing secrets: %w", err)
	}
	return s, nil
}
