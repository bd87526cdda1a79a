// Package engine is the write side of turnledger at run time: it keeps each
// project's write model in memory, decides commands on it through the
// kernel, and appends their events to the ledger. The rules are the
// kernel's; the engine owns the locks, the goroutines, the clock, the
// random source and the I/O around them.
//
// # The command path
//
// A command names its project. The engine finds the project's slot (loading
// its write model on first use: from a snapshot and the events after it,
// load.go and snapshot.go), takes the slot's lock, and then:
//
//  1. recalls the answer of an earlier request with the same idempotency key
//     (kernel.Recall), and answers it again without deciding;
//  2. decides (kernel.Decide) on the folded state at the engine's clock;
//  3. appends the event with the expectation "the project's last ledger_seq
//     is the one I folded" (Ledger.Append);
//  4. evolves the write model with it (kernel.Evolve) and releases the lock;
//  5. waits until the state it decided on is durable (Ledger.Durable), and
//     answers the event's ledger_seq.
//
// Where the ledger is the only writer of its stream (serve with its
// embedded NATS server, listening on no port), step 3 only sends the
// append, with the ledger_seq it will get, and step 4 evolves with that:
// the command waits for the server's answer after releasing the lock, and
// the project's next command decides meanwhile (pipeline.go). An append
// the server refuses there stores nothing and answers its command
// Unavailable; the project's state is then folded again from the ledger.
//
// A lost race (another instance appended first: kernel.ErrStale) is caught
// up from the ledger and decided again: while the races lost are explained
// by events another instance appended (the project makes progress), for up
// to Config.ContendFor (10 s); refusals the catch-up cannot explain (a
// replicated stream settling after a leader change) at most
// Config.MaxAttempts times. Then the command is answered Unavailable
// (nothing was appended; the client may retry). Commands of one instance
// take turns under the project's lock, but instances do not take turns with
// each other: a command of an instance that keeps losing to another that
// appends back to back waits until the other's queue of the project thins,
// which ContendFor bounds. A refusal, or a command that changes nothing, is
// confirmed the same way before it is answered: if the ledger moved on since
// the state was folded, the engine catches up and decides again. Clients see
// only real refusals, whichever instance they talk to.
//
// # Group commit, and what an answer promises
//
// Step 5 runs after the lock is released: while a command waits for its
// event to become durable, the project's next commands decide and append,
// and every command waiting at once shares one fsync (the ledger's group
// commit, ledger/groupsync.go). The next command decides on a state that
// holds events acknowledged by the server but not yet fsynced; its own
// answer waits for a later fsync, which covers them too, so no answer ever
// rests on an event that is not durable. This holds for refusals and for
// commands that change nothing as well: they too wait for the state they
// were decided on. A failed fsync answers Unavailable (503, retry with the
// Idempotency-Key): the change may be stored or not, as after a failed
// append.
//
// What an acknowledgement (a command's answer) promises, by serve's --sync:
//
//	always    its event, and every event its decision read, is on stable
//	          storage: it survives a crash of the process, of the kernel, and a
//	          power loss. (The embedded server writes each message before it
//	          acknowledges it; the ledger fsyncs the stream's files for the
//	          commands waiting at once; the engine answers after that fsync.)
//	interval  the server has written its event to the operating system (the
//	          page cache): it survives a crash of the process, not a power loss
//	          or a kernel crash before the server's next periodic fsync.
//	external  (--nats-url) the server's own sync_interval decides, as in the
//	          two rows above; with an R3 stream the promise comes from
//	          replication instead.
//
// Lost races are unchanged: every append carries the expectation of the
// project's last ledger_seq, so of two instances on one stream only one
// appends on a given state, and the other catches up and decides again.
// Durable covers every message the server had written when the fsync
// began, whoever appended it. serve's embedded server listens on no port,
// so every Store on it is serve's own, opened to commit in groups
// (ledger.Embedded.Open); instances on one stream share an external NATS
// server, which syncs as its own configuration says.
//
// Reads (authentication, read checks, View) may see events acknowledged by
// the server and not yet durable: an authentication may be refused for a
// revocation whose command has not been answered yet. A credential or claim
// token is only handed out with its command's answer, after the fsync. The projections never see
// them: the ledger hands the projector only durable events (ledger.Follow),
// so no read of a page, a feed or a Turn can show what a power loss could
// take back.
//
// Ids, secrets and expiries are drawn before deciding (ops.go): ids at
// random (a Turn id starts with the time, so that the Turns live at once sit
// side by side in the projections' B+trees), secrets derived from the
// server's key and the id they belong to (secrets.go), so that a retry can
// answer the same secret while the ledger holds only its hash.
//
// # Progress marks
//
// Four marks say how far along a project is. Each is a ledger_seq:
//
//	mark                     where                       moves when
//	ledger last              Ledger.LastSeq (lastseq.go)  an append of any instance is acknowledged
//	engine folded            Engine.Folded               this engine evolved its write model with an event
//	projection folded        projection.Store.WaitFolded the projector folded an event into its open transaction
//	projection checkpoint    projection.Store.WaitFor    the projector committed that transaction
//
// They never pass one another in the other direction: checkpoint ≤
// projection folded ≤ ledger last, and engine folded ≤ ledger last. Under
// group commit a fifth mark, ledger durable (ledger.Store.DurableSeq: every
// event at or below it has been fsynced), lies between them: projection
// folded ≤ ledger durable ≤ ledger last, while engine folded may pass it (the
// engine decides on acknowledged events; its answers wait for durable). A read
// that must see every write made before it (through any instance) asks the
// ledger for its last ledger_seq (Engine.View, or authentication, which
// catches up first) and then waits for the projection checkpoint to reach
// the engine's folded mark.
//
// The one helper an HTTP handler calls to read its own writes is
// httpapi's Server.wait(ctx, seq): once it returns, every read of the
// projections shows the event at seq. Reads call Server.caughtUp, which is
// wait at the engine's folded mark after catching up. Two narrower forms
// serve the hottest command answers and are correct only for what they say:
// Server.turnAt shows the one Turn the command changed as this engine's
// write model holds it after the command's event (AsOf, the result's Turn;
// projection.ViewOf shows it as the projections will), or, for a command
// answered again from memory, reads it from the projector's overlay once
// seq is folded; Server.waitNear answers what reads nothing of the
// projections. Both wait only while the projector is more than
// projection.AnswerLag events behind seq (projection.Store.Answer,
// WaitNear), so that commands cannot run far ahead of reads; a later read
// still waits for the commit through caughtUp.
//
// # Lock order
//
// Every lock of the write path, outermost first. A lock may be held while
// taking one below it, never one above it. No lock is held across a
// wait for another request.
//
//	lock                          guards                                         held across I/O
//	engine Retention.run          one retention run at a time                    yes: the archive, the purge, the projections
//	engine Engine.order           a command's decision and send while the        yes: the pipelined send (never its
//	                              ledger pipelines, one project at a time         answer); after a refused append, the
//	                              (pipeline.go)                                  catch-up of that project
//	engine slot.mu (RWMutex)      a project's write model; write: a command,     yes: Ledger.Append and the catch-up
//	                              read: a decision that changes nothing           read (a project's commands are serial);
//	                                                                             never across Ledger.Durable
//	engine Engine.mu              the map of slots; a slot's loading channel     no
//	engine lastSeqProbe.mu        the look-ups of a project's last ledger_seq    no (a probe fetches on its own goroutine)
//	engine Reaper.mu              the reaper's status                            no
//	engine Retention.mu           retention's status                             no
//	ledger Archived.purge (RW)    write: a purge; read: a read crossing from     yes: the reads and the purge
//	                              the archive into the stream
//	ledger pipeline.mu            the ledger_seq guessed next, the order of      yes: an append in sequence while the
//	                              sends (pipelined appends, ledger/pipeline.go)  Store pipelines (never a pipelined one's answer)
//	ledger Store.mu               appends in ExpectStream mode, their heads      yes: the publish
//	ledger sent.mu                this Store's appends that Follow has not seen  no
//	ledger groupSync.mu           the fsync in flight and the callers queued     no (the fsync runs on its own goroutine)
//	ledger groupSync.fmu          the block files the group commit fsyncs        yes: the fsync (held by nothing else)
//	projection Store.wmu          the fold's open transaction                    yes: the bbolt commit
//	projection Store.mu           the marks, their waiters, the overlay          no
//	projection recentTurns.mu     the cache of recent Turn records               no
//	projection notifier.mu        the channels of watched keys (long polls, SSE) no
//
// Retention.run is held while a run loads and snapshots write models (so
// before slot.mu), purges (Archived.purge) and has the projections retire
// (projection Store.wmu, one bounded transaction at a time): the one engine
// lock held while taking one of the projector's.
// Engine.order is taken by a command before its slot.mu, while the ledger
// pipelines (lockOrder), so that a command queues once; it is never taken
// while holding a slot.mu, and never held while waiting for a load (a load
// holds slot.mu alone). It is held while heldSlot takes Engine.mu.
// slot.mu is taken before Engine.mu (doOn forgets an empty project) and
// before lastSeqProbe.mu (a command numbers itself once it holds the lock);
// Engine.mu is never held while taking slot.mu (SaveSnapshots lists the
// slots under Engine.mu and locks each after releasing it). The engine's
// locks are never held by the projector, and the projector's never by the
// engine: they meet only through the ledger (Ledger.Append on one side,
// Follow on the other) and through the marks above. The published auth view
// (authview.go) and a slot's loaded flag are atomics, read without a lock.
//
// # What lives here
//
// engine.go: the Engine, its Config, slots, decide-append and lost races;
// ops.go: the commands that need ids, secrets or expiries; load.go: loading
// on first use; lastseq.go: the shared look-up of a project's last
// ledger_seq; authview.go: the lock-free view authentication reads;
// reaper.go: expired claims released on a timer; retention.go: archive,
// purge and retirement on a timer (docs/retention.md); snapshot.go, snapbin.go:
// snapshots of write models; packed.go, packedform.go: the packed store of
// finished Turns and its memory form; secrets.go: derived secrets.
package engine
