import { Client, newIdempotencyKey, sleep } from "./client.js";
import { Cancelled, FencingError, Retry, TurnledgerError, refusedForGood, retryable, type CancelCause } from "./errors.js";
import type * as T from "./types.js";

/** Where a worker reports what goes wrong (console by default). */
export interface Logger {
  warn(message: string, ...args: unknown[]): void;
  error(message: string, ...args: unknown[]): void;
}

/**
 * Calls `op(key)` with one fresh Idempotency-Key, again after `delayMs`
 * (doubling up to 5s; longer when the service asks with Retry-After) while it
 * fails with a retryable error, at most `attempts` times (0: until
 * `deadline`, a Date.now() value, or forever).
 */
export async function retryKeyed<R>(
  op: (key: string) => Promise<R>,
  o: { attempts?: number; delayMs?: number; deadline?: number; signal?: AbortSignal } = {},
): Promise<R> {
  const key = newIdempotencyKey();
  let delay = o.delayMs ?? 1000;
  for (let n = 1; ; n++) {
    try {
      return await op(key);
    } catch (e) {
      if (!retryable(e) || (o.attempts && n >= o.attempts)) throw e;
      const wait = Math.max(delay, e instanceof TurnledgerError && e.retryAfterS ? e.retryAfterS * 1000 : 0);
      if (o.deadline !== undefined && Date.now() + wait > o.deadline) throw e;
      if (await sleep(wait, o.signal)) throw e;
      delay = Math.min(delay * 2, 5000);
    }
  }
}

/**
 * What a handler may return to choose the outcome. A handler that returns a
 * JSON object (or nothing) finishes the Turn as succeeded with it as the
 * final payload.
 */
export class Result {
  readonly outcome: string;
  readonly final_payload: T.JsonObject | null;
  readonly final_record_role: string | undefined;
  constructor(o: { outcome?: string; final_payload?: T.JsonObject | null; final_record_role?: string } = {}) {
    this.outcome = o.outcome ?? "succeeded";
    this.final_payload = o.final_payload ?? null;
    this.final_record_role = o.final_record_role;
  }
}

/**
 * One claimed Turn handed to a handler. `signal` is aborted — its reason a
 * `Cancelled` whose `cause` says why — when a stop of the Turn is requested,
 * when the claim is lost, or when the worker's shutdown grace ends.
 */
export class Job {
  readonly turn: T.Turn;
  readonly client: Client;
  #claim: T.ClaimToken;
  #stopRequested = false;
  #cause: CancelCause | undefined;
  readonly #ctl = new AbortController();
  readonly #delayMs: number;
  /** @internal aborted when the handler returned: renewals end */
  readonly done = new AbortController();

  constructor(client: Client, res: T.ClaimResult, delayMs: number) {
    this.client = client;
    this.turn = res.turn;
    this.#claim = res.claim;
    this.#delayMs = delayMs;
  }

  /** The live claim (its expires_at moves as it is renewed). */
  get claim(): T.ClaimToken {
    return this.#claim;
  }

  /** The Turn's input. */
  get input(): T.Json {
    return this.turn.input;
  }

  /** Aborted when the job is cancelled (see the class doc). */
  get signal(): AbortSignal {
    return this.#ctl.signal;
  }

  /** Whether an operator asked to stop the Turn. */
  get stopRequested(): boolean {
    return this.#stopRequested;
  }

  /** Why the job was cancelled, or undefined. */
  get cause(): CancelCause | undefined {
    return this.#cause;
  }

