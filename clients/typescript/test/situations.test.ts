// The situations of clients/situations.md, each as the Go client's tests
// have them, against a real serve: a lost claim, a stop request, a revoked
// credential, a 503 with Retry-After, a lost answer retried with its key, a
// lost claim answer, a feed broken mid-stream.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import * as tl from "../src/index.js";
import { Feed } from "../src/index.js";
import { Faults, answer } from "./faults.js";
import { Serve, dispatch, events, outcome, start, until } from "./serve.js";

let s: Serve;
let short: Serve; // claims of one second, expired claims reaped at once
before(async () => {
  [s, short] = await Promise.all([Serve.start(), Serve.start("--claim-ttl", "1s", "--reap-interval", "100ms")]);
});
after(async () => {
  await Promise.all([s.close(), short.close()]);
});

test("lost claim: FencingError ends the job without finishing", async () => {
  const p = "lost";
  const boss = await short.agent(p, "boss", { grants: ["turns:dispatch"] });
  const faults = new Faults();
  const w = await short.agent(p, "w", { fetch: faults.fetch });
  const seen: { token?: string; error?: unknown; cause?: string } = {};
  let runs = 0;
  const r = start(w, async (job) => {
    if (++runs > 1) return { second: true };
    faults.block.add("/claims:renew");
    await until("the Turn released by the reaper", async () => (await boss.getTurn(job.turn.turn_id)).state === "queued");
    seen.token = job.claim.token;
    try {
      await job.record("late", {});
    } catch (e) {
      seen.error = e;
      seen.cause = job.cause;
      faults.block.clear();
      throw e;
    }
    return { unexpected: true };
  });
  try {
    const tv = await dispatch(boss, "w", "k");
    await until("the Turn finished", async () => (await outcome(boss, tv.turn_id)) !== null);
    assert.ok(seen.error instanceof tl.FencingError, `the record after the loss threw ${seen.error}`);
    assert.equal(seen.cause, "claim_lost");
    assert.equal(await outcome(boss, tv.turn_id), "succeeded");
    assert.ok(!faults.bodies(":finish").some((b) => b.claim.token === seen.token), "the worker finished with the lost claim");
    const evs = await events(boss, tv.turn_id);
    assert.deepEqual(
      [evs.filter((e) => e === "turn.claimed").length, evs.filter((e) => e === "turn.claim_expired").length, evs.filter((e) => e === "turn.finished").length],
      [2, 1, 1],
      String(evs),
    );
  } finally {
    await r.stop();
  }
});

test("stop request: seen by the handler, finishes stopped", async () => {
  const p = "stop";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch", "management"] });
  const w = await s.agent(p, "w");
  let started!: () => void;
  const isStarted = new Promise<void>((ok) => (started = ok));
  const seen: { stopRequested?: boolean; cause?: string; reason?: unknown } = {};
  const r = start(w, async (job) => {
    started();
    while (!job.signal.aborted) {
      await job.record("tick", {});
      await tl.sleep(20, job.signal);
    }
    seen.stopRequested = job.stopRequested;
    seen.cause = job.cause;
    seen.reason = job.signal.reason;
    job.throwIfCancelled();
  });
  try {
    const tv = await dispatch(boss, "w", "k");
    await isStarted;
    await boss.stopTurn(tv.turn_id);
    await until("the Turn stopped", async () => (await outcome(boss, tv.turn_id)) === "stopped");
    assert.equal(seen.stopRequested, true);
    assert.equal(seen.cause, "stop_requested");
    assert.ok(seen.reason instanceof tl.Cancelled);
  } finally {
    await r.stop();
  }
});

test("revoked credential: the worker stops with that error", async () => {
  const p = "revoked";
  const faults = new Faults();
  const w = await s.agent(p, "w", { fetch: faults.fetch });
  const r = start(w, async () => null, { waitS: 0.2 });
  await until("the worker to claim", () => faults.keys("/claims:claim").length >= 1);
  const adm = s.admin();
  const cred = (await adm.listCredentials({ project: p, agentId: "w" })).items[0];
  await adm.revokeCredential(cred.credential_id, { project: p, agentId: "w" });
  const err = await Promise.race([r.done, tl.sleep(20_000).then(() => "still running")]);
  assert.ok(err instanceof tl.UnauthorizedError, `run() ended with ${err}`);
  assert.equal(err.status, 401);
});

