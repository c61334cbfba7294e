package base

import (
	"net/url"
	"strings"
)

// RedactURL returns a storage URL fit for logs and error messages: the
// password of its user information, and the value of every query
// parameter whose name contains "password" (sentinel_password), read
// "xxxxx"; the user name, hosts, database and other parameters stay.
//
// It reads the URL as the Redis backend's parser does — the user
// information ends at the last '@' before the query, and the password at
// its first ':' — so a password holding '@', ':' or '/' is hidden whole,
// and it works on URLs url.Parse refuses. When what is left after the user
// information still holds an '@' (a '?' in a password, or an '@' in a
// query value), everything between "://" and the last '@' is hidden: a
// URL that cannot be read for sure shows less, never part of a password.
// A URL without "://" (file:PATH, mem:) is returned as it is.
func RedactURL(raw string) string {
	scheme, rest, userinfo, at, ok := splitURL(raw)
	switch {
	case !ok:
		return raw
	case at < 0:
		return scheme + "://" + rest
	case strings.Contains(userinfo, "?"):
		return scheme + "://xxxxx" + rest[at:]
	}
	if user, _, hasPass := strings.Cut(userinfo, ":"); hasPass {
		return scheme + "://" + user + ":xxxxx" + rest[at:]
	}
	return scheme + "://" + rest
}

// AmbiguousURL reports whether raw cannot be read for sure: an '@' is left
// after the '?' once the password parameters are hidden (a '?' in a
// password, or an '@' in a query value). RedactURL then hides everything
// up to that '@', and a parser should quote no part of raw in its errors.
func AmbiguousURL(raw string) bool {
	_, _, userinfo, at, ok := splitURL(raw)
	return ok && at >= 0 && strings.Contains(userinfo, "?")
}

// splitURL cuts raw at "://" and at the last '@' of what follows, once
// the values of the password parameters are hidden: rest is that part
// (query redacted), userinfo what precedes the '@' at index at (-1 when
// none). ok is false when raw has no "://".
func splitURL(raw string) (scheme, rest, userinfo string, at int, ok bool) {
	scheme, rest, ok = strings.Cut(raw, "://")
	if !ok {
		return "", "", "", -1, false
	}
	if before, query, ok := strings.Cut(rest, "?"); ok {
		rest = before + "?" + redactQuery(query)
	}
	at = strings.LastIndexByte(rest, '@')
	if at >= 0 {
		userinfo = rest[:at]
	}
	return scheme, rest, userinfo, at, true
}

// redactQuery hides the value of every parameter of query whose name
// contains "password".
func redactQuery(query string) string {
	params := strings.Split(query, "&")
	for i, p := range params {
		rawKey, _, hasValue := strings.Cut(p, "=")
		key, err := url.QueryUnescape(rawKey)
		if err != nil {
			key = rawKey
		}
		if hasValue && strings.Contains(strings.ToLower(key), "password") {
			params[i] = rawKey + "=xxxxx"
		}
	}
	return strings.Join(params, "&")
}