  /** Throws a `Cancelled` when the job was cancelled. */
  throwIfCancelled(): void {
    if (this.#cause) throw new Cancelled(this.#cause);
  }

  /**
   * Appends a semantic record under the job's claim, sent with an
   * Idempotency-Key and sent again with it (up to 5 attempts) when the answer
   * is lost or the service unavailable, so it is appended once. An answer
   * with stop_requested cancels the job; a lost claim throws FencingError.
   */
  async record(role: string, payload: T.JsonObject): Promise<T.RecordResult> {
    const claim = this.#claim;
    let res: T.RecordResult;
    try {
      res = await retryKeyed((key) => this.client.appendSemanticRecord(claim, role, payload, { idempotencyKey: key }), {
        attempts: 5, delayMs: this.#delayMs,
      });
    } catch (e) {
      if (e instanceof FencingError) this.cancel("claim_lost");
      throw e;
    }
    if (res.stop_requested) this.markStop();
    return res;
  }

  /** The Turn's semantic records so far (every page). */
  async context(): Promise<T.ContextItem[]> {
    const items: T.ContextItem[] = [];
    let after = 0;
    for (;;) {
      const page = await this.client.turnContext(this.turn.turn_id, { after_turn_seq: after, project: this.turn.project_id });
      items.push(...page.items);
      if (!page.has_more || page.items.length === 0) return items;
      after = page.next_after_turn_seq;
    }
  }

  /** @internal */
  setClaim(c: T.ClaimToken): void {
    this.#claim = c;
  }

  /** @internal */
  markStop(): void {
    this.#stopRequested = true;
    this.cancel("stop_requested");
  }

  /** @internal */
  cancel(cause: CancelCause): void {
    if (this.#cause) return;
    this.#cause = cause;
    this.#ctl.abort(new Cancelled(cause));
  }
}

/** Does the work of one Turn; what it returns is sent as JSON (a plain object, or nothing, or a Result). */
export type Handler = (job: Job) => Promise<Record<string, unknown> | Result | null | undefined | void>;

export interface WorkerOptions {
  /** Turns run at once (default: the agent's capacity). */
  concurrency?: number;
  /** The long-poll wait of each claim, in seconds (default 30, at most 60). */
  waitS?: number;
  /** A claim is renewed when this fraction of its remaining lease has passed (default 1/3). */
  renewFraction?: number;
  /** How long a shutdown waits for running handlers before it cancels them (default 30s). */
  shutdownGraceS?: number;
  /** The pause before a claim, renewal, record or finish is sent again (default 1s; longer for a Retry-After). */
  retryDelayS?: number;
  /** How often the agent's presence is reported (default 30s; 0 turns it off). */
  presenceIntervalS?: number;
  /** Who works: the client's agent by default. */
  project?: string;
  agent?: string;
  logger?: Logger;
}

class Slots {
  #free: number;
  #waiters: (() => void)[] = [];
  constructor(n: number) {
    this.#free = n;
  }
  /** Takes a slot; false when signal aborted first. */
  acquire(signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const take = () => {
        signal.removeEventListener("abort", drop);
        resolve(true);
      };
      const drop = () => {
        this.#waiters = this.#waiters.filter((w) => w !== take);
        resolve(false);
      };
      this.#waiters.push(take);
      signal.addEventListener("abort", drop, { once: true });
    });
  }
  release(): void {
    const w = this.#waiters.shift();
    if (w) w();
    else this.#free++;
  }
}

/**
 * Claims the Turns of an agent and runs a handler for each, at most
 * `concurrency` at once — the loop of the Go client's Worker.
 *
 * The handler returns the final payload (a JSON object or nothing: outcome
 * succeeded) or a `Result`, or throws: the Turn finishes as failed with
 * `{error: "<message>"}`, as stopped when a stop was requested, and as failed
 * with `retry: true` for a `Retry`. After a lost claim (a renewal refused, or
 * a FencingError from the handler) or a shutdown the Turn is not finished
 * here.
 *
 * Claims are long polls of `waitS`; each claim is renewed when a third of its
 * remaining lease has passed. Claims, renewals, records and finishes are sent
 * again with their Idempotency-Key after a lost answer, a 5xx or a 429 (after
 * retryDelayS, or the service's Retry-After). A claim refused for good (the
 * 401 of a revoked credential, a 403, a 404) ends `run()` with that error.
 *
 * `run(signal)` resolves after a shutdown, started by aborting `signal` or by
 * `stop()`: it claims nothing more, gives running handlers shutdownGraceS to
 * finish their Turns, then aborts their `job.signal` (cause "shutdown": their
 * claims are handed back and the Turns queued again) and waits for them.
 */
