import {
  TurnledgerError,
  errorFrom,
  errorOfEvent,
  refusedForGood,
  retryable,
} from "./errors.js";
import type * as T from "./types.js";

/** The request header that makes a mutating request safe to retry. */
export const IDEMPOTENCY_HEADER = "Idempotency-Key";

/** A fresh random Idempotency-Key (32 hex digits). */
export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID().replace(/-/g, "");
}

/**
 * The fields each request body may carry, by the name of its schema in the
 * OpenAPI document. A body is built only from these (see `body`), and a test
 * checks each list against the served document both ways.
 */
export const bodyFields = {
  AdmissionBody: ["agent", "requested_by", "meta", "trace"],
  BulkBody: ["requested_by", "filter", "limit", "reason", "meta", "trace"],
  ClaimBody: ["agent", "lease_s", "meta", "trace"],
  ContextBody: ["meta", "trace"],
  DispatchBody: [
    "requested_by", "target_agent", "input", "turn_kind", "dispatch_key", "authority", "priority", "not_before",
    "claim_by", "deadline", "max_attempts", "retry_backoff", "tags", "context_id", "meta", "trace",
  ],
  FencedBody: ["claim", "meta", "trace"],
  FinishBody: ["claim", "outcome", "final_payload", "final_record_role", "retry", "meta", "trace"],
  HeartbeatBody: ["agent", "meta", "trace"],
  InviteBody: [
    "agent_id", "profile_kind", "runtime_kind", "expires_in_seconds", "single_use", "spec", "meta", "trace",
  ],
  ProvideInputBody: ["input", "meta", "trace"],
  RecordBody: ["claim", "role", "payload", "meta", "trace"],
  RedeemBody: ["join_code"],
  RegisterBody: ["spec", "provenance", "meta", "trace"],
  RequestedByBody: ["requested_by", "meta", "trace"],
  StopBody: ["requested_by", "cascade", "meta", "trace"],
  SuspendBody: ["claim", "awaiting_input", "meta", "trace"],
  TokensRequestBody: ["agent_id", "spec", "provenance", "meta", "trace"],
  WorkMemoryReport: [
    "kind", "request_id", "summary", "records", "final_payload", "declared_project_id", "declared_agent_id",
  ],
} as const;

/** The query parameters each route takes, by operationId (checked against the document by a test). */
export const queryFields = {
  claimTurn: ["wait"],
  agentFeed: ["after_ledger_seq", "limit"],
  projectFeed: ["after_ledger_seq", "limit"],
  turnFeed: ["after_ledger_seq", "limit"],
  turnContext: ["after_turn_seq", "limit"],
  turnLineage: ["limit"],
  listAgents: ["agent_id", "enabled_only", "accepts_work_only", "role", "capability", "limit"],
  listTurnOffers: ["turn_kind", "agent_id", "enabled_only", "accepts_work_only", "limit"],
  listTurns: [
    "target_agent_id", "turn_kind", "state", "outcome", "priority", "awaiting_input", "tag", "context_id",
    "stop_requested_only",
    "after_ledger_seq", "order", "limit",
  ],
} as const;

type BodyName = keyof typeof bodyFields;
type QueryName = keyof typeof queryFields;

