package a2aapi

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/turnledger/turnledger/kernel"
	"github.com/turnledger/turnledger/projection"
)

// Metadata keys this package sets on tasks, messages and events.
const (
	metaSkill     = "skill"                  // a message's chosen skill: the Turn's turn_kind
	metaLedgerSeq = "turnledger/ledger_seq"  // the ledger_seq of the Turn event a stream frame shows
	metaEvent     = "turnledger/event"       // the type of that event
	metaTurn      = "turnledger/turn"        // a task's Turn: state, outcome, ledger_seq
	metaRole      = "turnledger/record_role" // the role of the semantic record a message or artifact shows
	metaTurnSeq   = "turnledger/turn_seq"
)

// Record roles with a meaning here: an "input" record (an answer to an
// input wait) is a user message of the history, an "artifact" record an
// artifact; any other record is an agent message of the history.
const (
	roleArtifact = "artifact"
	finalID      = "final" // the artifact id of a Turn's final payload
	// bookkeepingPrefix begins the roles of the records an A2A bridge
	// keeps for itself (the remote task's id, the inputs it forwarded):
	// neither messages nor artifacts.
	bookkeepingPrefix = "a2a."
)

// DefaultTurnKind is the turn_kind of a message that names no skill.
const DefaultTurnKind = "message"

// messageInput is a Turn's input made from an A2A message, and the shape a
// record payload takes to show as a message or an artifact.
type messageInput struct {
	MessageID      string           `json:"messageId,omitempty"`
	Parts          a2a.ContentParts `json:"parts"`
	Metadata       map[string]any   `json:"metadata,omitempty"`
	ReferenceTasks []a2a.TaskID     `json:"referenceTaskIds,omitempty"`
	// Of an artifact record:
	ArtifactID  a2a.ArtifactID `json:"artifactId,omitempty"`
	Name        string         `json:"name,omitempty"`
	Description string         `json:"description,omitempty"`
}

// inputOf is the Turn input of a message: its parts, metadata, id and
// references.
func inputOf(m *a2a.Message) (json.RawMessage, error) {
	b, err := json.Marshal(messageInput{MessageID: m.ID, Parts: m.Parts, Metadata: m.Metadata, ReferenceTasks: m.ReferenceTasks})
	if err != nil {
		return nil, a2a.NewError(a2a.ErrInvalidParams, "the message's parts cannot be encoded: "+err.Error())
	}
	return b, nil
}

// payloadOf reads a JSON payload as parts: its "parts" when it has them
// (the shape inputOf writes), else one data part holding the whole payload.
func payloadOf(raw json.RawMessage) messageInput {
	var in messageInput
	if json.Unmarshal(raw, &in) == nil && len(in.Parts) > 0 {
		return in
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		v = string(raw)
	}
	return messageInput{Parts: a2a.ContentParts{a2a.NewDataPart(v)}}
}

// contextIDOf is a task's contextId: the Turn's context_id, else (a Turn
// dispatched without one) its root Turn's id.
func contextIDOf(v projection.TurnView) string {
	if v.ContextID != nil {
		return *v.ContextID
	}
	return v.RootTurnID
}

// stateOf maps a Turn to the state of its task:
//
//	Turn                                   task
//	queued                                 TASK_STATE_SUBMITTED
//	claimed, suspended (to be resumed)     TASK_STATE_WORKING
//	suspended awaiting input               TASK_STATE_INPUT_REQUIRED
//	finished succeeded                     TASK_STATE_COMPLETED
//	finished stopped                       TASK_STATE_CANCELED
//	finished failed, dead, timed_out,      TASK_STATE_FAILED
//	expired
func stateOf(state, outcome string, awaitingInput bool) a2a.TaskState {
	switch {
	case state == kernel.StateQueued:
		return a2a.TaskStateSubmitted
	case state == kernel.StateSuspended && awaitingInput:
		return a2a.TaskStateInputRequired
	case state != kernel.StateFinished:
		return a2a.TaskStateWorking
	case outcome == "succeeded":
		return a2a.TaskStateCompleted
	case outcome == kernel.OutcomeStopped:
		return a2a.TaskStateCanceled
	}
	return a2a.TaskStateFailed
}

// turnStates is the Turn list filter and the outcomes of a task state
// (ListTasks' status filter).
func turnStates(s a2a.TaskState) (state string, outcomes []string, awaitingInput, ok bool) {
	switch s {
	case a2a.TaskStateSubmitted:
		return kernel.StateQueued, nil, false, true
	case a2a.TaskStateWorking:
		return "", nil, false, true // claimed, or suspended not awaiting input: checked per Turn
	case a2a.TaskStateInputRequired:
		return kernel.StateSuspended, nil, true, true
	case a2a.TaskStateCompleted:
		return kernel.StateFinished, []string{"succeeded"}, false, true
	case a2a.TaskStateCanceled:
		return kernel.StateFinished, []string{kernel.OutcomeStopped}, false, true
	case a2a.TaskStateFailed:
		return kernel.StateFinished, nil, false, true
	}
	return "", nil, false, false
}

func outcomeOf(v projection.TurnView) string {
	if v.Outcome == nil {
		return ""
	}
	return *v.Outcome
}

