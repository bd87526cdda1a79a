/**
 * The shapes of the API's answers, and of the objects requests carry, as
 * interfaces that mirror the schemas of the OpenAPI document
 * (`GET /openapi.json`, `components/schemas`) field for field, in the wire's
 * snake_case. Times are RFC 3339 strings. A test (`test/types.test.ts`)
 * loads the served document and fails when a schema and its interface here
 * differ in a field or in whether it is required.
 */

/** Any JSON value. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
/** A JSON object. */
export type JsonObject = { [key: string]: Json };

export interface AgentRef {
  project_id: string;
  agent_id: string;
}

export interface TurnRef {
  project_id: string;
  turn_id: string;
}

/** A live claim; pass it back as received. `token` is a secret. */
export interface ClaimToken {
  project_id: string;
  turn_id: string;
  agent_id: string;
  token: string;
  expires_at: string;
}

/** Operation metadata. */
export interface Meta {
  note?: string;
  reason?: string;
  annotations?: JsonObject | null;
}

/** Trace context. */
export interface Trace {
  trace_id?: string;
  parent_trace_id?: string | null;
  recursion_depth?: number;
}

/** The delay before a retry asked by a failed finish: initial_s × factor^(attempts−1), at most max_s (defaults 1, 2, 60). */
export interface Backoff {
  initial_s?: number;
  factor?: number;
  max_s?: number;
}

export interface AgentSpec {
  agent_id: string;
  role: string;
  description: string;
  enabled: boolean;
  accepts_work: boolean;
  capacity: number;
  capabilities: string[];
  grants: string[];
  public_metadata: JsonObject;
  /** The lease of the agent's claims in seconds (default: the server's claim TTL). */
  claim_ttl_s?: number;
}

export interface Provenance {
  kind: string;
  external_ref: string;
  payload_hash: string | null;
}

/** What a Turn suspended for input asks. */
export interface AwaitingInput {
  prompt: string;
  schema: JsonObject | null;
  input_by: string | null;
}

/** The `awaiting_input` of a suspend. */
export interface AwaitingInputRequest {
  prompt: string;
  schema?: JsonObject | null;
  input_by?: string | null;
}

/** How a Turn was authorised, as its snapshot shows it. */
export interface AuthorityView {
  mode: "root_request" | "child_derivation";
  request_id?: string;
  parent_turn_id?: string;
}

/** The live claim as a snapshot shows it (no token). */
export interface ClaimView {
  claim_id: string;
  agent_id: string;
  claimed_at: string;
  expires_at: string;
}

export type TurnState = "queued" | "claimed" | "suspended" | "finished";

/** The Turn snapshot. */
export interface Turn {
  project_id: string;
  turn_id: string;
  turn_kind: string;
  state: TurnState;
  /** succeeded, failed, stopped, expired, timed_out or dead, once finished */
  outcome: string | null;
  stop_requested: boolean;
  stop_requested_at: string | null;
  target_agent: AgentRef;
  requested_by: AgentRef;
  input: Json;
  dispatch_key: string;
  authority: AuthorityView;
  parent: TurnRef | null;
  root_turn_id: string;
  depth: number;
  claim: ClaimView | null;
  attempts: number;
  last_turn_seq: number;
  priority: number;
  not_before: string | null;
  claim_by: string | null;
  deadline: string | null;
  max_attempts: number | null;
  retry_backoff: Backoff | null;
  retry_of: string | null;
  awaiting_input: AwaitingInput | null;
  tags: string[];
  /** the conversation the Turn belongs to (A2A's contextId), null without one */
  context_id: string | null;
  final_payload: Json;
  final_record_role: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  ledger_seq: number;
}

/** The Turn after a suspend; with `awaiting_input`, the `input_token` (once) and `input_url`. */
export interface SuspendResult extends Turn {
  input_token?: string;
  input_url?: string;
}

/** The agent truth snapshot, and a directory entry. */
export interface Agent {
  project_id: string;
  agent_id: string;
  role: string;
  description: string;
  enabled: boolean;
  accepts_work: boolean;
  drained: boolean;
  admitting: boolean;
  capacity: number;
  active_claims: number;
  free_capacity: number;
  capabilities: string[];
  grants: string[];
  public_metadata: Json;
  provenance: Provenance;
  registered_at: string;
  updated_at: string;
  last_seen_at: string | null;
  presence: "online" | "offline" | "never";
  ledger_seq: number;
  claim_ttl_s: number | null;
}

export interface TurnOffer {
  agent_id: string;
  turn_kind: string;
  role: string;
  enabled: boolean;
  accepts_work: boolean;
  drained: boolean;
  admitting: boolean;
  capacity: number;
  free_capacity: number;
  queued: number;
  presence: "online" | "offline" | "never";
}

/** A credential summary (never the token). */
export interface Credential {
  credential_id: string;
  project_id: string;
  agent_id: string;
  status: "active" | "revoked" | "expired";
  issued_at: string;
  expires_at: string;
  revoked_at: string | null;
  via: string;
}

export interface CredentialList {
  project_id: string;
  agent_id: string;
  items: Credential[];
}

