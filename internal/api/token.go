package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/htqueue/htq/internal/apitoken"
	"github.com/htqueue/htq/internal/model"
)

type rotateRequest struct {
	// Grace is how long the token being replaced stays accepted (0:
	// not at all).
	Grace model.Duration `json:"grace"`
}

type rotateResponse struct {
	Token string `json:"token"`
	// PreviousValidUntil is when the replaced token stops being accepted;
	// absent when it stopped at once.
	PreviousValidUntil *time.Time `json:"previous_valid_until,omitempty"`
}

// rotateToken: POST /v1/token/rotate replaces the stored API token. Only
// the current token may rotate (not one kept for a grace period), and only
// a service that keeps its token with the data (not one given --token).
func (h *handler) rotateToken(w http.ResponseWriter, r *http.Request) {
	var req rotateRequest
	if err := h.decodeJSON(w, r, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if h.opts.Tokens == nil {
		h.writeError(w, r, invalid("this htq serve was given its token by --token or HTQ_TOKEN; change it there and restart"))
		return
	}
	if got, _ := bearer(r); !h.opts.Tokens.IsCurrent(r.Context(), got) {
		h.writeError(w, r, fmt.Errorf("%w: only the current token can rotate; this one is accepted until its grace period ends", errUnauthorized))
		return
	}
	grace := time.Duration(req.Grace)
	if grace < 0 || grace > apitoken.MaxGrace {
		h.writeError(w, r, invalid(fmt.Sprintf("grace %v: want 0 to %v", grace, apitoken.MaxGrace)))
		return
	}
	set, err := h.opts.Tokens.Rotate(r.Context(), grace)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp := rotateResponse{Token: set.Current}
	if n := len(set.Grace); n > 0 && grace > 0 {
		until := set.Grace[n-1].Until
		resp.PreviousValidUntil = &until
	}
	writeJSON(w, http.StatusOK, resp)
}