function body(name: BodyName, values: Record<string, unknown>): Record<string, unknown> {
  const allowed: readonly string[] = bodyFields[name];
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(values)) {
    if (!allowed.includes(k)) throw new Error(`turnledger: ${name} has no field ${k}`);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

function query(name: QueryName, values: Record<string, unknown>): Record<string, unknown> {
  const allowed: readonly string[] = queryFields[name];
  const out: Record<string, unknown> = {};
  for (const k of allowed) if (values[k] !== undefined) out[k] = values[k];
  return out;
}

const seg = encodeURIComponent;

/** A time: an RFC 3339 string or a Date. */
export type Time = string | Date;
const time = (v: Time | undefined): string | undefined => (v instanceof Date ? v.toISOString() : v);

/** A ledger feed to follow. */
export class Feed {
  constructor(readonly path: string) {}
  /** Every event of a project (the projections:read grant or the admin). */
  static project(project: string): Feed {
    return new Feed(`/v3r1/projects/${seg(project)}/projection/feed`);
  }
  /** The events of one Turn. */
  static turn(project: string, turnId: string): Feed {
    return new Feed(`/v3r1/projects/${seg(project)}/turns/${seg(turnId)}/feed`);
  }
  /** The events of one agent. */
  static agent(project: string, agentId: string): Feed {
    return new Feed(`/v3r1/projects/${seg(project)}/agents/${seg(agentId)}/feed`);
  }
}

/** Sleeps ms; resolves true at once when signal aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(true);
    const done = () => {
      clearTimeout(t);
      resolve(true);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", done);
      resolve(false);
    }, Math.max(ms, 0));
    signal?.addEventListener("abort", done, { once: true });
  });
}

export interface ClientOptions {
  /** e.g. http://127.0.0.1:8000 */
  baseUrl: string;
  /** An agent's project, id and credential token: the three headers. */
  project?: string;
  agent?: string;
  token?: string;
  /** The admin bearer, for an admin client. */
  adminToken?: string;
  /** Bounds each call (default 30s; a long-poll claim gets its wait on top). */
  timeoutMs?: number;
  /**
   * Retries of a call after a network failure, a 429, 502, 503 or 504, after
   * retryDelayMs (doubling, at most 5s) or the service's Retry-After when
   * longer; a mutating call without a key then gets a fresh one. Default 0,
   * as the Go client.
   */
  retries?: number;
  retryDelayMs?: number;
  /** The fetch to use (default: the global fetch). */
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
}
export interface ProjectOptions extends CallOptions {
  /** The project of the route: the client's by default. */
  project?: string;
}
export interface KeyOptions extends CallOptions {
  /** Sent as Idempotency-Key: a retry with the same key gets the first answer. */
  idempotencyKey?: string;
}
export interface MutateOptions extends ProjectOptions, KeyOptions {
  meta?: T.Meta | null;
  trace?: T.Trace | null;
}
export interface FencedOptions extends KeyOptions {
  meta?: T.Meta | null;
  trace?: T.Trace | null;
}
export interface AgentOptions {
  /** The agent of the route: the client's by default. */
  agentId?: string;
}
export interface FeedQuery {
  after_ledger_seq?: number;
  limit?: number;
}

export interface DispatchOptions extends MutateOptions {
  input?: T.JsonObject;
  /** The root request id (default: the dispatch key); ignored with parent_claim. */
  request_id?: string;
  /** Dispatch a child of this claim (the caller holds it). */
  parent_claim?: T.ClaimToken;
  /** Who asks: an agent id of the project or an AgentRef; the client's agent by default. */
  requested_by?: string | T.AgentRef;
  priority?: number;
  not_before?: Time;
  claim_by?: Time;
  deadline?: Time;
  max_attempts?: number;
  retry_backoff?: T.Backoff;
  tags?: string[];
  /** Groups the Turns of one conversation (A2A's contextId). */
  context_id?: string;
}

export interface RequestedByOptions extends MutateOptions {
  requested_by?: string | T.AgentRef;
}

export interface BulkOptions extends RequestedByOptions {
  filter?: T.BulkFilter;
  limit?: number;
  reason?: string;
}

export interface FinishOptions extends FencedOptions {
  /** succeeded (default), failed or stopped */
  outcome?: string;
  final_payload?: T.JsonObject | null;
  /** default "final" when a final payload is given */
  final_record_role?: string;
  /** with failed: queue the Turn again after its backoff */
  retry?: boolean;
}

interface Send {
  query?: Record<string, unknown>;
  body?: unknown;
  key?: string;
  signal?: AbortSignal;
  bearer?: string;
  accept?: string;
  timeoutMs?: number;
  headers?: Record<string, string>;
}

/**
 * A client of the turnledger API. It has one method per route, named after
 * the route's OpenAPI operationId; the project (and the agent, where a route
 * names one) default to the client's own. Answers are the decoded JSON,
 * typed by the interfaces of `types.ts`. A refusal throws a
 * `TurnledgerError` (a subclass per error name); a network failure, fetch's
 * TypeError.
 */
export class Client {
  readonly baseUrl: string;
  readonly project: string | undefined;
  readonly agent: string | undefined;
  readonly timeoutMs: number;
  readonly retries: number;
  readonly retryDelayMs: number;
  readonly #token: string | undefined;
  readonly #admin: string | undefined;
  readonly #fetch: typeof fetch;

