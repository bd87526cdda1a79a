// Package kernel holds the domain of turnledger: its types, commands, events
// and invariants. It imports only the standard library; a reader finds every
// rule of the domain here.
//
// # Decide and Evolve
//
// Decide(project, command, now) returns the events a command causes, or an
// *Error of one of the closed set of kinds (see Kind). Evolve(project,
// recorded event) folds an event into the project's write model; it never
// fails, so a replay always rebuilds the same state. Neither reads the clock,
// draws ids or does I/O: time, ids and secret hashes arrive in the command.
// Every command decides at most one event, so an append is one JetStream
// publish; a cascading stop, which stops every Turn of a tree by an event of
// its own, decides them together and they are appended as one atomic batch,
// all or none. The admin's bootstrap (Bootstrap: register if needed, then issue a
// credential) and a join (RedeemInvite: register the invited agent if new,
// then issue its credential) are single commands too: their event carries the
// registration, so neither can be split by a crash.
//
// Evolve is built from one state machine per aggregate: EvolveTurn,
// EvolveAgent and EvolveCredential. The projections fold the same functions,
// so what readers see is the state the engine decides on. Read policy is one
// set of functions (AuthorizeRead, CanReadTurn, TurnReaders) for single reads
// and list filters alike.
//
// The runtime around these functions (the write models in memory, their
// locks, loading, lost races with other instances, snapshots, the reaper)
// is package engine.
//
// # One file per aggregate
//
// turn.go, agent.go, credential.go and invite.go each hold their
// aggregate's events (type names, data and codec table), its commands (each
// a type with its Name and its decide method, so a command without either
// does not compile), and its Evolve. Adding a Turn transition touches
// turn.go (the command, the event, its codec entry and its case in
// EvolveTurn), this file's state table, turn_test.go (the event's golden
// sample and the rule's tests) and the event's golden file under
// testdata/events. command.go holds Decide and the checks every command
// shares; state.go the project's write model; policy.go the read policy and
// grants; idempotency.go the memory of idempotency keys.
//
// # Turn states
//
//	state      command / event                     next state   notes
//	—          dispatch       turn.dispatched       queued       target must exist, be enabled, accept work, not be drained
//	queued     claim          turn.claimed          claimed      the agent's first claimable Turn: best priority, earliest due, oldest; within capacity; not while drained
//	claimed    renew          turn.claim_renewed    claimed      extends expires_at by the claim TTL
//	claimed    semantic-record turn.record_appended claimed      turn_seq = last + 1
//	claimed    suspend        turn.suspended        suspended    releases the claim; refused (409) once a stop is requested
//	claimed    finish         turn.finished         finished     outcome succeeded|failed|stopped; a final_payload is the last record
//	claimed    finish+retry   turn.retry_scheduled  queued       outcome failed, attempts left: claimable again after the backoff
//	claimed    finish+retry   turn.finished         finished     outcome failed, no attempt left: outcome dead
//	claimed    stop           turn.stop_requested   claimed      sets stop_requested; the holder sees it on renew and records
//	claimed    claim expires  turn.claim_expired    queued       back to its old place in the queue
//	claimed    claim expires  turn.claim_expired    finished     when a stop was requested: outcome stopped
//	claimed    claim expires  turn.claim_expired    finished     on the last of max_attempts: outcome dead (dead: true)
//	queued     claim_by       turn.expired          finished     never claimed by claim_by: outcome expired
//	—          deadline       turn.timed_out        finished     not finished by deadline (queued, claimed, suspended): outcome timed_out; a claim dies
//	finished   retry          turn.dispatched       —            a new Turn, retry_of this one; outcome failed|dead|expired|timed_out|stopped, once
//	queued     stop           turn.stopped          finished     outcome stopped
//	any        stop+cascade   one event per Turn    —            the Turn and every descendant not finished, one request_id, all or none; no child under them after
//	suspended  stop           turn.stopped          finished     outcome stopped
//	suspended  resume         turn.resumed          queued       back to its old place in the queue; an input wait ends
//	claimed    suspend+input  turn.suspended        suspended    awaiting_input {prompt, schema, input_by}; an input token (hashed)
//	suspended  provide-input  turn.input_provided   queued       with the token (once) or as requester/management; the input is a record
//	suspended  input_by       turn.timed_out        finished     no input by input_by: outcome timed_out
//	finished   anything       —                     —            stop is 409 ConflictError, claim commands are 409 FencingError
//
// # Invariants
//
//   - A Turn in state claimed has exactly one live claim; no other Turn has one.
//   - A Turn is claimed only when due (its not_before passed), before its
//     claim_by (if never claimed) and before its deadline; a claim past the
//     deadline is dead (FencingError).
//   - An agent never holds more claims than its capacity. An expired claim
//     counts until it is reconciled (by claims:reconcile-expired or the reaper).
//   - turn_seq of a Turn's records grows by one, without gaps.
//   - A claim token is accepted only while it holds the Turn's current claim,
//     before its expiry, from the agent it was given to (else FencingError).
//   - dispatch_key is unique per requester (two requesters never collide on
//     one): the same requester, key and body find the same Turn; the same
//     requester and key with another body is a ConflictError.
//   - A child Turn derives from a live parent claim held by its requester;
//     its depth is the parent's + 1 and at most Config.MaxDepth.
//   - Secrets (credential tokens, claim tokens, join codes) never reach
//     Decide: only their SHA-256 hashes do, compared in constant time.
//   - Every project_id in a body equals the project of the path (else
//     ForbiddenError).
//
// # Grants
//
//	grant               allows
//	credentials:issue   issue credentials for any agent of the project
//	credentials:admin   list and revoke any agent's credentials
//	agents:register     register agents (the trusted registration service actor)
//	turns:dispatch      dispatch root Turns (a child Turn needs only its parent claim)
//	management          drain and resume agents; stop and resume any Turn; presence and metadata of any agent
//	projections:read    read every Turn, feed and projection of the project
//
// credentials:issue and agents:register are as strong as every grant
// together: the first issues a credential for any agent and so acts as it, the
// second re-registers any agent (itself included) with any grants.
//
// Without grants an agent reads the agent directory and Turn offers, its own
// feed, credentials and Turns (those it dispatched or that target it), claims
// its own Turns, works under its claims, sends its own presence and metadata,
// revokes its own credentials, submits its own work-memory reports, and stops
// or resumes the Turns it dispatched or that target it. The admin bearer may
// do everything, in every project; the claim reaper acts as the system.
//
// # Idempotency keys
//
// Every mutating command may carry an idempotency key (Common.Idem): the
// hash of the caller, the route and the client's Idempotency-Key, and the
// hash of the request body. The key travels inside the event it causes (the
// envelope's `idem`), so the engine's fold remembers, for
// IdempotencyRetention (24 h of ledger time), what each keyed command
// answered (an Answer: ledger_seq, aggregate id, the Turn's turn_seq,
// stop_requested and claim right after the event, the id it created). A
// retry with the same key and body gets that Answer back without deciding
// or appending again; the same key with another body is a ValidationError.
// Because the memory is folded from the ledger, it survives a SIGKILL right
// after the append, a restart and a change of instance. Only applied
// commands are remembered: a refusal or an outage is decided afresh.
//
// A retried claim must return the same claim token, and secrets never enter
// the ledger. So the secrets a retry answers again (claim tokens, credential
// tokens, join codes) are not drawn at random but derived by the engine: an
// HMAC-SHA256 of a server-held key (engine.Config.SecretKey) and the id of
// the claim, credential or invite, which is on the ledger. The ledger still holds only the secret's
// SHA-256; the key stays on the servers (shared by the instances of one
// deployment). We chose derivation over storing an encrypted token in the
// event because it keeps nothing secret-bearing on the ledger at all, and
// over a per-instance cache because that would not survive a SIGKILL. The
// cost: whoever holds the key and reads the ledger can compute those
// secrets, so the key is guarded like the admin token; a server with another
// key answers such a retry with a ConflictError rather than a wrong token.
package kernel
