package httpapi

import (
	"context"
	"crypto/subtle"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/kernel"
)

// Headers of an agent-authenticated request.
const (
	HeaderProject = "X-Svc-Project-Id"
	HeaderAgent   = "X-Svc-Agent-Id"
)

type callerKey struct{}

// withCaller stores the authenticated caller in the context.
func withCaller(ctx context.Context, c kernel.Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// callerFrom returns the caller the authentication put in the context; a
// missing one is an error, never a default.
func callerFrom(ctx context.Context) (kernel.Caller, error) {
	c, ok := ctx.Value(callerKey{}).(kernel.Caller)
	if !ok {
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "no authenticated caller")
	}
	return c, nil
}

// isAdmin reports whether the request carries the admin bearer.
func (s *Server) isAdmin(r *http.Request) bool {
	token, ok := faceauth.Bearer(r)
	if !ok || s.cfg.AdminTokenHash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(kernel.HashSecret(token)), []byte(s.cfg.AdminTokenHash)) == 1
}

// authenticate turns the request's headers into a caller for project: the
// admin bearer (without agent headers), or the three agent headers, whose
// project must be the path's.
func (s *Server) authenticate(ctx context.Context, r *http.Request, project string) (kernel.Caller, error) {
	agent := r.Header.Get(HeaderAgent)
	if err := s.admit(r, project, agent, func() bool {
		// Whoever else fails at this address, a valid credential is served:
		// one the engine knows passes on to the full check.
		token, ok := faceauth.Bearer(r)
		return ok && agent != "" && s.engine.KnownCredential(project, agent, token)
	}); err != nil {
		return kernel.Caller{}, err
	}
	c, err := s.verify(ctx, r, project)
	if err != nil && kernel.ErrorKind(err) == kernel.Unauthorized {
		s.authFailed(r, project, agent)
	}
	return c, err
}

// verify is authenticate without the throttle.
func (s *Server) verify(ctx context.Context, r *http.Request, project string) (kernel.Caller, error) {
	for _, h := range []string{"Authorization", HeaderProject, HeaderAgent} {
		if len(r.Header.Values(h)) > 1 {
			return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "the %s header is given more than once", h)
		}
	}
	agent := r.Header.Get(HeaderAgent)
	hp := r.Header.Get(HeaderProject)
	token, ok := faceauth.Bearer(r)
	if agent == "" && hp == "" {
		if ok && s.isAdmin(r) {
			return kernel.Caller{Admin: true}, nil
		}
		if ok {
			return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "invalid bearer token; an agent also sends %s and %s", HeaderProject, HeaderAgent)
		}
		if msg := bearerProblem(r); msg != "" {
			return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "%s", msg)
		}
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "missing credentials: send %s, %s and Authorization: Bearer <token>", HeaderProject, HeaderAgent)
	}
	switch {
	case !ok && bearerProblem(r) != "":
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "%s", bearerProblem(r))
	case !ok:
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "missing Authorization: Bearer <token>")
	case hp == "" || agent == "":
		return kernel.Caller{}, kernel.Errorf(kernel.Unauthorized, "an agent sends both %s and %s", HeaderProject, HeaderAgent)
	case hp != project:
		return kernel.Caller{}, kernel.Errorf(kernel.Forbidden, "%s %q does not match project %s of the path", HeaderProject, hp, project)
	}
	return s.engine.Authenticate(ctx, project, agent, token)
}

// bearerProblem says what is wrong with an Authorization header that is
// there but is no bearer token; "" when there is none. It names the scheme
// only when it looks like one, so that a token sent without a scheme is
// never echoed.
func bearerProblem(r *http.Request) string {
	if len(r.Header.Values("Authorization")) > 1 {
		return "the Authorization header is given more than once"
	}
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" {
		return ""
	}
	scheme, rest, _ := strings.Cut(h, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		return "the Authorization header has no token after Bearer"
	case strings.TrimSpace(rest) != "" && authScheme.MatchString(scheme):
		return fmt.Sprintf("the Authorization scheme %s is not accepted: send Authorization: Bearer <token>", scheme)
	}
	return "the Authorization header is not of the form Bearer <token>"
}

var authScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,19}$`)
