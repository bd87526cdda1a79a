// Starts a real `turnledger serve` for the tests: the binary is
// $TURNLEDGER_BIN, else it is built with `go build` from the repository
// root once per test run. Each Serve listens on a kernel-assigned loopback port with its own
// data directory and a random admin token; close() kills it.

import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, renameSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

import { Client, Worker, type Handler, type Turn, type WorkerOptions } from "../src/index.js";

// build-test/test/serve.js -> the repository root is four levels up.
const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "..", "..", "..", "..");

export function binary(): string {
  if (process.env.TURNLEDGER_BIN) return process.env.TURNLEDGER_BIN;
  // One build per test run, from the source as it is now: the test files of
  // one `node --test` run are children of one runner, whose pid names it.
  const dir = join(tmpdir(), `turnledger-ts-bin-${process.ppid}`);
  const out = join(dir, "turnledger");
  if (!existsSync(out)) {
    removeBuildsOfEndedRuns();
    mkdirSync(dir, { recursive: true });
    const tmp = `${out}.${process.pid}`;
    execFileSync("go", ["build", "-o", tmp, "./cmd/turnledger"], { cwd: repo, stdio: "inherit" });
    renameSync(tmp, out); // atomic: test files building at once each get a whole binary
  }
  return out;
}

// removeBuildsOfEndedRuns removes the binaries built for test runs whose
// runner is gone.
function removeBuildsOfEndedRuns(): void {
  for (const name of readdirSync(tmpdir())) {
    const m = /^turnledger-ts-bin-(\d+)$/.exec(name);
    if (!m || Number(m[1]) === process.ppid) continue;
    try {
      process.kill(Number(m[1]), 0); // still running
    } catch {
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  }
}

export class Serve {
  readonly url: string;
  readonly adminToken: string;
  readonly #proc: ChildProcess;
  readonly #data: string;

  private constructor(url: string, adminToken: string, proc: ChildProcess, data: string) {
    this.url = url;
    this.adminToken = adminToken;
    this.#proc = proc;
    this.#data = data;
  }

  static async start(...args: string[]): Promise<Serve> {
    const data = mkdtempSync(join(tmpdir(), "turnledger-ts-"));
    const token = randomBytes(16).toString("hex");
    const proc = spawn(binary(), ["serve", "--addr", "127.0.0.1:0", "--data", data, "--sync", "interval", "--log-level", "warn", ...args], {
      env: { ...process.env, TURNLEDGER_ADMIN_TOKEN: token },
      stdio: ["ignore", "pipe", "ignore"],
    });
    const lines = createInterface({ input: proc.stdout! });
    const url = await new Promise<string>((ok, fail) => {
      const t = setTimeout(() => fail(new Error("turnledger serve did not start")), 30_000);
      lines.on("line", (line) => {
        const m = /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
        if (m) {
          clearTimeout(t);
          ok(m[1]);
        }
      });
      proc.on("exit", () => fail(new Error("turnledger serve exited")));
    });
    return new Serve(url, token, proc, data);
  }

  // The helpers' clients retry a 503 or a lost answer after its Retry-After
  // (with a key): a loaded CI machine may make the ledger answer 503 once. A
  // client given a fault-injecting fetch retries nothing itself, so the test
  // sees what the worker does.
  admin(): Client {
    return new Client({ baseUrl: this.url, adminToken: this.adminToken, retries: 3 });
  }

  /** Registers an agent, issues it a credential, returns a client as it. */
  async agent(project: string, agent: string, o: { capacity?: number; grants?: string[]; fetch?: typeof fetch } = {}): Promise<Client> {
    const adm = this.admin();
    await adm.registerAgent({ agent_id: agent, capacity: o.capacity ?? 1, capabilities: ["summarize"], grants: o.grants ?? [] }, { project });
    const cred = await adm.issueCredential({ project, agentId: agent });
    return new Client({ baseUrl: this.url, project, agent, token: cred.token, fetch: o.fetch, retries: o.fetch ? 0 : 3 });
  }

  async close(): Promise<void> {
    if (this.#proc.exitCode === null) {
      const exited = new Promise((ok) => this.#proc.once("exit", ok));
      this.#proc.kill("SIGKILL");
      await exited;
    }
    rmSync(this.#data, { recursive: true, force: true });
  }
}

/** Waits for cond, polling; fails with what after timeoutMs. */
export async function until(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out after ${timeoutMs}ms waiting for ${what}`);
}

export function dispatch(c: Client, target: string, key: string, o: Parameters<Client["dispatchTurn"]>[3] = {}): Promise<Turn> {
  return c.dispatchTurn(target, "summarize", key, { input: { text: key }, ...o });
}

export async function outcome(c: Client, turnId: string): Promise<string | null> {
  return (await c.getTurn(turnId)).outcome;
}

export async function events(c: Client, turnId: string): Promise<string[]> {
  return (await c.turnFeed(turnId, { limit: 500 })).items.map((it) => it.type);
}

export const quiet = { warn() {}, error() {} };

/** Runs a worker with short waits and delays; stop() ends it and answers what run() threw (undefined after a shutdown). */
export function start(c: Client, h: Handler, o: WorkerOptions = {}): { worker: Worker; done: Promise<unknown>; stop: () => Promise<unknown> } {
  const worker = new Worker(c, h, { waitS: 1, retryDelayS: 0.01, logger: quiet, ...o });
  const done = worker.run().then(() => undefined, (e) => e);
  return { worker, done, stop: () => (worker.stop(), done) };
}
