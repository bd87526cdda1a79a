// Every route once against a real serve, and refusals as TurnledgerErrors.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import * as tl from "../src/index.js";
import { Client, Feed } from "../src/index.js";
import { Serve, dispatch } from "./serve.js";

let s: Serve;
before(async () => {
  s = await Serve.start();
});
after(async () => {
  await s.close();
});

const camel = (op: string) => op;

test("a method per operation", async () => {
  const doc: any = await s.admin().openapi();
  const ops: string[] = [];
  for (const item of Object.values<any>(doc.paths)) for (const o of Object.values<any>(item)) if (o?.operationId) ops.push(o.operationId);
  assert.ok(ops.length > 40);
  const missing = ops.filter((op) => typeof (Client.prototype as any)[camel(op)] !== "function");
  assert.deepEqual(missing, [], "operations without a method");
});

test("every route", async () => {
  const p = "every";
  const adm = s.admin();
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch", "management", "projections:read"] });
  const w = await s.agent(p, "w", { capacity: 2 });
  assert.deepEqual(await adm.healthz(), { status: "ok" });
  assert.ok((await adm.readyz()).status);
  assert.ok("paths" in (await adm.openapi()));
  assert.match(await adm.metrics(), /turnledger_/);
  assert.ok((await adm.listProjects()).items.some((i) => i.project_id === p));
  const tr = await adm.getTrends();
  assert.deepEqual([tr.minute_s, tr.points.length, tr.points[tr.points.length - 1].sampled], [60, 60, true]);

  const creds = await w.listCredentials();
  assert.deepEqual(creds.items.map((c) => c.status), ["active"]);
  const extra = await adm.issueCredential({ project: p, agentId: "w" });
  assert.deepEqual(await adm.revokeCredential(extra.credential.credential_id, { project: p, agentId: "w" }), { ok: true });

  const a = await w.getAgent();
  assert.equal(a.capacity, 2);
  assert.equal(a.admitting, true);
  const r = await w.submitWorkMemoryReport("wm1", { summary: "s", records: [{ role: "observation", payload: { a: 1 }, source_refs: [] }] });
  assert.equal(r.agent_id, "w");
  assert.equal((await boss.drainAgent("w")).drained, true);
  assert.equal((await boss.resumeAgent("w")).drained, false);
  await w.heartbeatPresence();
  assert.deepEqual((await boss.replacePublicMetadata({ team: "blue" }, { agentId: "w" })).public_metadata, { team: "blue" });

  assert.equal(await w.claimTurn(), null);
  const tv = await dispatch(boss, "w", "k1", { tags: ["a"], priority: 2 });
  assert.equal(tv.priority, 2);
  assert.deepEqual(tv.tags, ["a"]);
  const c = await w.claimTurn({ waitS: 1 });
  assert.ok(c);
  assert.equal(c.turn.turn_id, tv.turn_id);
  assert.equal((await w.renewClaim(c.claim)).claim.token, c.claim.token);
  assert.equal((await w.appendSemanticRecord(c.claim, "note", { x: 1 })).turn_seq, 1);
  const kid = await w.dispatchTurn("w", "summarize", "kid", { parent_claim: c.claim });
  assert.equal((await w.turnLineage(kid.turn_id, { limit: 10 })).items.length, 2);
  assert.equal((await w.turnContext(tv.turn_id, { limit: 10 })).items.length, 1);
  assert.equal((await w.suspendTurn(c.claim)).state, "suspended");
  assert.equal((await boss.resumeTurn(tv.turn_id)).state, "queued");
  const c2 = await w.claimTurn({ waitS: 1 });
  assert.ok(c2);
  assert.equal((await boss.stopTurn(c2.turn.turn_id)).stop_requested, true);
  const fin = await w.finishTurn(c2.claim, { outcome: "stopped", final_payload: { done: true } });
  assert.equal(fin.state, "finished");
  assert.equal(fin.outcome, "stopped");
  assert.equal((await w.getTurn(tv.turn_id)).state, "finished");
  const retried = await boss.retryTurn(tv.turn_id);
  assert.equal(retried.retry_of, tv.turn_id);
  await assert.rejects(boss.retryTurn(tv.turn_id), tl.ConflictError);
  await w.reconcileExpiredClaims();

  // Waiting for input, answered with the input token alone.
  const c3 = await w.claimTurn({ waitS: 1 });
  assert.ok(c3);
  const sus = await w.suspendTurn(c3.claim, { awaiting_input: { prompt: "which?", schema: null } });
  assert.match(sus.input_token ?? "", /^tli_/);
  const anon = new Client({ baseUrl: s.url });
  assert.equal((await anon.provideTurnInput(sus.turn_id, { answer: 42 }, { inputToken: sus.input_token, project: p })).state, "queued");

  const stopped = await boss.bulkStopTurns({ filter: { target_agent_id: "w", state: "queued" }, reason: "test" });
  assert.ok(stopped.stopped.length >= 1);
  assert.equal(stopped.has_more, false);
  assert.equal((await boss.bulkRetryTurns({ filter: { target_agent_id: "w", outcome: "stopped" }, limit: 1 })).retried.length, 1);

  const tf = await w.turnFeed(tv.turn_id, { limit: 2 });
  assert.equal(tf.items.length, 2);
  assert.equal(tf.has_more, true);
  const af = await w.agentFeed({ after_ledger_seq: tf.items[0].ledger_seq });
  assert.ok(af.items[0].ledger_seq > tf.items[0].ledger_seq);
  assert.ok((await boss.projectFeed()).items.length > 0);
  assert.equal((await boss.listAgents({ enabled_only: true })).items.length, 2);
  assert.equal((await boss.listTurnOffers({ agent_id: "w" })).items.length, 1);
  assert.ok((await boss.listTurns({ state: "finished", tag: ["a"] })).items.length >= 1);

  const mat = await adm.requestAgentCredentialTokens("boot", { project: p });
  assert.equal(mat.profile.agent_id, "boot");
  for (const [i, redeem] of [anon.redeemJoin, anon.redeemJoinByoa].entries()) {
    const inv = await adm.createJoinInvite(`j${i}`, { profile_kind: "byoa", runtime_kind: "node", spec: { capacity: 1 }, project: p });
    assert.ok((await redeem.call(anon, inv.join_code)).agent_credential_token);
    await assert.rejects(anon.redeemJoin(inv.join_code), tl.TurnledgerError);
  }
});

