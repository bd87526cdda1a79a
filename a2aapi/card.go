package a2aapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/turnledger/turnledger/internal/faceauth"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// ResumeExtension is the URI of turnledger's extension of A2A that the
// cards declare: every SSE frame of SendStreamingMessage and
// SubscribeToTask carries id: <ledger_seq>, and a request with
// Last-Event-ID continues after it (stream.go).
const ResumeExtension = "https://turnledger.dev/a2a/ext/resumable-streams/v1"

// Version is the version of the Agent Cards.
const Version = "1"

// bearerScheme names the security scheme of the cards.
const bearerScheme a2a.SecuritySchemeName = "bearer"

// serveCard answers an agent's Agent Card. It is read under the read
// policy of the directory: any authenticated agent of the project.
func (h *Handler) serveCard(w http.ResponseWriter, r *http.Request, id identity) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowedError", "method "+r.Method+" is not allowed")
		return
	}
	err := h.engine.ViewFolded(r.Context(), id.project, func(p *kernel.Project) error {
		return kernel.AuthorizeRead(p, id.caller, h.cfg.Now(), kernel.ReadDirectory, "")
	})
	if err == nil {
		err = h.wait(r.Context(), h.engine.Folded(id.project))
	}
	var a projection.AgentView
	if err == nil {
		a, err = h.store.Agent(id.project, id.agent, h.cfg.Now())
	}
	if err != nil {
		kind, msg := faceauth.ErrorBody(h.cfg.Logger, err)
		writeError(w, kind.Status(), kind, msg)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(cardOf(a, id.base))
}

// cardOf is the Agent Card of an agent: its id as name, its description
// (with what keeps it from taking work, if anything), a skill per
// capability (the turn_kind a message names in its "skill" metadata), the
// JSON-RPC binding at the base URL and the HTTP+JSON binding under it,
// streaming with the resume extension, and the bearer scheme.
func cardOf(a projection.AgentView, base string) *a2a.AgentCard {
	desc := a.Description
	var off []string
	switch {
	case !a.Enabled:
		off = append(off, "disabled")
	case !a.AcceptsWork:
		off = append(off, "does not accept work")
	case a.Drained:
		off = append(off, "drained")
	}
	if len(off) > 0 {
		desc = strings.TrimSpace(desc + " [not accepting tasks: " + strings.Join(off, ", ") + "; SendMessage is refused]")
	}
	skills := []a2a.AgentSkill{}
	for _, c := range a.Capabilities {
		skills = append(skills, a2a.AgentSkill{ID: c, Name: c, Description: "Turns of kind " + c + " (name it in the message metadata as \"skill\")", Tags: []string{"turn_kind"}})
	}
	if len(skills) == 0 {
		skills = append(skills, a2a.AgentSkill{ID: DefaultTurnKind, Name: DefaultTurnKind, Description: "a Turn of kind " + DefaultTurnKind, Tags: []string{"turn_kind"}})
	}
	return &a2a.AgentCard{
		Name:        a.AgentID,
		Description: desc,
		Version:     Version,
		SupportedInterfaces: []*a2a.AgentInterface{
			a2a.NewAgentInterface(base, a2a.TransportProtocolJSONRPC),
			a2a.NewAgentInterface(base, a2a.TransportProtocolHTTPJSON),
		},
		Capabilities: a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{{
			URI:         ResumeExtension,
			Description: "SSE frames carry id: <ledger_seq>; send Last-Event-ID to resume a stream after it, with no gap and no duplicate, on any instance",
		}}},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             skills,
		SecuritySchemes: a2a.NamedSecuritySchemes{bearerScheme: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "a turnledger agent credential token of the calling agent, of this agent's project"}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{bearerScheme: a2a.SecuritySchemeScopes{}}},
	}
}
