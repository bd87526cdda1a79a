// Package projection holds the read models of turnledger: bbolt buckets
// folded from the ledger's event stream, and the page and feed queries the
// HTTP API serves from them. It imports only kernel and bbolt.
//
// The projections hold no rule of the domain. A Turn, an agent and a
// credential are folded by the kernel's own state machines
// ([kernel.EvolveTurn], [kernel.EvolveAgent], [kernel.EvolveCredential]),
// and the views are those states shaped for readers; who may read a Turn is
// [kernel.TurnReaders]. This package adds the indexes, pages and feeds.
//
// The files: fold.go applies a batch (the folder and its per-event
// dispatch), fold_turn.go the Turns and their indexes, fold_agent.go the
// agents and credentials, writes.go the writes a transaction defers to its
// commit, feeditem.go the feed encoding with its secret stripping, bucket.go
// the JSON helpers of buckets, query.go the pages.
//
// # Applying events and the checkpoint
//
// [Store.Apply] folds a batch of [kernel.Recorded] events in ledger order
// inside one bbolt Update that also writes the checkpoint, the ledger_seq of
// the last applied event (bucket "meta", key "checkpoint", 8 bytes
// big-endian). A crash therefore never applies an event twice nor skips one.
//
//   - Events at or below the checkpoint are skipped, so re-applying a batch
//     changes nothing.
//   - The rest must come in strictly increasing ledger_seq order, or the whole
//     batch is refused and nothing of it is applied.
//   - A gap (a first new event above checkpoint+1) is allowed: the stream may
//     hold messages that are not events of this Source (other kinds, later),
//     so any ledger_seq above the checkpoint is applicable. Completeness is
//     the Source's promise, not something the store can check.
//
// [Store.WaitFor] returns once the checkpoint reaches a ledger_seq; it waits
// to be woken by the commit that reaches it, not by polling. [Store.Answer]
// shows a command's Turn from the engine's state once the projector is
// within [AnswerLag] of its event ([Store.WaitNear]), or, for a command the
// engine answered again, once the event is folded, before its commit
// ([Store.TurnAt]; overlay.go); recent Turn records stay decoded
// between transactions (turncache.go). A [Projector] runs a [Source] from the
// checkpoint and folds each batch into a transaction it keeps open across
// batches ([Store.Fold]): it commits once the transaction has been open for
// Config.CommitInterval (100 ms), and sooner when someone waits for the commit:
// a read waiting for a ledger_seq folded commits it at once (by the fold that
// reaches it, or by the read itself), and when the Source has caught up
// (nothing more is on its way, [Store.CaughtUp]) a watch of a long poll or
// push feed has it committed at once. A command's answer does not wait for
// the commit, so a busy ledger's events are committed many at a time, and so
// are those of a ledger whose clients only send commands. When following fails
// it commits what it folded, records the error in its [Status], waits
// Config.RetryInterval, and follows again from the checkpoint. [Rebuild] folds the ledger from
// ledger_seq 1 up to its head into a new file (no fsync per batch, one sync at
// the end); the caller closes the live store and swaps the file in with
// [Install]. [Store.Dump] lets a test compare a rebuilt store with the live
// one.
//
// A batch is one transaction, so its size is the Source's choice: a few
// hundred to a few thousand events per batch amortise the fsync (see the
// benchmarks); one event per batch costs one fsync each, and the two
// fdatasyncs of a bbolt commit are most of what a small batch costs. The
// fold opens only the buckets an event uses. Its writes to the buckets it
// never reads (the feeds, the indexes, the context) wait for the commit and
// are applied there in key order, and the counters and last-seen times it
// reads and changes at almost every event are read once a transaction and
// written once (writes.go): a transaction leaves the file exactly as one
// transaction per event would.
//
// Open refuses a file written with another layout (meta "schema" other than
// SchemaVersion) with ErrSchema: rebuild it from the ledger.
//
// The projections are deterministic functions of the events: they never read
// the clock. Statuses that depend on time (agent presence, credential expiry)
// are derived at query time from the now the caller passes.
//
// # Buckets and keys
//
// A key is a tuple. A string part is its bytes (0x00 escaped as 0x00 0xFF)
// and the terminator 0x00 0x00; a sequence part (ledger_seq, turn_seq) is 8
// bytes big-endian. Tuple order is key order, and the encoding of a tuple's
// first parts is a prefix of exactly the keys that start with them.
//
//	meta               "checkpoint"                       → last applied ledger_seq
//	meta               "schema"                           → SchemaVersion of the layout
//	feed               (project, ledger_seq)              → FeedItem JSON, secrets stripped
//	turn_feed          (project, turn, ledger_seq)        → empty: points into feed
//	agent_feed         (project, agent, ledger_seq)       → empty: points into feed
//	turns              (project, turn)                    → kernel.Turn JSON (no claim hash) and its readers
//	turns_by_dispatch  (project, dispatch_seq)            → turn id
//	turns_by_target    (project, target, dispatch_seq)    → turn id
//	turns_by_agent     (project, agent, dispatch_seq)     → turn id (agent: one of kernel.TurnReaders)
//	turns_by_state     (project, state, dispatch_seq)     → turn id
//	turn_children      (project, parent, dispatch_seq)    → child turn id
//	turns_by_tag       (project, tag, dispatch_seq)       → turn id (a Turn under each of its tags)
//	context            (project, turn, turn_seq)          → ContextItem JSON
//	agents             (project, agent)                   → kernel.Agent JSON
//	agent_seen         (project, agent)                   → last seen, Unix ns
//	agent_claims       (project, agent)                   → Turns the agent holds a claim on
//	queued             (project, agent, turn_kind)        → queued Turns of that kind for it
//	snapshots          (project)                          → the engine's write-model snapshot (not a projection)
//	offers             (project, capability, agent)       → empty
//	credentials        (project, agent, credential)       → kernel.Credential JSON, no hash
//	meta               "horizon"                          → the first ledger_seq the feeds hold (retention)
//	retired            (project, turn)                    → RetiredTurn JSON: a retired Turn's finish, outcome, retirement, last view
//	horizon_projects   (project)                          → empty: a project whose feeds lost entries below the horizon
//
// dispatch_seq is the ledger_seq of a Turn's turn.dispatched; counters and
// sequences are 8 bytes big-endian, and a counter at zero is deleted.
//
// A feed page (after_ledger_seq, limit) is one seek and limit+1 cursor steps
// (plus one point read per item for the Turn and agent feeds), whatever the
// ledger's length; so is a page of semantic context (after_turn_seq). The
// Turn list walks the target-agent index when target_agent_id is given, else
// the readers index when VisibleTo is set (the agent's read policy,
// kernel.TurnReaders: Turns it is the target or the requester of, and every
// Turn under a root Turn it is the target or requester of), else the
// state index when state is given, else the dispatch index, and filters the
// rest while walking, from the cursor AfterSeq (a dispatch ledger_seq). A page
// examines at most 10 × limit + 100 Turns, so it costs O(limit) however many a
// filter skips; it may then hold fewer items than limit with HasMore set, and
// NextAfterSeq continues past what it examined. Lists of a project with no
// events are empty, not an error.
//
// # Read models
//
// Turn states are queued, claimed, suspended and finished; the transitions
// are kernel.EvolveTurn's (summarised here, the kernel's doc has the table):
//
//	turn.dispatched       → queued
//	turn.claimed          → claimed (claim set, attempts + 1)
//	turn.claim_renewed    → claim expires_at moves
//	turn.record_appended  → a context record; last_turn_seq
//	turn.suspended        → suspended, claim released
//	turn.resumed          → queued
//	turn.finished         → finished with the client's outcome, claim released;
//	                        a non-null final_payload adds the final context record
//	turn.stop_requested   → stop_requested = true
//	turn.stopped          → finished, outcome "stopped", stop_requested
//	turn.claim_expired    → queued, claim released; or, when data.stopped,
//	                        finished with outcome "stopped"
//
// A Turn's ledger_seq and updated_at are those of the last event that changed
// it. The claim shown never carries the claim token or its hash. The
// authority shows mode, request_id and parent_turn_id, never the parent claim.
// final_record_role is null until the Turn is finished.
//
// Agents (kernel.EvolveAgent): agent.registered, or a registration carried
// by a bootstrap's credential.issued or an invite.redeemed, creates the entry (or replaces its spec, keeping
// drained, registered_at and last seen); drained and resumed set drained;
// public_metadata_replaced replaces the metadata. last_seen_at is the latest
// at of an agent.heartbeat of the agent or of any event whose actor is the
// agent. Presence is "online" when now - last_seen_at < PresenceWindow
// (default 60s), "offline" when seen before, "never" otherwise. An agent's
// ledger_seq is its last agent event (heartbeats included); updated_at is the
// at of its last agent event other than a heartbeat or a work-memory report.
// active_claims counts the agent's Turns in state claimed; free_capacity is
// max(0, capacity - active_claims); admitting is enabled && accepts_work &&
// !drained. The accepts_work_only filter keeps accepts_work && !drained.
//
// A canonical Turn offer is one item per (agent, capability) of a registered
// agent: each capability string is a turn kind the agent offers to take.
// It carries the agent's role, enabled, accepts_work, drained, admitting,
// capacity and free_capacity, its presence, and queued: the Turns of that
// kind targeting that agent now in state queued. Offers are listed by
// (turn_kind, agent_id); enabled_only and accepts_work_only filter as for
// agents, so a drained or disabled agent's offers are shown unless filtered.
//
// Credentials (kernel.EvolveCredential) come from credential.issued (via
// "issue" unless the event says otherwise) and invite.redeemed (via "join");
// credential.revoked revokes.
// The status is "revoked" when revoked, else "expired" when now is at or
// after expires_at, else "active". The token hash is never stored here.
//
// # Feeds
//
// A feed item is the event envelope with its ledger_seq: ledger_seq, type, v,
// project_id, aggregate, id, at, actor, data, meta, trace (meta and trace
// null when absent). Every field named token_hash or code_hash is removed
// from data at any depth, so the feeds carry no secret material, hashed or
// not. The project feed holds every event of the project. The Turn feed holds
// the events of one Turn. The agent feed of an agent holds its agent events
// (heartbeats and work-memory reports included), the credential and invite
// events that name it, and the events of the Turns it is the target or the
// requester of. A page answers next_after_ledger_seq (the last item's
// ledger_seq, or the cursor given when empty) and has_more.
//
// Items are stored as the JSON of [FeedItem], exactly what json.Marshal
// gives for the item. [Store.RawFeed] hands a page of them over as stored
// (copied out of the file, each checked to begin and end as an item, into
// one buffer with a comma between two, which [RawFeedPage.Release] hands
// back for the next page), and HTTP sends that buffer on in one piece. The feed methods read them back by a
// decoder of exactly that form (one shared data buffer and one string per
// distinct value of a page), falling back to encoding/json for anything
// else, so that decoding a page allocates little
// (BenchmarkProjectFeedPage100k).
//
// # Retention
//
// Store.Retire (retire.go) moves the horizon up, removes the feed entries
// below it, and retires Turn trees wholly finished before a cutoff with
// every event below the horizon: a feed read whose cursor lies below
// horizon - 1 is a *GoneError, a read of a retired Turn a *RetiredError
// (a kernel NotFound that says when it was retired), and TurnAt answers a
// retired Turn's last view (for a repeated dispatch_key). The buckets
// "retired" and "horizon_projects" are made by the first Retire; an older
// file opens unchanged. CarryRetirement gives a rebuilt file the horizon and
// retired Turns of the live one (replay).
//
// # Limits
//
// Callers validate limit as 1..MaxLimit (500); the queries clamp to that
// range too. Feed, context and Turn list pages also stop at
// Config.MaxPageBytes (DefaultMaxPageBytes, 4 MiB) of stored items, with
// has_more set; a page always holds at least one item.
// Context, TurnFeed and Lineage answer ErrNotFound for an unknown
// Turn; AgentFeed and Credentials for an unregistered agent. Events of an
// unknown Turn or agent, and event types no read model uses, are kept in the
// feeds and change no model.
package projection
