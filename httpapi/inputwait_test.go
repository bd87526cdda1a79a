package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/turnledger/turnledger/httpapi"
	"github.com/turnledger/turnledger/internal/natstest"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// suspended is the answer of a suspend for input.
type suspended struct {
	projection.TurnView
	InputToken string `json:"input_token"`
	InputURL   string `json:"input_url"`
}

func (e *env) suspendForInput(w as, c *claimed, wait map[string]any) suspended {
	e.t.Helper()
	var s suspended
	e.must(w, "POST", schedP+"/turns/"+c.Claim.TurnID+":suspend", map[string]any{"claim": c.Claim, "awaiting_input": wait}, 200).decode(e.t, &s)
	return s
}

func TestInputRoundTripByToken(t *testing.T) {
	e, req, w := schedEnv(t)
	v := e.scheduled(req, "refund", nil)
	c := e.claim(w)
	schema := map[string]any{"type": "object", "properties": map[string]any{"approve": map[string]any{"type": "boolean"}}}
	wait := map[string]any{"prompt": "Approve the refund of 20 EUR?", "schema": schema, "input_by": nil}
	s := e.suspendForInput(w.withKey("suspend-1"), c, wait)
	if !strings.HasPrefix(s.InputToken, "tli_") || s.InputURL != e.url+schedP+"/turns/"+v.TurnID+":provide-input" {
		t.Fatalf("suspend for input = token %q url %q, want a tli_ token and the absolute :provide-input URL", s.InputToken, s.InputURL)
	}
	if s.State != kernel.StateSuspended || s.AwaitingInput == nil || s.AwaitingInput.Prompt != wait["prompt"] {
		t.Fatalf("suspended Turn = %s %+v, want suspended awaiting the prompt", s.State, s.AwaitingInput)
	}
	// A suspend retried with its key answers the same token.
	if again := e.suspendForInput(w.withKey("suspend-1"), c, wait); again.InputToken != s.InputToken {
		t.Errorf("retried suspend's token = %q, want the first one", again.InputToken)
	}
	// It waits for people.
	var pg struct{ Items []projection.TurnView }
	e.must(asAdmin, "GET", schedP+"/projection/turns?awaiting_input=true", nil, 200).decode(t, &pg)
	if len(pg.Items) != 1 || pg.Items[0].TurnID != v.TurnID {
		t.Errorf("projection/turns?awaiting_input=true = %d items, want %s", len(pg.Items), v.TurnID)
	}
	// The token is nowhere in what readers see.
	for _, path := range []string{"/turns/" + v.TurnID, "/turns/" + v.TurnID + "/feed", "/projection/feed"} {
		if r := e.must(asAdmin, "GET", schedP+path, nil, 200); strings.Contains(string(r.body), s.InputToken) || strings.Contains(string(r.body), kernel.HashSecret(s.InputToken)) {
			t.Errorf("GET %s shows the input token or its hash", path)
		}
	}

	tokenOnly := as{token: s.InputToken}
	e.must(as{token: "tli_not-the-token"}, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"approve": true}}, 401)
	e.must(tokenOnly, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": "yes"}, 422)
	var after projection.TurnView
	e.must(tokenOnly.withKey("answer-1"), "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"approve": true}}, 200).decode(t, &after)
	if after.State != kernel.StateQueued || after.AwaitingInput != nil {
		t.Fatalf("after the input = %s %+v, want queued and no longer awaiting", after.State, after.AwaitingInput)
	}
	// Retried with its key, the same answer; used again, a 409.
	e.must(tokenOnly.withKey("answer-1"), "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"approve": true}}, 200)
	e.must(tokenOnly, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"approve": false}}, 409)

	// The next claim sees the input in the Turn's context.
	c = e.claim(w)
	if c == nil || c.Claim.TurnID != v.TurnID {
		t.Fatalf("claim after the input = %+v, want %s", c, v.TurnID)
	}
	var ctx struct{ Items []projection.ContextItem }
	e.must(w, "GET", schedP+"/turns/"+v.TurnID+"/context", nil, 200).decode(t, &ctx)
	if len(ctx.Items) != 1 || ctx.Items[0].Role != kernel.RoleInput || string(ctx.Items[0].Payload) != `{"approve":true}` {
		t.Errorf("context after the input = %+v, want one record with role input", ctx.Items)
	}
	feed := e.feedTypes(req, v.TurnID)
	want := []string{kernel.EvTurnDispatched, kernel.EvTurnClaimed, kernel.EvTurnSuspended, kernel.EvTurnInputProvided, kernel.EvTurnClaimed}
	if diff := cmp.Diff(want, feed); diff != "" {
		t.Errorf("the Turn's feed (-want +got):\n%s", diff)
	}
}

func TestInputByTheRequesterAndTimeOut(t *testing.T) {
	e, req, w := schedEnv(t)
	other := e.register("p1", "other", 1)
	v := e.scheduled(req, "q", nil)
	c := e.claim(w)
	e.suspendForInput(w, c, map[string]any{"prompt": "Which one?", "schema": nil, "input_by": nil})
	e.must(other, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"pick": 2}}, 403)
	e.must(w, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"pick": 2}}, 403)
	e.must(req, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"pick": 2}}, 200)
	e.must(req, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{"pick": 3}}, 409)

	// An input_by that passes without input times the Turn out.
	c = e.claim(w)
	r := e.must(w, "POST", schedP+"/turns/"+v.TurnID+":suspend", map[string]any{"claim": c.Claim, "awaiting_input": map[string]any{"prompt": "Still?", "input_by": at(e, -time.Second)}}, 422)
	if !strings.Contains(errorMessage(r), "input_by") {
		t.Errorf("suspend with an input_by in the past = %s, want a 422 naming input_by", r.body)
	}
	s := e.suspendForInput(w, c, map[string]any{"prompt": "Still?", "input_by": at(e, time.Minute)})
	e.clock.Advance(time.Minute)
	e.reap()
	got := e.turnView(asAdmin, v.TurnID)
	if got.Outcome == nil || *got.Outcome != kernel.OutcomeTimedOut || got.AwaitingInput != nil {
		t.Fatalf("a Turn past its input_by = %v %+v, want timed_out", got.Outcome, got.AwaitingInput)
	}
	e.must(as{token: s.InputToken}, "POST", schedP+"/turns/"+v.TurnID+":provide-input", map[string]any{"input": map[string]any{}}, 409)
}

func TestInputURLUnderThePublicURL(t *testing.T) {
	srv := natstest.Start(t)
	e := newEnvOn(t, srv.ClientURL(), &clock{now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}, func(c *httpapi.Config) {
		c.PublicURL = "https://agents.example.org/tl/"
	})
	req := e.register("p1", "req", 1, kernel.GrantDispatch)
	w := e.register("p1", "worker", 1)
	v := e.scheduled(req, "x", nil)
	s := e.suspendForInput(w, e.claim(w), map[string]any{"prompt": "ok?"})
	if want := "https://agents.example.org/tl" + schedP + "/turns/" + v.TurnID + ":provide-input"; s.InputURL != want {
		t.Errorf("input_url = %q, want %q", s.InputURL, want)
	}
	for _, bad := range []string{"agents.example.org", "ftp://x", "https://x/?q=1"} {
		cfg := httpapi.DefaultConfig()
		cfg.AdminTokenHash, cfg.PublicURL = "h", bad
		if cfg.Validate() == nil {
			t.Errorf("Validate with public URL %q = nil, want an error", bad)
		}
	}
}