  constructor(o: ClientOptions) {
    let u: URL;
    try {
      u = new URL(o.baseUrl);
    } catch {
      throw new TypeError(`turnledger: base URL ${JSON.stringify(o.baseUrl)} must be an absolute http or https URL`);
    }
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new TypeError(`turnledger: base URL ${JSON.stringify(o.baseUrl)} must be an absolute http or https URL`);
    }
    if (o.agent && !(o.project && o.token)) throw new TypeError("turnledger: an agent client needs project, agent and token");
    this.baseUrl = o.baseUrl.replace(/\/+$/, "");
    this.project = o.project;
    this.agent = o.agent;
    this.#token = o.token;
    this.#admin = o.adminToken;
    this.timeoutMs = o.timeoutMs ?? 30_000;
    this.retries = o.retries ?? 0;
    this.retryDelayMs = o.retryDelayMs ?? 500;
    this.#fetch = o.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  // ---- plumbing

  #p(project?: string): string {
    const p = project ?? this.project;
    if (!p) throw new TypeError("turnledger: no project: pass project or make the client with one");
    return p;
  }

  #a(agentId?: string): string {
    const a = agentId ?? this.agent;
    if (!a) throw new TypeError("turnledger: no agent: pass agentId or make the client with one");
    return a;
  }

  #me(requestedBy: string | T.AgentRef | undefined, project: string): T.AgentRef {
    if (requestedBy && typeof requestedBy === "object") return requestedBy;
    const a = requestedBy ?? this.agent;
    if (!a) throw new TypeError("turnledger: requested_by is needed (the client is not an agent)");
    return { project_id: project, agent_id: a };
  }

  #pp(project: string | undefined, ...parts: string[]): string {
    return `/v3r1/projects/${seg(this.#p(project))}` + parts.join("");
  }

  #url(path: string, q?: Record<string, unknown>): string {
    const sp = new URLSearchParams();
    for (const [k, v] of Object.entries(q ?? {})) {
      if (v === undefined || v === null || v === false || v === "" || v === 0) continue;
      for (const one of Array.isArray(v) ? v : [v]) sp.append(k, String(one));
    }
    const s = sp.toString();
    return this.baseUrl + path + (s ? "?" + s : "");
  }

  /** Sends one request with the client's credentials; the caller reads the Response. */
  async send(method: string, path: string, s: Send = {}): Promise<Response> {
    const headers: Record<string, string> = { Accept: s.accept ?? "application/json", ...s.headers };
    let payload: string | undefined;
    if (s.body !== undefined) {
      headers["Content-Type"] = "application/json";
      payload = JSON.stringify(s.body);
    }
    if (s.key) headers[IDEMPOTENCY_HEADER] = s.key;
    if (s.bearer !== undefined) headers.Authorization = "Bearer " + s.bearer;
    else if (this.agent) {
      headers["X-Svc-Project-Id"] = this.project!;
      headers["X-Svc-Agent-Id"] = this.agent;
      headers.Authorization = "Bearer " + this.#token;
    } else if (this.#admin) headers.Authorization = "Bearer " + this.#admin;
    const signals = [s.signal, s.timeoutMs === Infinity ? undefined : AbortSignal.timeout(s.timeoutMs ?? this.timeoutMs)];
    const live = signals.filter((x): x is AbortSignal => x !== undefined);
    const signal = live.length > 1 ? AbortSignal.any(live) : live[0];
    return this.#fetch(this.#url(path, s.query), { method, headers, body: payload, signal });
  }

  async #once(method: string, path: string, s: Send): Promise<unknown> {
    const resp = await this.send(method, path, s);
    const text = await resp.text();
    if (resp.status !== 200) throw errorFrom(resp.status, text, resp.headers.get("Retry-After"));
    return text.trim() === "" ? null : JSON.parse(text);
  }

  async #call<R>(method: string, path: string, s: Send = {}): Promise<R> {
    const mutating = method !== "GET" && method !== "HEAD";
    let key = mutating ? s.key : undefined;
    if (mutating && !key && this.retries > 0) key = newIdempotencyKey();
    let delay = this.retryDelayMs;
    for (let attempt = 0; ; attempt++) {
      try {
        return (await this.#once(method, path, { ...s, key })) as R;
      } catch (e) {
        if (attempt >= this.retries || !retryable(e) || s.signal?.aborted) throw e;
        const ra = e instanceof TurnledgerError && e.retryAfterS ? e.retryAfterS * 1000 : 0;
        if (await sleep(Math.max(delay, ra), s.signal)) throw e;
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  // ---- service

  /** Liveness: `{status: "ok"}`. */
  healthz(o: CallOptions = {}): Promise<T.Health> {
    return this.#call("GET", "/healthz", o);
  }

  /** The readiness report; an UnavailableError (503) when not ready. */
  readyz(o: CallOptions = {}): Promise<T.Readiness> {
    return this.#call("GET", "/readyz", o);
  }

  /** The service's OpenAPI document. */
  openapi(o: CallOptions = {}): Promise<T.JsonObject> {
    return this.#call("GET", "/openapi.json", o);
  }

  /** The Prometheus text of /metrics (loopback clients only, unless the server says otherwise). */
  async metrics(o: CallOptions = {}): Promise<string> {
    const resp = await this.send("GET", "/metrics", { accept: "text/plain", signal: o.signal });
    const text = await resp.text();
    if (resp.status !== 200) throw errorFrom(resp.status, text, resp.headers.get("Retry-After"));
    return text;
  }

  // ---- admin surface

  /** Every project with an event (admin). */
  listProjects(o: CallOptions = {}): Promise<T.ProjectList> {
    return this.#call("GET", "/admin/v1/projects", o);
  }

  /** The last hour of the server instance, a point a minute (admin). */
  getTrends(o: CallOptions = {}): Promise<T.Trends> {
    return this.#call("GET", "/admin/v1/trends", o);
  }

  /** Bootstraps an agent and a one-time credential token (admin). */
  requestAgentCredentialTokens(
    agentId: string,
    o: MutateOptions & { spec?: T.ProfileSpec | null; provenance?: T.Provenance | null } = {},
  ): Promise<T.CredentialMaterial> {
    const b = body("TokensRequestBody", { agent_id: agentId, spec: o.spec, provenance: o.provenance, meta: o.meta, trace: o.trace });
    return this.#call("POST", `/admin/v1/projects/${seg(this.#p(o.project))}/agent-credential-tokens:request`, { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Creates a join invite; the join code is in the answer, once (admin). */
  createJoinInvite(
    agentId: string,
    o: MutateOptions & {
      profile_kind?: string;
      runtime_kind?: string;
      expires_in_seconds?: number | null;
      single_use?: boolean | null;
      spec?: T.ProfileSpec | null;
    } = {},
  ): Promise<T.InviteCreated> {
    const b = body("InviteBody", {
      agent_id: agentId, profile_kind: o.profile_kind ?? "", runtime_kind: o.runtime_kind ?? "",
      expires_in_seconds: o.expires_in_seconds, single_use: o.single_use, spec: o.spec, meta: o.meta, trace: o.trace,
    });
    return this.#call("POST", `/admin/v1/projects/${seg(this.#p(o.project))}/agent-join-invites`, { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Redeems a join code (no credentials needed). */
  redeemJoin(joinCode: string, o: KeyOptions = {}): Promise<T.CredentialMaterial> {
    return this.#call("POST", "/admin/v1/agent-joins:redeem", { body: body("RedeemBody", { join_code: joinCode }), key: o.idempotencyKey, signal: o.signal });
  }

  /** Redeems a join code through the compatibility alias. */
  redeemJoinByoa(joinCode: string, o: KeyOptions = {}): Promise<T.CredentialMaterial> {
    return this.#call("POST", "/admin/v1/byoa/join:redeem", { body: body("RedeemBody", { join_code: joinCode }), key: o.idempotencyKey, signal: o.signal });
  }

  // ---- agents and credentials

  /** Registers an agent or replaces its spec (admin, or [agents:register]); a missing spec field takes a default (role worker, enabled, accepting work, capacity 1). */
  registerAgent(spec: Partial<T.AgentSpec> & { agent_id: string }, o: MutateOptions & { provenance?: T.Provenance } = {}): Promise<T.Agent> {
    const full: T.AgentSpec = {
      role: "worker", description: "", enabled: true, accepts_work: true, capacity: 1, capabilities: [], grants: [],
      public_metadata: {}, ...spec,
    };
    const b = body("RegisterBody", {
      spec: full, provenance: o.provenance ?? { kind: "typescript-client", external_ref: "", payload_hash: null },
      meta: o.meta, trace: o.trace,
    });
    return this.#call("POST", this.#pp(o.project, "/agents:register"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Issues a credential; its token is in the answer, once. */
  issueCredential(o: MutateOptions & AgentOptions = {}): Promise<T.IssuedCredential> {
    const path = this.#pp(o.project, "/agents/", seg(this.#a(o.agentId)), "/credentials:issue");
    return this.#call("POST", path, { body: body("ContextBody", { meta: o.meta, trace: o.trace }), key: o.idempotencyKey, signal: o.signal });
  }

  /** Revokes a credential. */
  revokeCredential(credentialId: string, o: MutateOptions & AgentOptions = {}): Promise<T.Ok> {
    const path = this.#pp(o.project, "/agents/", seg(this.#a(o.agentId)), "/credentials/", seg(credentialId), ":revoke");
    return this.#call("POST", path, { body: body("ContextBody", { meta: o.meta, trace: o.trace }), key: o.idempotencyKey, signal: o.signal });
  }

  /** Lists an agent's credentials (summaries, never tokens). */
  listCredentials(o: ProjectOptions & AgentOptions = {}): Promise<T.CredentialList> {
    return this.#call("GET", this.#pp(o.project, "/agents/", seg(this.#a(o.agentId)), "/credentials"), o);
  }

  /** The agent truth snapshot. */
  getAgent(o: ProjectOptions & AgentOptions = {}): Promise<T.Agent> {
    return this.#call("GET", this.#pp(o.project, "/agents/", seg(this.#a(o.agentId))), o);
  }

  /** Submits a work-memory report as the agent. */
  submitWorkMemoryReport(
    requestId: string,
    o: ProjectOptions & KeyOptions & AgentOptions & { summary?: string; records?: T.WorkMemoryRecord[]; final_payload?: T.JsonObject | null } = {},
  ): Promise<T.ReportResult> {
    const p = this.#p(o.project);
    const a = this.#a(o.agentId);
    const b = body("WorkMemoryReport", {
      kind: "agent_work_memory_report_manifest.v1", request_id: requestId, summary: o.summary ?? "", records: o.records ?? [],
      final_payload: o.final_payload ?? null, declared_project_id: p, declared_agent_id: a,
    });
    return this.#call("POST", this.#pp(p, "/agents/", seg(a), "/work-memory-reports"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  #admission(verb: string, agentId: string, o: RequestedByOptions): Promise<T.Agent> {
    const p = this.#p(o.project);
    const b = body("AdmissionBody", {
      agent: { project_id: p, agent_id: agentId }, requested_by: this.#me(o.requested_by, p), meta: o.meta, trace: o.trace,
    });
    return this.#call("POST", this.#pp(p, "/management/agents/", seg(agentId), ":" + verb), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Stops admitting new Turns to the agent. */
  drainAgent(agentId: string, o: RequestedByOptions = {}): Promise<T.Agent> {
    return this.#admission("drain", agentId, o);
  }

  /** Admits new Turns to the agent again. */
  resumeAgent(agentId: string, o: RequestedByOptions = {}): Promise<T.Agent> {
    return this.#admission("resume", agentId, o);
  }

  /** Records the agent's presence. */
  heartbeatPresence(o: MutateOptions & AgentOptions = {}): Promise<T.Agent> {
    const p = this.#p(o.project);
    const a = this.#a(o.agentId);
    const b = body("HeartbeatBody", { agent: { project_id: p, agent_id: a }, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(p, "/management/agents/", seg(a), ":heartbeat-presence"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Replaces the agent's public metadata (a JSON object, at most 16 KiB). */
  replacePublicMetadata(metadata: T.JsonObject, o: ProjectOptions & KeyOptions & AgentOptions = {}): Promise<T.Agent> {
    const path = this.#pp(o.project, "/management/agents/", seg(this.#a(o.agentId)), "/public-metadata");
    return this.#call("PUT", path, { body: metadata, key: o.idempotencyKey, signal: o.signal });
  }

  /** A page of the agent's ledger feed (`follow(Feed.agent(...))` streams it). */
  agentFeed(o: ProjectOptions & AgentOptions & FeedQuery = {}): Promise<T.FeedPage> {
    return this.#call("GET", this.#pp(o.project, "/agents/", seg(this.#a(o.agentId)), "/feed"), { query: query("agentFeed", { ...o }), signal: o.signal });
  }

  // ---- Turns

  /**
   * Dispatches a Turn: a child of `parent_claim` when given, else a root Turn
   * with `request_id` (default: the dispatch key). The schedule fields are
   * optional (docs/scheduling.md).
   */
  dispatchTurn(targetAgent: string | T.AgentRef, turnKind: string, dispatchKey: string, o: DispatchOptions = {}): Promise<T.Turn> {
    const p = this.#p(o.project);
    const target = typeof targetAgent === "object" ? targetAgent : { project_id: p, agent_id: targetAgent };
    const authority: T.Authority = o.parent_claim
      ? { mode: "child_derivation", parent_claim: o.parent_claim }
      : { mode: "root_request", request_id: o.request_id ?? dispatchKey };
    const b = body("DispatchBody", {
      requested_by: this.#me(o.requested_by, p), target_agent: target, input: o.input ?? {}, turn_kind: turnKind,
      dispatch_key: dispatchKey, authority, priority: o.priority, not_before: time(o.not_before), claim_by: time(o.claim_by),
      deadline: time(o.deadline), max_attempts: o.max_attempts, retry_backoff: o.retry_backoff, tags: o.tags,
      context_id: o.context_id, meta: o.meta, trace: o.trace,
    });
    return this.#call("POST", this.#pp(p, "/turns:dispatch"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** The Turn snapshot. */
  getTurn(turnId: string, o: ProjectOptions = {}): Promise<T.Turn> {
    return this.#call("GET", this.#pp(o.project, "/turns/", seg(turnId)), o);
  }

  /** A page of the Turn's semantic records after `after_turn_seq`. */
  turnContext(turnId: string, o: ProjectOptions & { after_turn_seq?: number; limit?: number } = {}): Promise<T.ContextPage> {
    return this.#call("GET", this.#pp(o.project, "/turns/", seg(turnId), "/context"), { query: query("turnContext", { ...o }), signal: o.signal });
  }

  /** A page of the Turn's ledger feed. */
  turnFeed(turnId: string, o: ProjectOptions & FeedQuery = {}): Promise<T.FeedPage> {
    return this.#call("GET", this.#pp(o.project, "/turns/", seg(turnId), "/feed"), { query: query("turnFeed", { ...o }), signal: o.signal });
  }

  /** Requests a stop of the Turn (with `cascade`, of its descendants too). */
  stopTurn(turnId: string, o: RequestedByOptions & { cascade?: boolean } = {}): Promise<T.Turn> {
    const p = this.#p(o.project);
    const b = body("StopBody", { requested_by: this.#me(o.requested_by, p), cascade: o.cascade, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(p, "/management/turns/", seg(turnId), ":stop"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Resumes a suspended Turn. */
  resumeTurn(turnId: string, o: RequestedByOptions = {}): Promise<T.Turn> {
    const p = this.#p(o.project);
    const b = body("RequestedByBody", { requested_by: this.#me(o.requested_by, p), meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(p, "/turns/", seg(turnId), ":resume"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Dispatches a new Turn from a finished one (failed, dead, expired, timed_out, stopped); a second retry is a ConflictError. */
  retryTurn(turnId: string, o: RequestedByOptions = {}): Promise<T.Turn> {
    const p = this.#p(o.project);
    const b = body("RequestedByBody", { requested_by: this.#me(o.requested_by, p), meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(p, "/turns/", seg(turnId), ":retry"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  #bulk<R>(verb: string, o: BulkOptions): Promise<R> {
    const p = this.#p(o.project);
    const b = body("BulkBody", {
      requested_by: this.#me(o.requested_by, p), filter: o.filter, limit: o.limit, reason: o.reason, meta: o.meta, trace: o.trace,
    });
    return this.#call("POST", this.#pp(p, "/management/turns:" + verb), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Stops the Turns the filter matches, oldest first, at most `limit` (1–1000, default 100); call again while has_more. */
  bulkStopTurns(o: BulkOptions = {}): Promise<T.BulkStopResult> {
    return this.#bulk("bulk-stop", o);
  }

  /** Retries the finished Turns the filter matches. */
  bulkRetryTurns(o: BulkOptions = {}): Promise<T.BulkRetryResult> {
    return this.#bulk("bulk-retry", o);
  }

  /** Answers a Turn suspended for input; with `inputToken` the call carries that token alone. */
  provideTurnInput(turnId: string, input: T.JsonObject, o: MutateOptions & { inputToken?: string } = {}): Promise<T.Turn> {
    const b = body("ProvideInputBody", { input, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(o.project, "/turns/", seg(turnId), ":provide-input"), {
      body: b, key: o.idempotencyKey, signal: o.signal, bearer: o.inputToken,
    });
  }

  // ---- claims

  /**
   * Claims the agent's next Turn, or answers null when none waits. With
   * `waitS` (at most 60) the server holds the request until a Turn is queued
   * for the agent or the wait ends.
   */
  claimTurn(o: MutateOptions & AgentOptions & { waitS?: number; leaseS?: number } = {}): Promise<T.ClaimResult | null> {
    const p = this.#p(o.project);
    const a = this.#a(o.agentId);
    const b = body("ClaimBody", { agent: { project_id: p, agent_id: a }, lease_s: o.leaseS, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(p, "/agents/", seg(a), "/claims:claim"), {
      query: query("claimTurn", { wait: o.waitS ? `${o.waitS}s` : undefined }), body: b, key: o.idempotencyKey,
      signal: o.signal, timeoutMs: this.timeoutMs + (o.waitS ?? 0) * 1000,
    });
  }

  /** Extends the claim by the server's claim TTL; says whether a stop was requested. */
  renewClaim(claim: T.ClaimToken, o: FencedOptions = {}): Promise<T.RenewResult> {
    const b = body("FencedBody", { claim, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(claim.project_id, "/claims:renew"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /**
   * Hands a live claim back: the Turn goes back to its old place in the
   * queue, the attempt not counted (a worker that stops gracefully).
   */
  releaseClaim(claim: T.ClaimToken, o: FencedOptions = {}): Promise<T.Turn> {
    const b = body("FencedBody", { claim, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(claim.project_id, "/claims:release"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Releases the project's expired claims. */
  reconcileExpiredClaims(o: MutateOptions = {}): Promise<T.ReconcileResult> {
    const b = body("ContextBody", { meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(o.project, "/claims:reconcile-expired"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Appends a semantic record (a JSON object) under the claim. */
  appendSemanticRecord(claim: T.ClaimToken, role: string, payload: T.JsonObject, o: FencedOptions = {}): Promise<T.RecordResult> {
    const b = body("RecordBody", { claim, role, payload, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(claim.project_id, "/turns/", seg(claim.turn_id), "/semantic-records"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Suspends the claimed Turn; with `awaiting_input` the answer carries, once, input_token and input_url. */
  suspendTurn(claim: T.ClaimToken, o: FencedOptions & { awaiting_input?: T.AwaitingInputRequest } = {}): Promise<T.SuspendResult> {
    const b = body("SuspendBody", { claim, awaiting_input: o.awaiting_input, meta: o.meta, trace: o.trace });
    return this.#call("POST", this.#pp(claim.project_id, "/turns/", seg(claim.turn_id), ":suspend"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  /** Finishes the claimed Turn. */
  finishTurn(claim: T.ClaimToken, o: FinishOptions = {}): Promise<T.Turn> {
    const payload = o.final_payload ?? null;
    const b = body("FinishBody", {
      claim, outcome: o.outcome ?? "succeeded", final_payload: payload,
      final_record_role: o.final_record_role || (payload !== null ? "final" : undefined), retry: o.retry || undefined,
      meta: o.meta, trace: o.trace,
    });
    return this.#call("POST", this.#pp(claim.project_id, "/turns/", seg(claim.turn_id), ":finish"), { body: b, key: o.idempotencyKey, signal: o.signal });
  }

  // ---- projections

  /** Agent directory entries. */
  listAgents(
    o: ProjectOptions & { agent_id?: string; enabled_only?: boolean; accepts_work_only?: boolean; role?: string; capability?: string; limit?: number } = {},
  ): Promise<T.AgentPage> {
    return this.#call("GET", this.#pp(o.project, "/projection/agents"), { query: query("listAgents", { ...o }), signal: o.signal });
  }

  /** Canonical Turn offers. */
  listTurnOffers(
    o: ProjectOptions & { turn_kind?: string; agent_id?: string; enabled_only?: boolean; accepts_work_only?: boolean; limit?: number } = {},
  ): Promise<T.OfferPage> {
    return this.#call("GET", this.#pp(o.project, "/projection/turn-offers"), { query: query("listTurnOffers", { ...o }), signal: o.signal });
  }

  /**
   * Projected Turns in dispatch order, oldest first unless `order: "newest"`; `after_ledger_seq` is the cursor
   * (next_after_ledger_seq of the previous page), paging on in the order asked for.
   */
  listTurns(
    o: ProjectOptions & {
      target_agent_id?: string;
      turn_kind?: string;
      state?: T.TurnState;
      outcome?: string;
      priority?: number;
      awaiting_input?: boolean;
      tag?: string | string[];
      context_id?: string;
      stop_requested_only?: boolean;
      after_ledger_seq?: number;
      order?: "oldest" | "newest";
      limit?: number;
    } = {},
  ): Promise<T.TurnPage> {
    return this.#call("GET", this.#pp(o.project, "/projection/turns"), { query: query("listTurns", { ...o }), signal: o.signal });
  }

  /** The Turn's lineage: ancestors, itself, descendants. */
  turnLineage(turnId: string, o: ProjectOptions & { limit?: number } = {}): Promise<T.LineagePage> {
    return this.#call("GET", this.#pp(o.project, "/projection/turns/", seg(turnId), "/lineage"), { query: query("turnLineage", { ...o }), signal: o.signal });
  }

  /** A page of the project's ledger feed. */
  projectFeed(o: ProjectOptions & FeedQuery = {}): Promise<T.FeedPage> {
    return this.#call("GET", this.#pp(o.project, "/projection/feed"), { query: query("projectFeed", { ...o }), signal: o.signal });
  }

  // ---- event streams

  /**
   * The feed's items after ledger_seq `after`, live, from its event stream
   * (Server-Sent Events), as an async iterator. When the connection drops it
   * reconnects with Last-Event-ID set to the last ledger_seq it yielded, so no
   * item is skipped or repeated, waiting a little longer after each failed
   * attempt (100ms up to 5s, or the server's Retry-After). It throws the
   * TurnledgerError of a refusal that retrying cannot mend (401, 403, 404,
   * 422), also when an open stream is ended because access was lost. Leave
   * the loop (`break`) or abort `signal` to end it.
   */
  async *follow(feed: Feed | string, o: { after?: number; signal?: AbortSignal } = {}): AsyncGenerator<T.FeedItem, void, undefined> {
    const path = typeof feed === "string" ? feed : feed.path;
    let after = o.after ?? 0;
    let backoff = 100;
    while (!o.signal?.aborted) {
      let progressed = false;
      let err: unknown;
      try {
        for await (const item of this.#stream(path, after, o.signal)) {
          after = item.ledger_seq;
          progressed = true;
          yield item;
        }
        err = new Error("turnledger: the stream ended");
      } catch (e) {
        if (o.signal?.aborted) return;
        if (refusedForGood(e)) throw e;
        err = e;
      }
      if (progressed) backoff = 100;
      const ra = err instanceof TurnledgerError && err.retryAfterS ? err.retryAfterS * 1000 : 0;
      if (await sleep(Math.max(backoff, ra), o.signal)) return;
      backoff = Math.min(backoff * 2, 5000);
    }
  }

  async *#stream(path: string, after: number, signal?: AbortSignal): AsyncGenerator<T.FeedItem, void, undefined> {
    const ctl = new AbortController();
    const onAbort = () => ctl.abort(signal?.reason);
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const headers: Record<string, string> = {};
      if (after > 0) headers["Last-Event-ID"] = String(after);
      const resp = await this.send("GET", path, {
        accept: "text/event-stream", headers, query: { after_ledger_seq: after }, signal: ctl.signal, timeoutMs: Infinity,
      });
      if (resp.status !== 200) throw errorFrom(resp.status, (await resp.text()).slice(0, 65536), resp.headers.get("Retry-After"));
      const ct = resp.headers.get("Content-Type") ?? "";
      if (!ct.startsWith("text/event-stream") || !resp.body) {
        throw new TurnledgerError(resp.status, "UnexpectedResponse", `the feed answered ${ct}, not an event stream`);
      }
      const reader = resp.body.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      let event = "";
      let data: string[] = [];
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error("turnledger: the stream broke");
        buf += decoder.decode(value, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, "");
          buf = buf.slice(nl + 1);
          if (line === "") {
            if (data.length === 0 && !event) continue;
            const text = data.join("\n");
            if (event === "error") throw errorOfEvent(text);
            const item = JSON.parse(text) as T.FeedItem;
            event = "";
            data = [];
            if (item.ledger_seq > after) {
              after = item.ledger_seq;
              yield item;
            }
            continue;
          }
          if (line.startsWith(":")) continue; // a comment: heartbeat
          const i = line.indexOf(":");
          const field = i < 0 ? line : line.slice(0, i);
          let value = i < 0 ? "" : line.slice(i + 1);
          if (value.startsWith(" ")) value = value.slice(1);
          if (field === "event") event = value;
          else if (field === "data") data.push(value);
        }
      }
    } finally {
      signal?.removeEventListener("abort", onAbort);
      ctl.abort();
    }
  }
}
