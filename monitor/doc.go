// Package monitor is the query monitor: it runs monitored queries on a
// schedule against PostgreSQL databases and against a turnledger engine's
// public HTTP API, opens an error when a query's check fails, notifies
// channels (webhook, NATS, log), keeps errors and run history in a bbolt
// file, and serves a JSON API (part B of spec 002). docs/monitor.md is the
// user's guide; this comment records the decisions the spec leaves open.
//
// # Configuration
//
// A JSON file (File) lists connections, queries and channels. Secrets never
// appear in it: a connection names password_env or admin_token_env, a
// webhook secret_env (and url_env when its URL is itself a secret), a NATS
// channel token_env. The command reads those variables into
// Config.Secrets; Validate reports every problem at once, including a
// password written into a DSN and a named variable that is unset.
//
// # Connections and checks
//
// A postgres query runs on a connection of its own (opened per run, closed
// after it) inside a READ ONLY transaction that is rolled back: a monitor
// never writes. It is bounded by the query's timeout (default 30s, at most
// 10m). At most MaxRows rows are kept for the check; row_count counts all.
//
// A turnledger connection takes the engine's base URL, an admin token and
// the projects to watch; its "query" is the name of a check:
//
//	ready                   GET /readyz; fails unless 200, quoting the causes the engine reports
//	ledger_head             one row: stream, backend, ledger_head
//	projection_lag          one row: ledger_head, applied_seq, lag
//	expired_claims          one row per claimed Turn whose claim expired
//	unserved_stop_requests  one row per Turn with a stop requested, not finished
//	                        ("unserved_stop_requests older_than=60s": only stops asked that long ago)
//
// The last two read GET /v3r1/projects/{p}/projection/turns (limit 500 per
// project; a full page sets truncated). Only the public API is used. A claim
// is expired by the monitor's clock. ledger_head and projection_lag read a
// 503 answer too. The engine answers an empty list for a project it has
// never seen, so the connection test reads every project and names those
// without a registered agent (projects_without_agents) rather than let a
// misspelt id pass unnoticed; it still succeeds.
//
// A Check says when a run fails: row_count {op, value} fails when
// "row count op value" holds; value_range {column, min, max} fails when a
// row's column is not a number within the bounds, or no row comes back;
// query_fails fails only when the query fails. A failing query (connect
// error, SQL error, timeout) fails every kind.
//
// # Errors
//
// A failed run opens an error for its query, or counts on the query's
// active one (count, last_seen_at, reason): there is at most one active
// error per query. A passing run does not resolve it — a person does, with
// POST /api/errors/{id}/resolve and an optional {"note": "..."} body — but
// it sets last_passed_at (a later failure clears it), and the run's answer
// carries that still active error. Resolving an unknown id is 404, a resolved one
// 409. The next failure after that opens a new error. Error ids are
// positive integers given in order; query, connection and channel ids are
// the configured strings.
//
// # Notifications
//
// A notification fires when an error opens and when it is resolved, never
// on repeat failures or passes, to the query's channels (all channels when
// it names none). The payload is Notification; DeliveryID is
// "<event>-<error id>", the same on every retry. Deliveries run in the
// background; a webhook is retried on network errors, 408, 429 and 5xx,
// WebhookAttempts times (default 5), waiting WebhookBackoff (1s) doubled
// each time up to WebhookMaxBackoff (30s); retries still pending at
// shutdown are dropped. POST /api/channels/{id}/test sends one "test"
// notification, one attempt, and answers 200 with ok and the error if any.
//
// # Scheduler
//
// A query that never ran on schedule is due at start; afterwards one
// interval (at least 1s) after its last scheduled run, which is kept in the
// data file so a restart does not rerun everything. Manual runs do not move
// the schedule; a query whose previous scheduled run is still going is
// skipped; paused queries are never scheduled. Time and sleeping are the
// injected Config.Now and Config.Sleep.
//
// # Statistics
//
// days is an integer from 1 to MaxStatsDays (90), default 7: the window is
// that many UTC days ending today, today included. Anything else is 400.
// Runs older than 91 days are dropped from the data file.
//
// # HTTP
//
// Errors are {"error", "message"} (internal/jsonhttp) with the names
// ValidationError 400, NotFoundError 404, MethodNotAllowedError 405,
// ConflictError 409, InternalError 500. There is no authentication: the
// server binds to 127.0.0.1 by default and the command warns when it is
// told to listen further. No response carries a secret: connections show
// host, port, database, user and the names of variables; webhooks only
// their scheme and host.
package monitor
