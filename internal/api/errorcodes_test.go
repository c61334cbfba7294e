package api

import (
	"errors"
	"testing"

	"github.com/htqueue/htq/internal/apiclient"
	"github.com/htqueue/htq/internal/base"
)

// Every code of errorTable comes back from the API client as an error
// that errors.Is matches with the row's sentinel, so errors.Is works
// across the network (STYLE.md #10). The API layer's own errors, and
// unavailable (which several causes share), come back as the client's
// equivalents.
func TestErrorCodesMapBack(t *testing.T) {
	own := map[error]error{errUnauthorized: apiclient.ErrUnauthorized, errNoRoute: base.ErrNotFound, errMethodNotAllowed: base.ErrInvalidArgument}
	for _, row := range errorTable {
		back := apiclient.ErrorFor(row.code)
		want := row.err
		if w, ok := own[row.err]; ok {
			want = w
		}
		if row.code == codeUnavailable {
			want = apiclient.ErrUnavailable
		}
		if back == nil || !errors.Is(back, want) {
			t.Errorf("code %s (for %v): the client maps it to %v", row.code, row.err, back)
		}
	}
	for _, code := range []string{codeInternal, codeUnavailable} {
		if apiclient.ErrorFor(code) == nil {
			t.Errorf("code %s: unknown to the client", code)
		}
	}
}
