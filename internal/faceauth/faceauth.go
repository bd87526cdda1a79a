// Package faceauth is what the faces of an instance share to authenticate a
// bearer and to refuse a request as the HTTP API does (httpapi/auth.go,
// httpapi/errors.go): the bearer token of a request, the throttle of failed
// authentications per address and per claimed agent (internal/throttle; one
// Guard for the HTTP API and the MCP and A2A endpoints mounted beside it),
// the {error, message} of an error, and the wait for the projections.
package faceauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/turnledger/turnledger/internal/jsonhttp"
	"github.com/turnledger/turnledger/internal/throttle"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Bearer returns the token of the request's one Authorization: Bearer
// header.
func Bearer(r *http.Request) (string, bool) {
	if len(r.Header.Values("Authorization")) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// Throttled is a throttled authentication, with how long to wait and whose
// failures throttle it ("from this address", "for this agent").
type Throttled struct {
	Wait time.Duration
	Why  string
}

func (e *Throttled) Error() string {
	return "too many failed authentications " + e.Why + "; retry after the time in Retry-After"
}

// Guard throttles failed authentications by remote address and by claimed
// agent. One Guard serves every face of an instance (the HTTP API, MCP,
// A2A), so that an address has one budget of failures whichever face it
// tries a token on. Safe for concurrent use.
type Guard struct{ fails *throttle.Buckets }

// NewGuard returns a Guard of the rate (a zero Rate turns it off).
func NewGuard(rate throttle.Rate, now func() time.Time) *Guard {
	return &Guard{fails: throttle.New(rate, now)}
}

// GuardOf is shared, the Guard a face is given to share with the instance's
// other faces, or when there is none a Guard of its own of the rate.
func GuardOf(shared *Guard, rate throttle.Rate, now func() time.Time) *Guard {
	if shared != nil {
		return shared
	}
	return NewGuard(rate, now)
}

func addrKey(r *http.Request) string        { return "addr\x00" + throttle.RemoteHost(r) }
func agentKey(project, agent string) string { return "agent\x00" + project + "\x00" + agent }

// Admit returns a *Throttled when the request's address failed too often
// lately, or when it failed at all and the agent it names (if any) failed
// too often, unless known reports that the token sent is a credential the
// engine knows (nil: it never does): a valid credential is served whoever
// else fails at its address (a laptop, a NAT, a proxy). An agent's failures
// so throttle only addresses that failed themselves.
func (g *Guard) Admit(r *http.Request, project, agent string, known func() bool) error {
	aw, addrFailed := g.fails.Wait(addrKey(r))
	var t *Throttled
	switch {
	case aw > 0:
		t = &Throttled{aw, "from this address"}
	case agent != "" && addrFailed:
		if gw, _ := g.fails.Wait(agentKey(project, agent)); gw > 0 {
			t = &Throttled{gw, "for this agent"}
		}
	}
	if t == nil || known != nil && known() {
		return nil
	}
	return t
}

// Fail counts a failed authentication of the request, at the agent it
// names (if any).
func (g *Guard) Fail(r *http.Request, project, agent string) {
	g.fails.Fail(addrKey(r))
	if agent != "" {
		g.fails.Fail(agentKey(project, agent))
	}
}

// CheckHeaders refuses the HTTP API's identity headers when one is sent
// twice, or X-Svc-Project-Id names another project than the path's.
func CheckHeaders(r *http.Request, project string) error {
	for _, hd := range []string{"Authorization", HeaderProject, HeaderAgent} {
		if len(r.Header.Values(hd)) > 1 {
			return kernel.Errorf(kernel.Unauthorized, "the %s header is given more than once", hd)
		}
	}
	if hp := r.Header.Get(HeaderProject); hp != "" && hp != project {
		return kernel.Errorf(kernel.Forbidden, "%s %q does not match project %s of the path", HeaderProject, hp, project)
	}
	return nil
}

// The HTTP API's identity headers, optional on the faces.
const (
	HeaderProject = "X-Svc-Project-Id"
	HeaderAgent   = "X-Svc-Agent-Id"
)

// WriteRefusal answers a refused authentication: 429 with Retry-After when
// throttled, else the status of the error's kind with the HTTP API's body;
// challenge, when set, is the WWW-Authenticate of a 401.
func WriteRefusal(w http.ResponseWriter, log *slog.Logger, err error, challenge string) {
	var te *Throttled
	if errors.As(err, &te) {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(te.Wait.Seconds()))))
		jsonhttp.WriteError(w, http.StatusTooManyRequests, "TooManyRequestsError", te.Error())
		return
	}
	kind, msg := ErrorBody(log, err)
	if kind == kernel.Unauthorized && challenge != "" {
		w.Header().Set("WWW-Authenticate", challenge)
	}
	jsonhttp.WriteError(w, kind.Status(), string(kind), msg)
}

