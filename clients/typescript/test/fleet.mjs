// A real guardian on a real Redis, both on loopback, for the client's tests.
// guardian is the binary in GUARDIAN_BIN (`make test-clients` builds it
// once), or built here with `go build`; Redis is a redis-server of its own
// with no persistence.

import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, closeSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

// The rules every client test runs, shared with the Python client.
const RULES = join(ROOT, "clients", "testdata", "rules.yaml");
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

const connects = (port) => new Promise((ok) => {
  const c = connect(port, "127.0.0.1", () => { c.destroy(); ok(true); });
  c.on("error", () => ok(false));
});

/**
 * A redis-server and a guardian serving on it; close() stops both. With
 * breached, a plain password list, guardian also serves a breached-password
 * filter built from it.
 */
export class Fleet {
  static async start({ breached = "" } = {}) {
    const f = new Fleet();
    f.breached = breached;
    try {
      await f.#start();
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

  async #start() {
    this.binary = process.env.GUARDIAN_BIN;
    if (!this.binary) {
      this.binary = join(this.dir, "guardian");
      execFileSync("go", ["build", "-o", this.binary, "./cmd/guardian"], { cwd: ROOT, stdio: "inherit" });
    }
    this.keyFile = join(this.dir, "signing-key");
    writeFileSync(this.keyFile, randomBytes(32).toString("hex"));
    const rules = RULES;

    const redisPort = await freePort();
    this.redis = this.#spawn("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
      "--dir", this.dir], "redis.log");
    await waitFor("redis-server", () => connects(redisPort));

    const port = await freePort();
    this.url = `http://127.0.0.1:${port}`;
    const extra = [];
    if (this.breached) {
      const bgf = join(this.dir, "breached.bgf");
      execFileSync(this.binary, ["breached", "build", "--format", "plain", "--out", bgf, this.breached], { stdio: "ignore" });
      extra.push("--breached", bgf);
    }
    this.guardian = this.#spawn(this.binary, ["serve", "--addr", `127.0.0.1:${port}`, "--redis-url", `redis://127.0.0.1:${redisPort}/0`,
      "--signing-key-file", this.keyFile, "--rules", rules, "--store-timeout", "250ms", "--log-format", "text", ...extra], "guardian.log");
    await waitFor("guardian", async () => {
      try {
        return (await fetch(`${this.url}/readyz`)).status === 200;
      } catch {
        return false;
      }
    });
    this.checkToken = this.token("check");
    this.adminToken = this.token("admin");
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
    for (const p of this.procs.reverse()) {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill("SIGTERM");
        const t = setTimeout(() => p.kill("SIGKILL"), 5000);
        await p.exited;
        clearTimeout(t);
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
