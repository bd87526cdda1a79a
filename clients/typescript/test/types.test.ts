// The interfaces of src/types.ts mirror the served OpenAPI document, and the
// request bodies and query parameters the client sends are those of the
// document: a field added, dropped or made optional on one side only fails
// this test. The tables below are checked by the compiler against the
// interfaces (every field, each marked required or optional exactly as the
// interface has it), and by the test against the document.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { bodyFields, queryFields } from "../src/index.js";
import type * as T from "../src/index.js";
import { Serve } from "./serve.js";

/** Every field of T, "req" or "opt" as T declares it; the compiler refuses a missing, extra or wrongly marked one. */
type Fields<X> = { [K in keyof X]-?: {} extends Pick<X, K> ? "opt" : "req" };
const fields = <X>(f: Fields<X>): Record<string, "req" | "opt"> => f as Record<string, "req" | "opt">;

const turnFields = fields<T.Turn>({
  project_id: "req", turn_id: "req", turn_kind: "req", state: "req", outcome: "req", stop_requested: "req",
  stop_requested_at: "req", target_agent: "req", requested_by: "req", input: "req", dispatch_key: "req", authority: "req",
  parent: "req", root_turn_id: "req", depth: "req", claim: "req", attempts: "req", last_turn_seq: "req", priority: "req",
  not_before: "req", claim_by: "req", deadline: "req", max_attempts: "req", retry_backoff: "req", retry_of: "req",
  awaiting_input: "req", tags: "req", context_id: "req", final_payload: "req", final_record_role: "req", created_at: "req", updated_at: "req",
  finished_at: "req", ledger_seq: "req",
});
const page = { project_id: "req", items: "req", limit: "req", diagnostics: "req" } as const;
const seqPage = { ...page, next_after_ledger_seq: "req", has_more: "req" } as const;