test("503 with Retry-After: retried after the delay with the same key", async () => {
  const p = "unavailable";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch"] });
  const faults = new Faults();
  faults.fail.set("/claims:claim", (n) =>
    n === 0 ? answer(503, "ServiceUnavailableError", "1") : n === 1 ? new TypeError("fetch failed (test: refused)") : n === 2 ? answer(500, "InternalError") : undefined,
  );
  const w = await s.agent(p, "w", { fetch: faults.fetch });
  const tv = await dispatch(boss, "w", "k");
  const r = start(w, async () => null);
  try {
    await until("the Turn finished", async () => (await outcome(boss, tv.turn_id)) === "succeeded");
    const keys = faults.keys("/claims:claim");
    const at = faults.times("/claims:claim");
    assert.ok(keys.length >= 4);
    assert.ok(keys[0]);
    assert.deepEqual(keys.slice(1, 4), [keys[0], keys[0], keys[0]], "one key for the claim and its three retries");
    assert.ok(at[1] - at[0] >= 1000, `the claim after a 503 with Retry-After: 1 came after ${at[1] - at[0]}ms`);
  } finally {
    await r.stop();
  }
});

test("a retried finish after a lost answer: same key, same answer", async () => {
  const p = "lostanswer";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch"] });
  const faults = new Faults();
  faults.loseFirst.add("/semantic-records").add(":finish");
  const w = await s.agent(p, "w", { fetch: faults.fetch });
  const warnings: string[] = [];
  const r = start(
    w,
    async (job) => {
      await job.record("progress", { step: 1 });
      return { summary: "done" };
    },
    { presenceIntervalS: 0, logger: { warn: (m) => warnings.push(m), error: (m) => warnings.push(m) } },
  );
  const tv = await dispatch(boss, "w", "k1");
  await until("the Turn finished", async () => (await outcome(boss, tv.turn_id)) !== null);
  await r.stop();
  assert.equal(await outcome(boss, tv.turn_id), "succeeded");
  for (const suf of ["/semantic-records", ":finish"]) {
    const keys = faults.keys(suf);
    assert.equal(keys.length, 2, suf);
    assert.ok(keys[0]);
    assert.equal(keys[1], keys[0], suf);
  }
  assert.deepEqual(warnings, []);
  assert.deepEqual(await events(boss, tv.turn_id), ["turn.dispatched", "turn.claimed", "turn.record_appended", "turn.finished"]);
});

test("a lost claim answer: the retry gets the same claim", async () => {
  const p = "lostclaim";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch"] });
  const faults = new Faults();
  faults.loseFirstClaim = true;
  const w = await s.agent(p, "w", { capacity: 2, fetch: faults.fetch });
  const first = await dispatch(boss, "w", "first");
  const second = await dispatch(boss, "w", "second");
  const claims: tl.ClaimToken[] = [];
  const r = start(w, async (job) => {
    claims.push(job.claim);
    return null;
  });
  try {
    for (const tv of [first, second]) {
      await until("the Turns finished", async () => (await outcome(boss, tv.turn_id)) === "succeeded");
      assert.equal((await events(boss, tv.turn_id)).filter((e) => e === "turn.claimed").length, 1);
    }
    assert.ok(faults.lost.get("/claims:claim")!.includes(`"token":"${claims[0].token}"`));
    assert.equal(claims[0].turn_id, first.turn_id);
    const keys = faults.keys("/claims:claim");
    assert.equal(keys[1], keys[0]);
    assert.notEqual(keys[2], keys[0]);
  } finally {
    await r.stop();
  }
});

test("a feed broken mid-stream resumes with no gap or duplicate", async () => {
  const p = "follow";
  const faults = new Faults();
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch", "projections:read"], fetch: faults.fetch });
  const ctl = new AbortController();
  const got: [number, string][] = [];
  const following = (async () => {
    for await (const it of boss.follow(Feed.project(p), { signal: ctl.signal })) got.push([it.ledger_seq, it.type]);
  })();
  try {
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 5; i++) await dispatch(boss, "boss", `r${round}-${i}`);
      const n = (await boss.projectFeed({ limit: 500 })).items.length;
      await until(`${n} events followed`, () => got.length >= n);
      faults.cut();
    }
  } finally {
    ctl.abort();
    await following;
  }
  assert.ok(faults.streamsOpened >= 3, `${faults.streamsOpened} streams opened`);
  const want = (await boss.projectFeed({ limit: 500 })).items.map((it) => [it.ledger_seq, it.type]);
  assert.deepEqual(got, want);
});