test("errors", async () => {
  const p = "errors";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch"] });
  const w = await s.agent(p, "w");
  const e = await w.getTurn("nope").catch((x) => x);
  assert.ok(e instanceof tl.NotFoundError);
  assert.ok(e instanceof tl.TurnledgerError);
  assert.equal(e.status, 404);
  assert.equal(e.error, "NotFoundError");
  assert.ok(e.message);
  await assert.rejects(w.projectFeed(), tl.ForbiddenError);
  const bad = new Client({ baseUrl: s.url, project: p, agent: "w", token: "wrong" });
  await assert.rejects(bad.getAgent(), (x: any) => x instanceof tl.UnauthorizedError && x.status === 401);
  await assert.rejects(w.claimTurn({ waitS: 120 }), tl.ValidationError);
  await dispatch(boss, "w", "k");
  const c = await w.claimTurn();
  assert.ok(c);
  await assert.rejects(w.renewClaim({ ...c.claim, token: "forged" }), (x: any) => x instanceof tl.FencingError && x.status === 409);
  await assert.rejects(
    (async () => {
      for await (const _ of w.follow(Feed.project(p))) break;
    })(),
    tl.ForbiddenError,
  );
  assert.throws(() => new Client({ baseUrl: "not a url" }), TypeError);
});

test("an idempotency key answers the first result", async () => {
  const adm = s.admin();
  await s.agent("idem", "w");
  const key = tl.newIdempotencyKey();
  const first = await adm.issueCredential({ project: "idem", agentId: "w", idempotencyKey: key });
  const again = await adm.issueCredential({ project: "idem", agentId: "w", idempotencyKey: key });
  assert.deepEqual(again, first);
  const other = await adm.issueCredential({ project: "idem", agentId: "w", idempotencyKey: tl.newIdempotencyKey() });
  assert.notEqual(other.token, first.token);
});
