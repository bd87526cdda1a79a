// A fetch that sees every request on its way to the real server and can
// answer in its place, lose an answer after the server decided, or cut open
// event streams — the TypeScript twin of the Go tests' RoundTrippers.

import { IDEMPOTENCY_HEADER } from "../src/index.js";

export type Fail = (n: number) => Response | Error | undefined;

export function answer(status: number, name: string, retryAfter?: string): Response {
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  if (retryAfter) headers["Retry-After"] = retryAfter;
  return new Response(JSON.stringify({ error: name, message: "test" }), { status, headers });
}

const watched = [":finish", "/semantic-records", "/claims:claim", "/claims:renew"];

export class Faults {
  readonly sent = new Map<string, { key: string; at: number; body: any }[]>();
  readonly fail = new Map<string, Fail>();
  readonly loseFirst = new Set<string>();
  loseFirstClaim = false;
  readonly lost = new Map<string, string>();
  readonly block = new Set<string>();
  #streams: AbortController[] = [];
  streamsOpened = 0;

  keys(suffix: string): string[] {
    return (this.sent.get(suffix) ?? []).map((s) => s.key);
  }
  times(suffix: string): number[] {
    return (this.sent.get(suffix) ?? []).map((s) => s.at);
  }
  bodies(suffix: string): any[] {
    return (this.sent.get(suffix) ?? []).map((s) => s.body);
  }

  /** Cuts every open event stream, as a network failure would. */
  cut(): void {
    const s = this.#streams;
    this.#streams = [];
    for (const c of s) c.abort(new TypeError("test: the stream was cut"));
  }

  readonly fetch: typeof fetch = async (input, init = {}) => {
    const url = String(input);
    const headers = (init.headers ?? {}) as Record<string, string>;
    if (headers.Accept === "text/event-stream") {
      const ctl = new AbortController();
      init.signal?.addEventListener("abort", () => ctl.abort(init.signal?.reason), { once: true });
      this.#streams.push(ctl);
      this.streamsOpened++;
      return fetch(input, { ...init, signal: ctl.signal });
    }
    const path = url.split("?")[0];
    const suf = watched.find((s) => path.endsWith(s));
    if (!suf) return fetch(input, init);
    const list = this.sent.get(suf) ?? [];
    this.sent.set(suf, list);
    const n = list.length;
    list.push({ key: headers[IDEMPOTENCY_HEADER] ?? "", at: Date.now(), body: init.body ? JSON.parse(String(init.body)) : null });
    if (this.block.has(suf)) throw new TypeError("fetch failed (test: blocked)");
    const f = this.fail.get(suf)?.(n);
    if (f instanceof Error) throw f;
    if (f) return f;
    const resp = await fetch(input, init);
    const text = await resp.text();
    if (resp.status === 200 && !this.lost.has(suf)) {
      if (this.loseFirst.has(suf) || (suf === "/claims:claim" && this.loseFirstClaim && text.trim() !== "null")) {
        this.lost.set(suf, text);
        throw new TypeError("fetch failed (test: the answer was lost)");
      }
    }
    return new Response(text, { status: resp.status, headers: resp.headers });
  };
}
