// Package mcpapi is the MCP face of the engine: the Model Context Protocol
// (Streamable HTTP, on the official Go SDK) in, engine commands and
// projection reads out, with the read policy and grants of the HTTP API. It
// holds no rule of the domain: every decision is the kernel's.
//
// # Endpoint
//
// One endpoint per agent identity:
//
//	/mcp/projects/{project_id}/agents/{agent_id}
//
// authenticated by that agent's credential, Authorization: Bearer <token>
// (the X-Svc-Project-Id and X-Svc-Agent-Id headers are optional and must
// match the path when sent). A request without a valid token is answered
// 401 with WWW-Authenticate: Bearer resource_metadata="<url>", the RFC 9728
// protected resource metadata at
//
//	/.well-known/oauth-protected-resource/mcp/projects/{project_id}/agents/{agent_id}
//
// which names no authorization server: tokens are turnledger agent
// credentials, issued by the admin surface or a join invite. A request whose
// Origin is neither the server's own nor one of Config.AllowedOrigins is
// answered 403 (DNS rebinding); a request without Origin is not affected.
// The server's own origin is Config.PublicURL's, or the Host's when it is an
// IP address or localhost (never a DNS name the request merely names).
// Failed authentications are throttled per address and per agent as in the
// HTTP API, in the same buckets when serve mounts it (Config.AuthGuard); a
// credential the engine knows is never refused by the throttle.
//
// Mounted behind httpapi (httpapi.Mount with ProjectOf), a request counts
// against the instance's and its project's in-flight bounds; one that waits
// gives its slots back (internal/inflight), as the HTTP API's long polls do:
// claim_turn with wait_s once its first attempt found nothing, a GET stream
// and a subscriptions/listen stream as they start. StopWaiting ends them at
// shutdown.
//
// Both protocol eras are served at the same URL by the SDK: 2025-11-25
// (initialize, Mcp-Session-Id) and 2026-07-28 (stateless, server/discover,
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers,
// subscriptions/listen).
//
// # Tools
//
// The tools are the HTTP routes an agent uses, in the order of a Turn's
// life (tools/list answers them in that order): dispatch_turn, claim_turn,
// append_record, renew_claim, suspend_turn, provide_input, finish_turn,
// stop_turn, retry_turn, get_turn, get_turn_context, list_turns, read_feed,
// list_agents. A tool's structuredContent is the JSON answer of its HTTP
// route, with one exception: claim_turn answers {"claim": null, "turn":
// null} where the route answers null (structured content is an object). A
// refusal is a tool result with isError set and the route's error body,
// {error, message}, as its structured content.
//
// # Resources
//
// turnledger://turns/{turn_id} (the Turn snapshot) and
// turnledger://turns/{turn_id}/context (its semantic context) are resource
// templates; a subscription to either sends notifications/resources/updated
// each time the Turn changes. Their turn_id completes (completion/complete)
// to the ids of the Turns the agent may read that begin with what was
// typed, newest first (projection.Store.TurnIDs); there are no prompts, so a
// prompt reference is refused as invalid params.
//
// # Tasks
//
// The io.modelcontextprotocol/tasks extension: a tools/call of dispatch_turn
// from a client that declares the extension (in the request's _meta, or in
// the capabilities of its 2025-11-25 session) answers a task whose taskId
// is the Turn id, once the dispatch is on the ledger and projected. The task
// is the Turn, so it survives restarts and is seen by every instance:
// tasks/get reads it (see taskOf for the mapping of states), tasks/update
// with an accepted input response provides the input the Turn waits for,
// tasks/cancel requests a stop. ttlMs is null (a Turn is never discarded)
// and pollIntervalMs is Config.TaskPollInterval.
package mcpapi
