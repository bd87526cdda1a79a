// The worker against a real serve: a hundred Turns with eight handlers at
// once, outcomes of failures and retries, renewals, graceful shutdown.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import * as tl from "../src/index.js";
import { Result } from "../src/index.js";
import { Serve, dispatch, events, outcome, start, until } from "./serve.js";

let s: Serve;
let short: Serve;
before(async () => {
  [s, short] = await Promise.all([Serve.start(), Serve.start("--claim-ttl", "1s")]);
});
after(async () => {
  await Promise.all([s.close(), short.close()]);
});

test("a hundred Turns, eight handlers: every Turn finished exactly once", async () => {
  const p = "hundred";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch", "projections:read"] });
  const w = await s.agent(p, "w", { capacity: 8 });
  const calls = new Map<string, number>();
  let running = 0;
  let most = 0;
  const r = start(
    w,
    async (job) => {
      calls.set(job.turn.turn_id, (calls.get(job.turn.turn_id) ?? 0) + 1);
      most = Math.max(most, ++running);
      await tl.sleep(20);
      running--;
      return { n: (job.input as any).text };
    },
    { concurrency: 8 },
  );
  const ids: string[] = [];
  try {
    for (let i = 0; i < 100; i++) ids.push((await dispatch(boss, "w", `t${i}`)).turn_id);
    await until("100 Turns finished", async () => (await boss.listTurns({ state: "finished", limit: 500 })).items.length === 100, 60_000);
  } finally {
    assert.equal(await r.stop(), undefined);
  }
  assert.deepEqual([...calls.keys()].sort(), [...ids].sort());
  assert.deepEqual(new Set(calls.values()), new Set([1]), "a handler ran twice for a Turn");
  assert.ok(most <= 8 && most > 1, `at most ${most} handlers ran at once`);
  const turns = (await boss.listTurns({ state: "finished", limit: 500 })).items;
  assert.deepEqual(new Set(turns.map((t) => t.outcome)), new Set(["succeeded"]));
  const feed: tl.FeedItem[] = [];
  for (let after = 0; ; ) {
    const page = await boss.projectFeed({ after_ledger_seq: after, limit: 500 });
    feed.push(...page.items);
    if (!page.has_more) break;
    after = page.next_after_ledger_seq;
  }
  for (const type of ["turn.claimed", "turn.finished"]) {
    const per = new Map<string, number>();
    for (const it of feed) if (it.type === type) per.set(it.id, (per.get(it.id) ?? 0) + 1);
    assert.equal(per.size, 100, type);
    assert.deepEqual(new Set(per.values()), new Set([1]), type);
  }
});

test("outcomes: failure, retry, an explicit Result, nothing", async () => {
  const p = "outcomes";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch"] });
  const w = await s.agent(p, "w");
  const r = start(w, async (job) => {
    switch (job.turn.dispatch_key) {
      case "fail":
        throw new Error("boom");
      case "retry":
        if (job.turn.attempts < 2) throw new tl.Retry("later");
        return { attempt: job.turn.attempts };
      case "result":
        return new Result({ outcome: "failed", final_payload: { why: "chosen" }, final_record_role: "verdict" });
    }
    return undefined;
  });
  try {
    const fail = await dispatch(boss, "w", "fail");
    const retry = await dispatch(boss, "w", "retry", { retry_backoff: { initial_s: 0.1 } });
    const result = await dispatch(boss, "w", "result");
    const plain = await dispatch(boss, "w", "plain");
    for (const [tv, want] of [[fail, "failed"], [retry, "succeeded"], [result, "failed"], [plain, "succeeded"]] as const) {
      await until(`${tv.dispatch_key} finished`, async () => (await outcome(boss, tv.turn_id)) === want);
    }
    assert.deepEqual((await boss.getTurn(fail.turn_id)).final_payload, { error: "boom" });
    const got = await boss.getTurn(retry.turn_id);
    assert.equal(got.attempts, 2);
    assert.deepEqual(got.final_payload, { attempt: 2 });
    assert.ok((await events(boss, retry.turn_id)).includes("turn.retry_scheduled"));
    const res = await boss.getTurn(result.turn_id);
    assert.equal(res.final_record_role, "verdict");
    assert.deepEqual(res.final_payload, { why: "chosen" });
    assert.equal((await boss.getTurn(plain.turn_id)).final_payload, null);
  } finally {
    await r.stop();
  }
});

test("renews its claims and shuts down gracefully", async () => {
  const p = "renew";
  const boss = await short.agent(p, "boss", { grants: ["turns:dispatch"] });
  const w = await short.agent(p, "w");
  let started!: () => void;
  const isStarted = new Promise<void>((ok) => (started = ok));
  let release!: () => void;
  const released = new Promise<void>((ok) => (release = ok));
  const r = start(w, async () => {
    started();
    await released;
    return { ok: true };
  });
  const tv = await dispatch(boss, "w", "k");
  await isStarted;
  await until("three renewals", async () => (await events(boss, tv.turn_id)).filter((e) => e === "turn.claim_renewed").length >= 3);
  r.worker.stop();
  const other = await dispatch(boss, "w", "after");
  const early = await Promise.race([r.done.then(() => "returned"), tl.sleep(300).then(() => "running")]);
  assert.equal(early, "running", "run() returned while a handler was running");
  release();
  assert.equal(await r.done, undefined);
  assert.equal(await outcome(boss, tv.turn_id), "succeeded");
  assert.equal((await boss.getTurn(other.turn_id)).state, "queued");
});

test("the shutdown grace aborts a running handler's signal", async () => {
  const p = "grace";
  const boss = await s.agent(p, "boss", { grants: ["turns:dispatch"] });
  const w = await s.agent(p, "w");
  let started!: () => void;
  const isStarted = new Promise<void>((ok) => (started = ok));
  let cause: string | undefined;
  const r = start(
    w,
    async (job) => {
      started();
      await new Promise((ok) => job.signal.addEventListener("abort", ok));
      cause = job.cause;
      job.throwIfCancelled();
    },
    { shutdownGraceS: 0.2 },
  );
  const tv = await dispatch(boss, "w", "k");
  await isStarted;
  const t0 = Date.now();
  assert.equal(await r.stop(), undefined);
  assert.ok(Date.now() - t0 >= 190);
  assert.equal(cause, "shutdown");
  const after = await boss.getTurn(tv.turn_id); // its claim handed back: queued again, the attempt not counted
  assert.deepEqual([after.state, after.attempts], ["queued", 0]);
});

test("run(signal): aborting the signal shuts the worker down; presence shows online", async () => {
  const w = await s.agent("presence", "w");
  assert.equal((await w.getAgent()).presence, "never");
  const ctl = new AbortController();
  const worker = new tl.Worker(w, async () => null, { waitS: 1, logger: { warn() {}, error() {} } });
  const done = worker.run(ctl.signal);
  await until("the agent online", async () => (await w.getAgent()).presence === "online");
  ctl.abort();
  assert.equal(await done, undefined);
});