// Unavailable is a wait for the projections that timed out.
type Unavailable struct{ Msg string }

func (e *Unavailable) Error() string { return e.Msg }

// NotYet is the error of a change on the ledger at seq that the
// projections have not reached in time.
func NotYet(seq uint64) error {
	return &Unavailable{fmt.Sprintf("the change is on the ledger at ledger_seq %d but the projections have not reached it yet; read it again shortly", seq)}
}

// Wait blocks until the projections committed seq, at most timeout.
func Wait(ctx context.Context, store *projection.Store, seq uint64, timeout time.Duration) error {
	return waitUntil(ctx, store.WaitFor, seq, timeout)
}

// WaitNear is Wait for the answer of a command that shows nothing of the
// projections: they need only come within projection.AnswerLag of seq
// (Store.WaitNear), since every read waits for the commit of what the
// engine has folded.
func WaitNear(ctx context.Context, store *projection.Store, seq uint64, timeout time.Duration) error {
	return waitUntil(ctx, store.WaitNear, seq, timeout)
}

// waitUntil runs wait for seq for at most timeout; NotYet when it fails.
func waitUntil(ctx context.Context, wait func(context.Context, uint64) error, seq uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := wait(ctx, seq); err != nil {
		return NotYet(seq)
	}
	return nil
}

// Answer is the Turn a command changed at seq, for the command's answer
// (projection.Store.Answer): the engine's Turn as the command left it (t,
// engine.AsOf) where it has one, else the projections' once they have
// folded seq (at most timeout), without waiting for the commit of its
// batch.
func Answer(ctx context.Context, store *projection.Store, project, turnID string, seq uint64, t *kernel.Turn, timeout time.Duration) (projection.TurnView, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	v, err := store.Answer(ctx, project, turnID, seq, t)
	if err != nil && ctx.Err() != nil || errors.Is(err, projection.ErrClosed) {
		return v, NotYet(seq)
	}
	return v, err
}

// ErrorBody is the {error, message} of err, as the HTTP API writes it;
// anything that is not a refusal is logged in full and shown as a generic
// internal error.
func ErrorBody(log *slog.Logger, err error) (kernel.Kind, string) {
	var ua *Unavailable
	var de *jsonhttp.DecodeError
	var ke *kernel.Error
	switch {
	case errors.As(err, &ua):
		return kernel.Unavailable, ua.Msg
	case errors.As(err, &de):
		return kernel.Validation, de.Msg
	case errors.Is(err, projection.ErrDamaged):
		log.Error("projection damaged", "err", err)
		return kernel.Unavailable, "the projections are damaged and are not served until they are rebuilt from the ledger"
	case errors.Is(err, projection.ErrNotFound):
		return kernel.NotFound, "not found"
	case errors.As(err, &ke) && ke.Kind != kernel.Internal:
		return ke.Kind, ke.Message
	}
	log.Error("internal error", "err", err)
	return kernel.Internal, "internal error; see the server log"
}

// BaseURL is the scheme and host a client reaches the server at: publicURL
// (an operator's --public-url) when set, else as the request came in.
func BaseURL(r *http.Request, publicURL string) string {
	if publicURL != "" {
		return strings.TrimSuffix(publicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
