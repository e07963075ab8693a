// A real guardian on a real Redis, both on loopback, for the client's tests.
// guardian is the binary in GUARDIAN_BIN (`make test-clients` builds it
// once), or built here with `go build`; Redis is a redis-server of its own
// with no persistence.

import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, closeSync } from "node:fs";
import { get as httpGet } from "node:http";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

// The rules every client test runs, shared with the Python client.
export const RULES = join(ROOT, "clients", "testdata", "rules.yaml");
// Rules that learn an account's familiar networks, where it counts its
// consecutive failures apart, with an address rule for allow list entries,
// shared with the Python client.
export const NETWORK_RULES = join(ROOT, "clients", "testdata", "networks.yaml");
// Rules that challenge a password sprayed over accounts, for the README's
// snippets.
export const CHALLENGE_RULES = join(ROOT, "clients", "testdata", "challenge.yaml");
// The breached-password list of a fleet that serves one, shared with the
// Python client.
export const BREACHED = join(ROOT, "clients", "testdata", "breached.txt");

export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.on("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, cond, ms = 15000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await sleep(20);
  }
  throw new Error(`${what} did not come up within ${ms} ms`);
}

// ready asks /readyz with node:http, not fetch: the test process's fetch
// stays as cold as a fresh one's.
const ready = (url) => new Promise((ok) => {
  const req = httpGet(`${url}/readyz`, (res) => { res.resume(); ok(res.statusCode === 200); });
  req.on("error", () => ok(false));
});

const connects = (port) => new Promise((ok) => {
  const c = connect(port, "127.0.0.1", () => { c.destroy(); ok(true); });
  c.on("error", () => ok(false));
});

/**
 * A redis-server and a guardian serving on it; close() stops both.
 * startGuardian() starts more guardians on the same Redis. With breached, a
 * plain password list, every guardian of the fleet also serves a
 * breached-password filter built from it.
 */
export class Fleet {
  static async start(rules = RULES, { breached = "" } = {}) {
    const f = new Fleet();
    f.breached = breached;
    try {
      await f.#start(rules);
    } catch (e) {
      await f.close();
      throw e;
    }
    return f;
  }

  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), "guardian-client-test-"));
    this.procs = [];
  }

  async #start(rules) {
    this.binary = process.env.GUARDIAN_BIN;
    if (!this.binary) {
      this.binary = join(this.dir, "guardian");
      execFileSync("go", ["build", "-o", this.binary, "./cmd/guardian"], { cwd: ROOT, stdio: "inherit" });
    }
    this.keyFile = join(this.dir, "signing-key");
    writeFileSync(this.keyFile, randomBytes(32).toString("hex"));
    this.redisPort = await freePort();
    this.redis = this.#spawn("redis-server", ["--port", String(this.redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
      "--dir", this.dir], "redis.log");
    await waitFor("redis-server", () => connects(this.redisPort));

    this.filter = "";
    if (this.breached) {
      this.filter = join(this.dir, "breached.bgf");
      execFileSync(this.binary, ["breached", "build", "--format", "plain", "--out", this.filter, this.breached], { stdio: "ignore" });
    }
    ({ proc: this.guardian, url: this.url } = await this.startGuardian(rules));
    this.checkToken = this.token("check");
    this.adminToken = this.token("admin");
  }

  /**
   * Starts a guardian on the fleet's Redis (and its breached-password filter,
   * if any), ready (/readyz 200): {proc, url}.
   */
  async startGuardian(rules = RULES, log = "guardian.log") {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const proc = this.#spawn(this.binary, ["serve", "--addr", `127.0.0.1:${port}`, "--redis-url", `redis://127.0.0.1:${this.redisPort}/0`,
      "--signing-key-file", this.keyFile, "--rules", rules, "--store-timeout", "250ms", "--log-format", "text",
      ...(this.filter ? ["--breached", this.filter] : [])], log);
    await waitFor("guardian", () => ready(url));
    return { proc, url };
  }

  /** Stops one process the fleet started. */
  async stop(p) {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill("SIGTERM");
      const t = setTimeout(() => p.kill("SIGKILL"), 5000);
      await p.exited;
      clearTimeout(t);
    }
  }

  #spawn(cmd, args, log) {
    const fd = openSync(join(this.dir, log), "w");
    const p = spawn(cmd, args, { stdio: ["ignore", fd, fd] });
    closeSync(fd);
    p.exited = new Promise((r) => p.on("exit", r));
    this.procs.push(p);
    return p;
  }

  token(scope) {
    return execFileSync(this.binary, ["token", "--scope", scope, "--subject", "client-test", "--signing-key-file", this.keyFile],
      { encoding: "utf8" }).trim();
  }

  async stopRedis() {
    this.redis.kill("SIGKILL");
    await this.redis.exited;
  }

  log(name = "guardian.log") {
    return readFileSync(join(this.dir, name), "utf8");
  }

  async close() {
    for (const p of this.procs.reverse()) await this.stop(p);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
