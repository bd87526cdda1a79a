// Package a2aapi is the A2A (Agent2Agent protocol, v1.0) face of the
// engine, on the official Go SDK (github.com/a2aproject/a2a-go/v2): every
// registered agent is an A2A agent whose tasks are Turns. Protocol in,
// engine commands and projection reads out, with the read policy and grants
// of the HTTP API; no rule of the domain lives here.
//
// # Endpoints
//
// An agent's base URL is
//
//	/a2a/projects/{project_id}/agents/{agent_id}
//
// with its Agent Card at <base>/.well-known/agent-card.json, the JSON-RPC
// binding at <base> (POST) and the HTTP+JSON binding under it
// (<base>/message:send, <base>/message:stream, <base>/tasks,
// <base>/tasks/{id}, <base>/tasks/{id}:cancel, <base>/tasks/{id}:subscribe).
// Every request, the card's included, is authenticated by the calling
// agent's own credential, Authorization: Bearer <token>, alone: the token
// names an agent of the path's project (X-Svc-Project-Id and
// X-Svc-Agent-Id are optional and must match when sent). A refusal of the
// credential is a 401 (403 for a header that does not match, 429 when
// throttled as the HTTP API throttles, in its buckets when serve mounts it:
// Config.AuthGuard) with the HTTP API's {error, message}
// body, before any A2A binding reads the request.
//
// # Tasks
//
// A task is a Turn targeted at the endpoint's agent; its id is the turn_id.
// SendMessage without taskId dispatches a root Turn, the caller its
// requester (the turns:dispatch grant is needed, as over HTTP): the
// message's parts, metadata, messageId and referenceTaskIds are its input
// ({"messageId", "parts", "metadata", "referenceTaskIds"}), the messageId
// its dispatch_key (a retried send is the same task), the "skill" of the
// message's (or the request's) metadata its turn_kind (DefaultTurnKind
// without one), the contextId its context_id (without one, an id derived
// from the caller and the messageId). SendMessage with the taskId of a task
// that waits for input provides the input (the message, in the same shape);
// the same answer sent again (its messageId) answers the task as it stands.
// A blocking SendMessage answers once the task finished or waits for input,
// or after Config.SendWait as it stands; with returnImmediately at once.
//
// The state follows the Turn (stateOf). The history is the Turn's input (a
// user message) and its semantic records: records with role "input" are
// user messages, records with role "artifact" artifacts, any other record
// an agent message; the final payload is the last artifact, id "final". A
// record payload with "parts" shows those parts; any other payload is one
// data part.
//
// GetTask (historyLength), ListTasks (contextId, status, pageSize,
// pageToken, historyLength, statusTimestampAfter, includeArtifacts; the
// Turns of the endpoint's agent the caller may read), CancelTask (a stop
// request of the Turn and its descendants; CANCELED once the Turn is
// stopped; TaskNotCancelable when finished) are served through the SDK's
// bindings. Push notification configuration is not served
// (PushNotificationNotSupported), nor is the extended card.
//
// # Streams
//
// SendStreamingMessage and SubscribeToTask are served here, not by the
// SDK, so that every SSE frame carries id: <ledger_seq> and a request with
// Last-Event-ID resumes after it (stream.go, ResumeExtension).
package a2aapi
