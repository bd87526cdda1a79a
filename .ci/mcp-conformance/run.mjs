// Runs the MCP conformance suite's server scenarios against a real
// `turnledger serve`, for each protocol era the MCP endpoint serves, with the
// expected failures of baseline-<era>.yml. Run by .ci/mcp-conformance.sh with
// the Node (>= 22) it installs; needs TURNLEDGER_BIN (the serve binary) and
// CONFORMANCE (the suite's dist/index.js).
//
// The suite sends no credentials, and the endpoint is one agent's, behind its
// bearer token: a loopback proxy in front of serve adds the agent's
// Authorization header to every request and changes nothing else (the Host
// and Origin headers reach serve as the suite sent them, for the DNS
// rebinding scenario).

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const bin = process.env.TURNLEDGER_BIN;
const conformance = process.env.CONFORMANCE;
if (!bin || !conformance) {
  console.error("run.mjs needs TURNLEDGER_BIN and CONFORMANCE");
  process.exit(2);
}
// The eras the endpoint serves (docs/mcp.md); MCP_CONFORMANCE_ERAS narrows them.
const eras = (process.env.MCP_CONFORMANCE_ERAS || "2025-11-25,2026-07-28").split(",");
const project = "conformance";
const agent = "conformance";

// serve starts `turnledger serve` on a kernel-assigned loopback port and
// answers its URL once it prints it.
function serve(data, adminToken) {
  const proc = spawn(bin, ["serve", "--addr", "127.0.0.1:0", "--data", data, "--sync", "interval", "--log-level", "warn"], {
    env: { ...process.env, TURNLEDGER_ADMIN_TOKEN: adminToken },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const url = new Promise((ok, fail) => {
    const t = setTimeout(() => fail(new Error("turnledger serve did not start within 60s")), 60_000);
    createInterface({ input: proc.stdout }).on("line", (line) => {
      const m = /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
      if (m) {
        clearTimeout(t);
        ok(m[1]);
      }
    });
    proc.on("exit", (code) => fail(new Error(`turnledger serve exited (${code})`)));
  });
  return { proc, url };
}

async function admin(base, adminToken, path, body) {
  const resp = await fetch(base + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${adminToken}` },
    body: JSON.stringify(body ?? {}),
  });
  const text = await resp.text();
  if (resp.status !== 200) throw new Error(`POST ${path}: ${resp.status} ${text}`);
  return JSON.parse(text);
}

// proxy listens on a loopback port and forwards every request to target
// with the bearer token added.
function proxy(target, token) {
  const t = new URL(target);
  const server = http.createServer((req, res) => {
    const headers = { ...req.headers };
    if (!headers.authorization) headers.authorization = `Bearer ${token}`;
    const up = http.request({ host: t.hostname, port: t.port, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.rawHeaders);
      ur.pipe(res);
    });
    up.on("error", (err) => {
      if (!res.headersSent) res.writeHead(502, { "Content-Type": "text/plain" });
      res.end(`proxy: ${err.message}`);
    });
    // A client that goes away (the end of an SSE stream) ends the upstream request too.
    res.on("close", () => up.destroy());
    req.pipe(up);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

function run(args) {
  return new Promise((ok) => {
    const p = spawn(process.execPath, [conformance, ...args], { stdio: "inherit" });
    p.on("exit", (code, signal) => ok(code ?? (signal ? 1 : 0)));
  });
}

const data = mkdtempSync(join(tmpdir(), "turnledger-mcp-conformance-"));
const adminToken = randomBytes(16).toString("hex");
const s = serve(data, adminToken);
let px;
let failed = false;
try {
  const base = await s.url;
  await admin(base, adminToken, `/v3r1/projects/${project}/agents:register`, {
    spec: {
      agent_id: agent, role: "worker", description: "the MCP conformance suite", enabled: true, accepts_work: true,
      capacity: 1, capabilities: ["summarize"], grants: ["turns:dispatch"], public_metadata: {},
    },
    provenance: { kind: "ci", external_ref: "mcp-conformance", payload_hash: null },
  });
  const { token } = await admin(base, adminToken, `/v3r1/projects/${project}/agents/${agent}/credentials:issue`);
  px = await proxy(base, token);
  const endpoint = `http://127.0.0.1:${px.address().port}/mcp/projects/${project}/agents/${agent}`;
  for (const era of eras) {
    console.log(`--- MCP conformance, server scenarios required for ${era}, against ${endpoint}`);
    // MCP_CONFORMANCE_RESULTS keeps each scenario's checks.json there.
    const out = join(process.env.MCP_CONFORMANCE_RESULTS || data, `results-${era}`);
    const code = await run(["server", "--url", endpoint, "--requirements", era,
      "--expected-failures", join(here, `baseline-${era}.yml`), "-o", out]);
    if (code !== 0) {
      console.error(`--- MCP conformance ${era}: exit ${code} (an unexpected failure, or a baseline entry that now passes)`);
      failed = true;
    }
  }
} catch (err) {
  console.error(err);
  failed = true;
} finally {
  px?.closeAllConnections();
  px?.close();
  s.proc.kill("SIGTERM");
  await new Promise((ok) => (s.proc.exitCode !== null ? ok() : s.proc.on("exit", ok)));
  rmSync(data, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