// The type name in the client → [where in the document, its fields].
const mirrors: Record<string, [string, Record<string, "req" | "opt">]> = {
  AgentRef: ["AgentRef", fields<T.AgentRef>({ project_id: "req", agent_id: "req" })],
  TurnRef: ["TurnRef", fields<T.TurnRef>({ project_id: "req", turn_id: "req" })],
  ClaimToken: ["ClaimToken", fields<T.ClaimToken>({ project_id: "req", turn_id: "req", agent_id: "req", token: "req", expires_at: "req" })],
  Meta: ["Meta", fields<T.Meta>({ note: "opt", reason: "opt", annotations: "opt" })],
  Trace: ["Trace", fields<T.Trace>({ trace_id: "opt", parent_trace_id: "opt", recursion_depth: "opt" })],
  Backoff: ["Backoff", fields<T.Backoff>({ initial_s: "opt", factor: "opt", max_s: "opt" })],
  AgentSpec: ["AgentSpec", fields<T.AgentSpec>({
    agent_id: "req", role: "req", description: "req", enabled: "req", accepts_work: "req", capacity: "req",
    capabilities: "req", grants: "req", public_metadata: "req", claim_ttl_s: "opt",
  })],
  Provenance: ["Provenance", fields<T.Provenance>({ kind: "req", external_ref: "req", payload_hash: "req" })],
  AwaitingInput: ["TurnView.awaiting_input", fields<T.AwaitingInput>({ prompt: "req", schema: "req", input_by: "req" })],
  AwaitingInputRequest: ["SuspendBody.awaiting_input", fields<T.AwaitingInputRequest>({ prompt: "req", schema: "opt", input_by: "opt" })],
  AuthorityView: ["TurnView.authority", fields<T.AuthorityView>({ mode: "req", request_id: "opt", parent_turn_id: "opt" })],
  ClaimView: ["TurnView.claim", fields<T.ClaimView>({ claim_id: "req", agent_id: "req", claimed_at: "req", expires_at: "req" })],
  Turn: ["TurnView", turnFields],
  SuspendResult: ["SuspendResult", fields<T.SuspendResult>({ ...(turnFields as Fields<T.Turn>), input_token: "opt", input_url: "opt" })],
  Agent: ["AgentView", fields<T.Agent>({
    project_id: "req", agent_id: "req", role: "req", description: "req", enabled: "req", accepts_work: "req", drained: "req",
    admitting: "req", capacity: "req", active_claims: "req", free_capacity: "req", capabilities: "req", grants: "req",
    public_metadata: "req", provenance: "req", registered_at: "req", updated_at: "req", last_seen_at: "req", presence: "req",
    ledger_seq: "req", claim_ttl_s: "req",
  })],
  TurnOffer: ["TurnOffer", fields<T.TurnOffer>({
    agent_id: "req", turn_kind: "req", role: "req", enabled: "req", accepts_work: "req", drained: "req", admitting: "req",
    capacity: "req", free_capacity: "req", queued: "req", presence: "req",
  })],
  Credential: ["CredentialView", fields<T.Credential>({
    credential_id: "req", project_id: "req", agent_id: "req", status: "req", issued_at: "req", expires_at: "req",
    revoked_at: "req", via: "req",
  })],
  CredentialList: ["CredentialList", fields<T.CredentialList>({ project_id: "req", agent_id: "req", items: "req" })],
  IssuedCredential: ["IssuedCredential", fields<T.IssuedCredential>({ credential: "req", token: "req" })],
  Profile: ["Profile", fields<T.Profile>({
    project_id: "req", agent_id: "req", profile_kind: "opt", runtime_kind: "opt", invite_id: "opt", agent: "req",
  })],
  ProfileSpec: ["ProfileSpec", fields<T.ProfileSpec>({
    role: "opt", description: "opt", enabled: "opt", accepts_work: "opt", capacity: "opt", capabilities: "opt", grants: "opt",
    public_metadata: "opt", claim_ttl_s: "opt",
  })],
  CredentialMaterial: ["CredentialMaterial", fields<T.CredentialMaterial>({ profile: "req", credential: "req", agent_credential_token: "req" })],
  JoinInvite: ["JoinInvite", fields<T.JoinInvite>({
    invite_id: "req", project_id: "req", agent_id: "req", profile_kind: "req", runtime_kind: "req", expires_at: "req",
    single_use: "req",
  })],
  InviteCreated: ["InviteCreated", fields<T.InviteCreated>({ invite: "req", join_code: "req" })],
  LineageItem: ["LineageItem", fields<T.LineageItem>({
    turn_id: "req", parent_turn_id: "req", depth: "req", relation: "req", state: "req", outcome: "req", turn_kind: "req",
    target_agent: "req",
  })],
  ContextItem: ["ContextItem", fields<T.ContextItem>({
    turn_seq: "req", role: "req", payload: "req", claim_id: "req", agent_id: "req", at: "req", ledger_seq: "req",
  })],
  Actor: ["FeedItem.actor", fields<T.Actor>({ kind: "req", agent_id: "opt" })],
  FeedItem: ["FeedItem", fields<T.FeedItem>({
    ledger_seq: "req", type: "req", v: "req", project_id: "req", aggregate: "req", id: "req", at: "req", actor: "req",
    data: "req", meta: "req", trace: "req",
  })],
  Diagnostic: ["Diagnostic", fields<T.Diagnostic>({ code: "req", message: "req" })],
  AgentPage: ["AgentPage", fields<T.AgentPage>(page)],
  OfferPage: ["OfferPage", fields<T.OfferPage>(page)],
  LineagePage: ["LineagePage", fields<T.LineagePage>(page)],
  TurnPage: ["TurnPage", fields<T.TurnPage>(seqPage)],
  FeedPage: ["FeedPage", fields<T.FeedPage>(seqPage)],
  ContextPage: ["ContextPage", fields<T.ContextPage>({ ...page, next_after_turn_seq: "req", has_more: "req" })],
  ClaimResult: ["ClaimResult", fields<T.ClaimResult>({ claim: "req", turn: "req" })],
  RenewResult: ["RenewResult", fields<T.RenewResult>({ claim: "req", stop_requested: "req", ledger_seq: "req" })],
  RecordResult: ["RecordResult", fields<T.RecordResult>({
    project_id: "req", turn_id: "req", turn_seq: "req", stop_requested: "req", ledger_seq: "req",
  })],
  ReconcileResult: ["ReconcileResult", fields<T.ReconcileResult>({ project_id: "req", released_turn_ids: "req", ledger_seq: "req" })],
  ReportResult: ["ReportResult", fields<T.ReportResult>({ report_id: "req", project_id: "req", agent_id: "req", ledger_seq: "req" })],
  Ok: ["Ok", fields<T.Ok>({ ok: "req" })],
  Health: ["Health", fields<T.Health>({ status: "req" })],
  BulkFilter: ["BulkBody.filter", fields<T.BulkFilter>({
    state: "opt", target_agent_id: "opt", turn_kind: "opt", tag: "opt", outcome: "opt", awaiting_input: "opt",
  })],
  BulkStopResult: ["op:bulkStopTurns", fields<T.BulkStopResult>({ stopped: "req", has_more: "req" })],
  BulkRetryResult: ["op:bulkRetryTurns", fields<T.BulkRetryResult>({ retried: "req", has_more: "req" })],
  ProjectList: ["op:listProjects", fields<T.ProjectList>({ items: "req", diagnostics: "req" })],
  Trends: ["op:getTrends", fields<T.Trends>({ now: "req", minute_s: "req", points: "req" })],
  TrendPoint: ["op:getTrends.points", fields<T.TrendPoint>({
    at: "req", sampled: "req", dispatched: "req", finished: "req", queued: "req", awaiting_input: "req",
    claim_wait_p50_s: "req", claim_wait_p95_s: "req", run_p50_s: "req", run_p95_s: "req", projection_lag_events: "req",
    shed: "req", throttled: "req",
  })],
  WorkMemoryRecord: ["WorkMemoryReport.records", fields<T.WorkMemoryRecord>({ role: "req", payload: "req", source_refs: "opt" })],
};

