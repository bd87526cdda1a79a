// Package ledger is turnledger's event store: one NATS JetStream stream holds
// every event, and an event's ledger_seq is its stream sequence.
//
// # Subjects and messages
//
// An event goes to "<prefix>.<project>.<aggregate>" (prefix "tl" by
// default), built from the event's ProjectID and Aggregate; ProjectID,
// Aggregate and ID must each be a safe token (kernel.ValidID) first: a dot, a
// wildcard or a space is ErrInvalidID, never a new subject. The body is
// kernel.MarshalEvent's JSON; the type, schema version and aggregate id travel
// in the Tl-Type, Tl-Version and Tl-Id headers too, so a consumer can route
// without decoding. Tl-Nonce is random per Append (see "Clusters and
// outages").
//
// The aggregate id is deliberately not a subject token, a departure from the
// "<prefix>.<project>.turn.<turn_id>" of DESIGN.md. JetStream checks the
// per-project expectation and answers LastSeq by matching
// "<prefix>.<project>.>" against every subject of the project, so with a
// subject per Turn an append's cost would grow with the project's Turns,
// without bound. A project has one subject per aggregate kind (at most
// four), so appends cost the same at any size (BenchmarkAppendManyTurns).
// Nothing reads a single Turn by subject: Turn feeds come from the
// projections. Reading an event whose type
// or version the kernel does not know, or that sits on a subject other than
// its own, is an error: nothing is ever skipped.
//
// The stream (default "TURNLEDGER", subjects "<prefix>.>") is created by
// Open when there is none, with Config's storage and replicas, limits
// retention and no limits, DenyDelete and DenyPurge (the ledger is
// append-only) and AllowDirect off (direct get puts the subject in the
// request subject, where the wildcard of LastSeq cannot go). An existing
// stream is never changed: its replicas and storage are whatever its maker
// chose (Status reports them). Open refuses one the ledger cannot work on,
// saying what to change: subjects that do not take "<prefix>.>", a retention
// other than limits, limits that would drop events (max age, max messages
// per subject, or max messages or bytes with discard old), direct get, a
// mirror, a sealed stream.
//
// # Clusters and outages
//
// On a NATS cluster the stream has the replicas asked for when it is made (3
// on 3 servers). While a replicated stream is between leaders (an election
// after its leader's server stopped or crashed) or the connection is between
// servers, JetStream answers nothing, "no responders", or "temporarily
// unavailable". Every request of the Store to JetStream (publish, message
// get, stream info) is bounded by Config.AttemptTimeout (500ms) and asked again
// while it fails that way, for up to Config.RetryFor (15s) in all; then the
// Store gives up with a kernel.Unavailable error (503 with Retry-After to a
// client). A leader that hands over on shutdown is replaced within a second;
// after a crash the followers wait 4 to 9 seconds (nats-server 2.15's
// election timeout) before they elect one.
//
// A publish that timed out may have been stored. Retrying it cannot store it
// twice, since every attempt carries the same expectation, which a stored
// copy breaks; and once an attempt has gone unanswered, a later refusal is
// checked against the project's first event after the expected one: if that
// is this very message (same subject, Tl-Nonce and bytes), the append
// succeeded.
// A first refusal is reported as a conflict at once (a writer that lost a
// race should catch up without an extra round trip); when the engine comes
// back with the same expectation, having found nothing new, and still no
// event after it can be read while the project is where expected, the
// refusal counts a proposal not yet committed (after a leader change,
// perhaps our own) and the Store asks again rather than report a conflict.
//
// # Optimistic concurrency
//
// Append(ctx, project, expectLast, e) writes e only if the last ledger_seq on
// "<prefix>.<project>.>" is expectLast (0: the project has none). When it is
// not, the error satisfies errors.Is(err, ErrConflict) and nothing is written:
// catch up with ReadProject and decide again. JetStream reports the lost race
// as API error 10071 ("wrong last sequence"), or 10164 on replicated
// streams; only this package knows those codes.
//
// On nats-server 2.11 and later (mode ExpectProject) the check is JetStream's
// own: Nats-Expected-Last-Subject-Sequence with the wildcard subject in
// Nats-Expected-Last-Subject-Sequence-Subject. Projects never contend.
//
// Older servers (Debian 12 ships 2.9.10) ignore that second header, so the
// first would be checked against the event's own subject: wrong. There the
// Store falls back (mode ExpectStream) to the stream-wide
// Nats-Expected-Last-Sequence, which is correct but makes every append
// contend with every other. To turn "the project is at expectLast" into "the
// stream is at H", the Store tracks the stream head: it serializes its own
// appends (they contend on the head anyway, and a writer that must read
// before it publishes would otherwise lose every race to one that need not)
// and remembers, for the head after its last append, the last ledger_seq of
// each project it has seen; while no other process writes, an append is one
// publish. Otherwise it reads the head, then the project's last ledger_seq,
// and publishes with the head it read (if the publish succeeds, nothing came
// after that head, so the project was where it was read). When the publish
// fails only because another process moved the head, Append looks again and
// retries, up to Config.StreamConflictRetries times, then reports
// ErrConflict. Each retry costs three round trips, and one process's appends
// run one at a time: throughput across projects drops accordingly. Open picks the mode from the connected server's version
// (Config.Expect = ExpectAuto); ExpectStream can be forced, and the tests run
// the whole suite in both modes. Servers older than 2.9.0 are refused, and so
// is ExpectProject on a server older than 2.11, with a message naming the
// version needed. In a cluster, the version checked is that of the server the
// connection reached.
//
// Servers of that age are believed to read an expected last sequence of 0 as
// no expectation at all, which would let two writers racing for the very
// first event of an empty stream both succeed. So in ExpectStream mode the
// first event also carries a fixed message id (Nats-Msg-Id
// "<stream>.first-event"): the server keeps one of two racing first writes
// and reports the other a duplicate, which Append returns as ErrConflict.
// Once the stream holds an event, every expectation is non-zero.
//
// Not verified here (the test suite runs on the embedded 2.15 server only):
// that a 2.9 server answers the wildcard last_by_subj and next_by_subj
// message gets that LastSeq and ReadProject use.
//
// # Reading
//
// LastSeq is one message get ("last by subject" on the project's wildcard);
// Head is one stream info. ReadProject first calls LastSeq and returns at once
// when nothing is newer than after; it gets up to four events one by one (a
// catch-up after a conflict is usually one or two), then reads the rest with
// a consumer filtered on the project and starting at the next sequence, and stops at the last ledger_seq LastSeq gave: it never waits on a
// timeout. ReadAll (for the replay tool) reads the whole stream up to the head
// at call time and hands that head to fn for progress. Follow reads the whole
// stream from a sequence on and keeps following, handing fn batches of as many
// events as are ready, up to Config.BatchSize (1000), so a projector can fold
// a batch per bbolt transaction. The NATS client's delivery goroutine only
// queues messages; the reader takes as many as are ready, decodes them on up
// to GOMAXPROCS goroutines (decoding the kernel's JSON is the largest part
// of a read's cost) and hands them to fn in order. Two things make Follow cheaper for the
// projector of the process that appends: an event this Store appended is
// handed over as the engine decided it (found by the message's Tl-Nonce), not
// decoded again; and Follow tells fn when it has caught up (an empty batch)
// only once none of this Store's appends is unanswered with its event not
// received (or Config.FollowLinger, 500µs, has passed waiting for it), so
// the projector of a busy project commits many events at a time while a
// lone client's read waits for nothing.
//
// A read's consumer is what the client's ordered consumer would make (in
// memory, one replica, no acks), but made by the Store with a short bound
// per attempt; the read checks that consumer sequences follow each other and
// pulls with 500 ms heartbeats. When its server goes away (two heartbeats
// missed) or a message is skipped, the read makes a new consumer after the
// last event it handed over, and gives up with kernel.Unavailable after
// Config.RetryFor without progress. (The client's ordered consumer recreates
// itself with a 10 s bound per attempt, and a projection would stall for
// that long whenever the request meets a server going away.) A create that
// goes unanswered is asked again under a new name: the meta leader may have
// placed the consumer on a server that crashed and is not yet known to be
// offline, and it then ignores further requests for that name until the
// crashed server answers, which would stall projections until
// Config.RetryFor ran out.
//
// Every read deletes its consumer when it ends: the server counts
// ephemeral consumers against a limit (1000 per stream by default) until they
// have been idle for their inactive threshold, and a busy engine would
// otherwise exhaust it.
//
// # Archives and the horizon
//
// With retention on (serve --retain-finished), the events below a horizon
// are written to an Archive (archive.go: zstd-compressed JSON Lines segments
// named by their ledger_seq range, each with a sha256sum checksum file; the
// format is in docs/retention.md) by ArchiveTo, and then purged from the
// stream by PurgeBelow (purge.go), which needs a stream made with
// Config.AllowPurge (JetStream never lifts deny_purge). FirstSeq is the
// stream's first ledger_seq, the horizon once purged. Archived (archived.go)
// reads the archive, then the stream: ReadProject, ReadAll and Follow that
// start below the horizon start in the archive, so a write model without a
// snapshot and a projection file rebuilt from nothing see every event.
//
// # Embedded server
//
// StartEmbedded runs nats-server in-process with JetStream file storage under
// DataDir/nats/jetstream, and holds an exclusive lock on DataDir/nats/LOCK
// while it runs (nats-server itself would let two processes share the files
// and corrupt them). By default it listens on no port at all and Connect
// returns an in-process connection (no TCP, no loopback port to guard); Port
// -1 or a port number adds a listener on 127.0.0.1 only. Close closes the
// connections made with Connect and shuts the server down, waiting until
// JetStream has written its state.
//
// # Group commit
//
// Under SyncAlways nats-server fsyncs each message before it acknowledges
// it, so appends cost an fsync each however many wait. With
// EmbeddedConfig.GroupCommit (serve's --sync always) the embedded server
// does not sync each message, and a Store opened with Embedded.Open makes
// appends durable itself: Store.Durable(ctx, seq) returns once an fsync of
// the stream's block files that began after the event at seq was
// acknowledged has ended, and the callers waiting at once share one fsync
// (groupsync.go). The engine answers a command only after Durable; Follow
// hands over only durable events. Store.DurableSeq is the mark reached,
// Store.Fsyncs how many fsyncs were made. A Store opened otherwise, or on
// an external server, has nothing to wait for: Durable returns at once,
// the server having synced as its own configuration says. The levers not
// kept, measured with BenchmarkGroupCommit (figures in docs/speed.md):
// atomic batches (the server stages every batch in a file store made and
// removed for it, which costs more than the fsyncs saved) and pipelined
// appends with chained expectations (each message is still fsynced on its
// own).
//
// # Speed
//
// BenchmarkAppend, BenchmarkRead, BenchmarkAppendManyTurns,
// BenchmarkAppendSync and BenchmarkGroupCommit measure the Store (go test -run '^$' -bench .
// ./ledger/). Decoding the kernel's JSON (kernel.UnmarshalEvent) is the
// largest part of a read's client CPU, which is why reads decode on up to
// GOMAXPROCS goroutines.
package ledger