/** A new credential and its token, shown once. */
export interface IssuedCredential {
  credential: Credential;
  token: string;
}

export interface Profile {
  project_id: string;
  agent_id: string;
  profile_kind?: string;
  runtime_kind?: string;
  invite_id?: string;
  agent: Agent;
}

/** The optional spec of a bootstrap or an invite; a missing field takes the server's default. */
export interface ProfileSpec {
  role?: string;
  description?: string;
  enabled?: boolean;
  accepts_work?: boolean;
  capacity?: number;
  capabilities?: string[];
  grants?: string[];
  public_metadata?: JsonObject;
  claim_ttl_s?: number | null;
}

export interface CredentialMaterial {
  profile: Profile;
  credential: Credential;
  agent_credential_token: string;
}

export interface JoinInvite {
  invite_id: string;
  project_id: string;
  agent_id: string;
  profile_kind: string;
  runtime_kind: string;
  expires_at: string;
  single_use: boolean;
}

export interface InviteCreated {
  invite: JoinInvite;
  join_code: string;
}

export interface LineageItem {
  turn_id: string;
  parent_turn_id: string | null;
  depth: number;
  relation: "ancestor" | "self" | "descendant";
  state: string;
  outcome: string | null;
  turn_kind: string;
  target_agent: AgentRef;
}

/** One semantic record of a Turn. */
export interface ContextItem {
  turn_seq: number;
  role: string;
  payload: Json;
  claim_id: string;
  agent_id: string;
  at: string;
  ledger_seq: number;
}

export interface Actor {
  kind: string;
  agent_id?: string;
}

/** One ledger event of a feed; `ledger_seq` is its place in the ledger. */
export interface FeedItem {
  ledger_seq: number;
  type: string;
  v: number;
  project_id: string;
  aggregate: string;
  id: string;
  at: string;
  actor: Actor;
  data: Json;
  meta: Meta | null;
  trace: Trace | null;
}

export interface Diagnostic {
  code: string;
  message: string;
}

/** The projection page shape. */
export interface Page<T> {
  project_id: string;
  items: T[];
  limit: number;
  diagnostics: Diagnostic[];
}

/** A page with the ledger cursor: feeds and the Turn list. */
export interface SeqPage<T> extends Page<T> {
  next_after_ledger_seq: number;
  has_more: boolean;
}

export type AgentPage = Page<Agent>;
export type OfferPage = Page<TurnOffer>;
export type LineagePage = Page<LineageItem>;
export type TurnPage = SeqPage<Turn>;
export type FeedPage = SeqPage<FeedItem>;

export interface ContextPage extends Page<ContextItem> {
  next_after_turn_seq: number;
  has_more: boolean;
}

/** A won claim: the claim token and the Turn as claimed. */
export interface ClaimResult {
  claim: ClaimToken;
  turn: Turn;
}

export interface RenewResult {
  claim: ClaimToken;
  stop_requested: boolean;
  ledger_seq: number;
}

export interface RecordResult {
  project_id: string;
  turn_id: string;
  turn_seq: number;
  stop_requested: boolean;
  ledger_seq: number;
}

export interface ReconcileResult {
  project_id: string;
  released_turn_ids: string[];
  ledger_seq: number;
}

export interface ReportResult {
  report_id: string;
  project_id: string;
  agent_id: string;
  ledger_seq: number;
}

export interface Ok {
  ok: true;
}

export interface Health {
  status: string;
}

export interface Readiness {
  status: "ready" | "not_ready";
  [key: string]: Json;
}

/** The Turns a bulk action acts on (the filter of the Turn list). */
export interface BulkFilter {
  state?: TurnState;
  target_agent_id?: string;
  turn_kind?: string;
  tag?: string;
  outcome?: "succeeded" | "failed" | "stopped" | "expired" | "timed_out" | "dead";
  awaiting_input?: boolean;
}

export interface BulkStopResult {
  stopped: string[];
  has_more: boolean;
}

export interface BulkRetryResult {
  retried: string[];
  has_more: boolean;
}

export interface ProjectList {
  items: { project_id: string }[];
  diagnostics: Diagnostic[];
}

/** One minute of Trends: counts of the minute, levels as last read, percentiles of the minute (null when nothing was measured). */
export interface TrendPoint {
  at: string;
  sampled: boolean;
  dispatched: number;
  finished: Record<string, number>;
  queued: number | null;
  awaiting_input: number | null;
  claim_wait_p50_s: number | null;
  claim_wait_p95_s: number | null;
  run_p50_s: number | null;
  run_p95_s: number | null;
  projection_lag_events: number | null;
  shed: number;
  throttled: number;
}

/** The last hour of a server instance, a point a minute (admin). */
export interface Trends {
  now: string;
  minute_s: number;
  points: TrendPoint[];
}

export interface WorkMemoryRecord {
  role: string;
  payload: JsonObject;
  source_refs?: Json[];
}

/** The authority of a dispatch: a root request, or a child of a claim the caller holds. */
export type Authority =
  | { mode: "root_request"; request_id: string; parent_claim?: null }
  | { mode: "child_derivation"; parent_claim: ClaimToken; request_id?: string };
