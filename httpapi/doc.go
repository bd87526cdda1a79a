// Package httpapi is the HTTP face of turnledger: the routes of spec 000
// (the coordination API) and the admin surface, JSON in and out, the auth
// headers turned into a kernel.Caller, and the one table that maps kernel
// error kinds to statuses. It holds no rule of the domain: every decision is
// the kernel's, every read the projection's.
//
// # The path of a request
//
//  1. Route. verbRouter (router.go) splits a custom verb such as :dispatch
//     off the last path segment, so /turns:dispatch and /turns/{turn_id}
//     can both be routed. routes.go holds the route table: each route once,
//     with who may call it (its wrapper), its handler and its OpenAPI
//     operation (openapi.go builds the document from the same table).
//  2. Authenticate. The wrapper decides who asks: project (the agent's
//     three headers, checked by Engine.Authenticate against the write model
//     caught up with the ledger, or the admin bearer), admin (the bearer
//     only) or public (nobody, for join redemption). The caller travels in
//     the call and in the context.
//  3. Decide and append, for a command. The handler decodes the body
//     strictly (unknown fields and oversized bodies are 422/413), builds a
//     kernel command and hands it to the Engine, which decides on the
//     project's state, appends the one event to the ledger and answers its
//     ledger_seq. Refusals come back as *kernel.Error.
//  4. Answer. The engine returns once the event is durable. A Turn
//     command answers the Turn as its event left it in the engine's write
//     model (engine.AsOf, shown by projection.ViewOf as the projections will
//     show it), and a record its turn_seq, without waiting for the
//     projector, unless the projector is more than projection.AnswerLag
//     events behind (Server.turnAt, waitNear: projection.Store.Answer,
//     WaitNear); a command the engine answers again from memory waits for
//     the fold of its event and answers the projections' Turn. Other
//     commands wait for the commit of their event (Server.wait, bounded by
//     Config.WaitTimeout, 503 after it). A read (GET) first waits for the
//     commit of the project's last ledger_seq the engine knows (caughtUp),
//     so it sees every earlier write, its own included, through any
//     instance.
//  5. Read. The answer is read from the projection store, after the read
//     policy's check (kernel.AuthorizeRead, kernel.CanReadTurn; Turn lists
//     are narrowed to the caller's readable Turns by the same policy).
//
// Every error, router 404s and 405s and recovered panics included, is
// written by one writer (errors.go) in the JSON shape {error, message};
// internal errors are logged in full and shown as a generic message.
package httpapi