export class Worker {
  readonly client: Client;
  readonly handler: Handler;
  readonly project: string;
  readonly agent: string;
  readonly #o: Required<Omit<WorkerOptions, "concurrency" | "project" | "agent">> & { concurrency?: number };
  readonly #stopping = new AbortController();
  readonly #jobs = new Set<Job>();

  constructor(client: Client, handler: Handler, o: WorkerOptions = {}) {
    this.client = client;
    this.handler = handler;
    const project = o.project ?? client.project;
    const agent = o.agent ?? client.agent;
    const errs: string[] = [];
    if (!project || !agent) errs.push("a worker needs a project and an agent (the client's, or project and agent)");
    if (o.concurrency !== undefined && o.concurrency < 1) errs.push("concurrency must be at least 1");
    if (o.waitS !== undefined && (o.waitS < 0 || o.waitS > 60)) errs.push("waitS must be 0 to 60");
    if (o.renewFraction !== undefined && !(o.renewFraction > 0 && o.renewFraction < 1)) errs.push("renewFraction must be in (0, 1)");
    if (errs.length) throw new TypeError("turnledger: " + errs.join("; "));
    this.project = project!;
    this.agent = agent!;
    this.#o = {
      concurrency: o.concurrency,
      waitS: o.waitS ?? 30,
      renewFraction: o.renewFraction ?? 1 / 3,
      shutdownGraceS: o.shutdownGraceS ?? 30,
      retryDelayS: o.retryDelayS ?? 1,
      presenceIntervalS: o.presenceIntervalS ?? 30,
      logger: o.logger ?? console,
    };
  }

  /** Starts the shutdown. */
  stop(): void {
    this.#stopping.abort();
  }

  /** Claims and runs Turns until stopped; see the class doc. */
  async run(signal?: AbortSignal): Promise<void> {
    const stopping = this.#stopping.signal;
    const onAbort = () => this.stop();
    if (signal?.aborted) this.stop();
    signal?.addEventListener("abort", onAbort, { once: true });
    const log = this.#o.logger;
    const running = new Set<Promise<void>>();
    let presence: Promise<void> = Promise.resolve();
    let refusal: unknown;
    try {
      const capacity = this.#o.concurrency ?? Math.max((await this.client.getAgent({ project: this.project, agentId: this.agent })).capacity, 1);
      const slots = new Slots(capacity);
      if (this.#o.presenceIntervalS > 0) presence = this.#presence();
      let key = newIdempotencyKey(); // one key for a claim and its retries
      while (!stopping.aborted) {
        if (!(await slots.acquire(stopping))) break;
        let res: T.ClaimResult | null;
        try {
          res = await this.client.claimTurn({
            project: this.project, agentId: this.agent, waitS: this.#o.waitS || undefined, idempotencyKey: key, signal: stopping,
          });
          key = newIdempotencyKey(); // answered: the next claim is a new one
        } catch (e) {
          slots.release();
          if (stopping.aborted) break;
          if (refusedForGood(e)) {
            log.error(`turnledger worker: the service refuses to give this agent work; stopping: ${e}`);
            refusal = e;
            break;
          }
          log.warn(`turnledger worker: claim: ${e}`);
          const ra = e instanceof TurnledgerError && e.retryAfterS ? e.retryAfterS : 0;
          await sleep(Math.max(this.#o.retryDelayS, ra) * 1000, stopping);
          continue;
        }
        if (!res) {
          slots.release();
          continue;
        }
        const job = new Job(this.client, res, this.#o.retryDelayS * 1000);
        this.#jobs.add(job);
        const p: Promise<void> = this.#runJob(job)
          .catch((e) => log.error(`turnledger worker: job ${job.turn.turn_id}: ${e}`))
          .finally(() => {
            this.#jobs.delete(job);
            running.delete(p);
            slots.release();
          });
        running.add(p);
      }
    } finally {
      this.stop();
      signal?.removeEventListener("abort", onAbort);
      const all = Promise.all(running);
      const grace = new AbortController();
      await Promise.race([all, sleep(this.#o.shutdownGraceS * 1000, grace.signal)]);
      grace.abort();
      for (const job of this.#jobs) job.cancel("shutdown");
      await all;
      await presence;
    }
    if (refusal !== undefined) throw refusal;
  }

  async #presence(): Promise<void> {
    const stopping = this.#stopping.signal;
    for (;;) {
      try {
        await this.client.heartbeatPresence({ project: this.project, agentId: this.agent, signal: stopping });
      } catch (e) {
        if (!stopping.aborted) this.#o.logger.warn(`turnledger worker: presence: ${e}`);
      }
      if (await sleep(this.#o.presenceIntervalS * 1000, stopping)) return;
    }
  }

  async #runJob(job: Job): Promise<void> {
    const log = this.#o.logger;
    const id = job.turn.turn_id;
    if (job.turn.stop_requested) job.markStop();
    const renewing = this.#renew(job);
    let result: unknown;
    let error: unknown;
    let failed = false;
    try {
      result = await this.handler(job);
    } catch (e) {
      failed = true;
      error = e;
    }
    job.done.abort();
    await renewing;
    if (error instanceof FencingError) job.cancel("claim_lost");
    if (job.cause === "claim_lost") {
      log.warn(`turnledger worker: the claim of Turn ${id} was lost; the Turn is not finished here`);
      return;
    }
    if (job.cause === "shutdown") {
      // Hand the claim back at once rather than let it expire: the Turn is
      // claimable again now, in its old place, the attempt not counted.
      try {
        await retryKeyed((key) => this.client.releaseClaim(job.claim, { idempotencyKey: key }), {
          delayMs: this.#o.retryDelayS * 1000, deadline: Date.now() + 10_000,
        });
      } catch (e) {
        log.warn(`turnledger worker: shutdown cancelled the handler of Turn ${id} and could not hand its claim back (${e}); it will expire`);
      }
      return;
    }
    let req: { outcome: string; final_payload: T.JsonObject | null; final_record_role?: string; retry?: boolean };
    if (failed) {
      const text = error instanceof Error ? error.message || error.name : String(error);
      req = job.stopRequested
        ? { outcome: "stopped", final_payload: { error: text } }
        : { outcome: "failed", final_payload: { error: text }, retry: error instanceof Retry || undefined };
    } else if (result instanceof Result) {
      req = { outcome: result.outcome, final_payload: result.final_payload, final_record_role: result.final_record_role };
    } else if (result === undefined || result === null || (typeof result === "object" && !Array.isArray(result))) {
      req = { outcome: "succeeded", final_payload: (result ?? null) as T.JsonObject | null };
    } else {
      req = { outcome: "failed", final_payload: { error: `the handler returned a ${typeof result}, not an object, nothing or a Result` } };
    }
    req.final_record_role ||= "final";
    // The finish is sent again with one Idempotency-Key while its answer is
    // lost or the service unavailable, for up to 30s: a retry after a lost
    // answer gets that answer, not a fencing error for a Turn it finished.
    try {
      await retryKeyed((key) => this.client.finishTurn(job.claim, { ...req, idempotencyKey: key }), {
        delayMs: this.#o.retryDelayS * 1000, deadline: Date.now() + 30_000,
      });
    } catch (e) {
      log.warn(`turnledger worker: finish Turn ${id} (${req.outcome}): ${e}`);
    }
  }

  async #renew(job: Job): Promise<void> {
    let failures = 0;
    let key = "";
    for (;;) {
      const left = Date.parse(job.claim.expires_at) - Date.now();
      let wait = left * this.#o.renewFraction;
      if (failures) wait = Math.min(wait, this.#o.retryDelayS * 1000);
      if (await sleep(Math.max(wait, 10), job.done.signal)) return;
      if (failures === 0) key = newIdempotencyKey();
      try {
        const res = await this.client.renewClaim(job.claim, { idempotencyKey: key });
        failures = 0;
        job.setClaim(res.claim);
        if (res.stop_requested && !job.stopRequested) job.markStop();
      } catch (e) {
        if (job.done.signal.aborted) return;
        if (refusedForGood(e)) {
          job.cancel("claim_lost");
          return;
        }
        failures++; // the server or the network: try again soon, until the lease runs out
        if (Date.parse(job.claim.expires_at) <= Date.now()) {
          job.cancel("claim_lost");
          return;
        }
      }
    }
  }
}