// statusOf is the status of a Turn's task: its state, when it last
// changed, and a message for a wait for input (the prompt, and the schema
// as a data part) or a failure (the outcome).
func statusOf(v projection.TurnView) a2a.TaskStatus {
	at := v.UpdatedAt
	st := a2a.TaskStatus{State: stateOf(v.State, outcomeOf(v), v.AwaitingInput != nil), Timestamp: &at}
	switch st.State {
	case a2a.TaskStateInputRequired:
		st.Message = promptMessage(v.TurnID, contextIDOf(v), v.LastTurnSeq, v.AwaitingInput.Prompt, v.AwaitingInput.Schema)
	case a2a.TaskStateFailed, a2a.TaskStateCanceled:
		st.Message = &a2a.Message{ID: fmt.Sprintf("%s-status-%d", v.TurnID, v.LedgerSeq), Role: a2a.MessageRoleAgent, TaskID: a2a.TaskID(v.TurnID),
			ContextID: contextIDOf(v), Parts: a2a.ContentParts{a2a.NewTextPart("the Turn finished " + outcomeOf(v))}}
	}
	return st
}

// promptMessage is the status message of a wait for input.
func promptMessage(turnID, contextID string, turnSeq uint64, prompt string, schema json.RawMessage) *a2a.Message {
	parts := a2a.ContentParts{a2a.NewTextPart(prompt)}
	if len(schema) > 0 && string(schema) != "null" {
		var s any
		if json.Unmarshal(schema, &s) == nil {
			p := a2a.NewDataPart(map[string]any{"schema": s})
			parts = append(parts, p)
		}
	}
	return &a2a.Message{ID: fmt.Sprintf("%s-prompt-%d", turnID, turnSeq), Role: a2a.MessageRoleAgent, TaskID: a2a.TaskID(turnID), ContextID: contextID, Parts: parts}
}

// inputMessage is the first message of a task's history: the Turn's input.
func inputMessage(v projection.TurnView) *a2a.Message {
	in := payloadOf(v.Input)
	id := in.MessageID
	if id == "" {
		id = v.TurnID + "-input"
	}
	return &a2a.Message{ID: id, Role: a2a.MessageRoleUser, TaskID: a2a.TaskID(v.TurnID), ContextID: contextIDOf(v),
		Parts: in.Parts, Metadata: in.Metadata, ReferenceTasks: in.ReferenceTasks}
}

// recordMessage is a semantic record as a message of the history.
func recordMessage(turnID, contextID string, it projection.ContextItem) *a2a.Message {
	in := payloadOf(it.Payload)
	role := a2a.MessageRoleAgent
	if it.Role == kernel.RoleInput {
		role = a2a.MessageRoleUser
	}
	id := in.MessageID
	if id == "" || role == a2a.MessageRoleAgent {
		id = fmt.Sprintf("%s-%d", turnID, it.TurnSeq)
	}
	meta := map[string]any{metaRole: it.Role, metaTurnSeq: it.TurnSeq}
	for k, v := range in.Metadata {
		meta[k] = v
	}
	return &a2a.Message{ID: id, Role: role, TaskID: a2a.TaskID(turnID), ContextID: contextID, Parts: in.Parts, Metadata: meta}
}

// recordArtifact is an artifact record, or the final payload, as an
// artifact.
func recordArtifact(turnID string, it projection.ContextItem, final bool) *a2a.Artifact {
	in := payloadOf(it.Payload)
	id := in.ArtifactID
	switch {
	case final:
		id = finalID
	case id == "":
		id = a2a.ArtifactID(fmt.Sprintf("%s-%d", turnID, it.TurnSeq))
	}
	return &a2a.Artifact{ID: id, Name: in.Name, Description: in.Description, Parts: in.Parts,
		Metadata: map[string]any{metaRole: it.Role, metaTurnSeq: it.TurnSeq}}
}

// taskOf is the task of a Turn. Its history is the Turn's input (a user
// message), then its semantic records in turn_seq order: "input" records
// as user messages, "artifact" records as artifacts, any other as agent
// messages; the final payload is the last artifact (id "final"). At most
// historyLength messages of the history are kept, the latest (nil: all).
func taskOf(v projection.TurnView, items []projection.ContextItem, historyLength *int, artifacts bool) *a2a.Task {
	ctxID := contextIDOf(v)
	t := &a2a.Task{ID: a2a.TaskID(v.TurnID), ContextID: ctxID, Status: statusOf(v),
		Metadata: map[string]any{metaTurn: map[string]any{"state": v.State, "outcome": v.Outcome, "ledger_seq": v.LedgerSeq, "turn_kind": v.TurnKind}}}
	history := []*a2a.Message{inputMessage(v)}
	for _, it := range items {
		final := v.State == kernel.StateFinished && len(v.FinalPayload) > 0 && !kernel.IsNull(v.FinalPayload) && it.LedgerSeq == v.LedgerSeq
		switch {
		case strings.HasPrefix(it.Role, bookkeepingPrefix):
			// the A2A bridge's own records (client/a2abridge)
		case final || it.Role == roleArtifact:
			if artifacts {
				t.Artifacts = append(t.Artifacts, recordArtifact(v.TurnID, it, final))
			}
		default:
			history = append(history, recordMessage(v.TurnID, ctxID, it))
		}
	}
	if historyLength != nil && *historyLength >= 0 && len(history) > *historyLength {
		history = history[len(history)-*historyLength:]
	}
	if len(history) > 0 {
		t.History = history
	}
	return t
}