let doc: any;
before(async () => {
  const s = await Serve.start();
  try {
    doc = await s.admin().openapi();
  } finally {
    await s.close();
  }
});
after(() => {});

function resolve(x: any): any {
  while (x?.$ref) x = doc.components.schemas[x.$ref.split("/").pop()];
  if (x?.anyOf) return resolve(x.anyOf.find((y: any) => y.type !== "null"));
  if (x?.type === "array" && x.items) return resolve(x.items);
  return x;
}

function operations(): Map<string, any> {
  const ops = new Map<string, any>();
  for (const item of Object.values<any>(doc.paths)) for (const o of Object.values<any>(item)) if (o?.operationId) ops.set(o.operationId, o);
  return ops;
}

function schemaAt(where: string): any {
  if (where.startsWith("op:")) {
    const [op, prop] = where.slice(3).split(".");
    const s = resolve(operations().get(op).responses["200"].content["application/json"].schema);
    return prop ? resolve(s.properties[prop]) : s;
  }
  const [name, prop] = where.split(".");
  const s = resolve({ $ref: `#/components/schemas/${name}` });
  return prop ? resolve(s.properties[prop]) : s;
}

test("the answer types mirror the document's schemas", () => {
  for (const [name, [where, f]] of Object.entries(mirrors)) {
    const s = schemaAt(where);
    const props = Object.keys(s.properties ?? {}).sort();
    assert.deepEqual(Object.keys(f).sort(), props, `${name} (${where}): fields differ from the schema's`);
    const required = Object.entries(f).filter(([, v]) => v === "req").map(([k]) => k).sort();
    assert.deepEqual(required, [...(s.required ?? [])].sort(), `${name} (${where}): required fields differ`);
  }
});

test("the request bodies the client sends are the document's", () => {
  const bodies = new Set<string>();
  for (const o of operations().values()) {
    const ref = o.requestBody?.content?.["application/json"]?.schema?.$ref;
    if (ref) bodies.add(ref.split("/").pop());
  }
  bodies.delete("PublicMetadata"); // any JSON object
  assert.deepEqual(Object.keys(bodyFields).sort(), [...bodies].sort(), "bodies of the document without a field list here, or the other way round");
  for (const [name, list] of Object.entries(bodyFields)) {
    assert.deepEqual([...list].sort(), Object.keys(doc.components.schemas[name].properties).sort(), `${name}: fields differ`);
  }
});

test("the query parameters the client sends are the document's", () => {
  for (const [id, o] of operations()) {
    const params = (o.parameters ?? [])
      .map((p: any) => (p.$ref ? doc.components.parameters[p.$ref.split("/").pop()] : p))
      .filter((p: any) => p.in === "query")
      .map((p: any) => p.name)
      .sort();
    const mine = [...((queryFields as Record<string, readonly string[]>)[id] ?? [])].sort();
    assert.deepEqual(mine, params, `${id}: query parameters differ`);
  }
});
