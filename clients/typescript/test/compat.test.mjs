// A client of this release against the previous release's API: during a
// rolling upgrade it meets guardian 0.1.0, which refuses a request with a
// field it does not know (400 unknown_field). What the client sends by
// default is never refused there; a newer field goes out only when the
// caller uses its feature. client/testdata/api-0.1.0.json lists the fields.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { test } from "node:test";

import { Client, GuardianError, Policy, fingerprint, passwordSHA1 } from "../guardian.mjs";
import { ROOT } from "./fleet.mjs";

const PREVIOUS = JSON.parse(readFileSync(join(ROOT, "client", "testdata", "api-0.1.0.json"), "utf8"));
const ALLOW = '{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}';
const CHALLENGED = '{"decision":"challenge","rule":"spray","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}';
const IP = "203.0.113.7";

/** A stand-in for the previous release; refused lists "PATH FIELD" of each refusal. */
async function oldGuardian(decision = ALLOW) {
  const g = { refused: [] };
  g.server = createServer((req, res) => {
    let raw = "";
    req.on("data", (c) => { raw += c; });
    req.on("end", () => {
      const body = raw ? JSON.parse(raw) : {};
      const answer = (status, doc) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(typeof doc === "string" ? doc : JSON.stringify(doc));
      };
      for (const k of Object.keys(body)) {
        if (!(PREVIOUS.requests[`${req.method} ${req.url}`] ?? []).includes(k)) {
          g.refused.push(`${req.url} ${k}`);
          return answer(400, { error: { code: "unknown_field", message: `${k}: unknown field` } });
        }
      }
      if (req.url === "/v1/check") return answer(/"(slow|block)"/.test(decision) ? 429 : 200, decision);
      if (req.url === "/v1/report") return answer(200, { recorded: true, device_token: "dev-old" });
      return answer(200, { reset: true });
    });
  });
  await new Promise((r) => g.server.listen(0, "127.0.0.1", r));
  g.url = `http://127.0.0.1:${g.server.address().port}`;
  g.close = () => new Promise((r) => { g.server.closeAllConnections(); g.server.close(r); });
  return g;
}

const client = (g) => new Client(g.url, { tokens: "t", onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });

test("every call with what it sends by default", async () => {
  const g = await oldGuardian();
  try {
    const c = client(g);
    for (const req of [
      { flow: "login", ip: IP, account: "alice@example.com", deviceToken: "dev-1" },
      { flow: "password_reset", ip: IP, account: "alice@example.com" },
      { flow: "otp_send", ip: IP, recipient: "+15550100000", cost: 2 },
      { flow: "otp_verify", ip: IP, recipient: "+15550100000" },
    ]) {
      assert.equal((await c.check(req)).unavailable, false, JSON.stringify(req));
    }
    await c.report("at-1", "success");
    await c.resetAccount("alice@example.com");
    const a = await c.attempt({ flow: "login", ip: IP, account: "alice@example.com" }, { onChallenge: () => false, verify: () => true });
    assert.deepEqual([a.verified, a.ok, a.deviceToken], [true, true, "dev-old"]);
    assert.deepEqual(g.refused, []);
  } finally {
    await g.close();
  }
});

test("a challenge passed goes ahead as that release says", async () => {
  const g = await oldGuardian(CHALLENGED);
  try {
    const a = await client(g).attempt({ flow: "login", ip: IP, account: "alice@example.com" }, { onChallenge: () => true, verify: () => true });
    assert.deepEqual([a.verified, a.ok, a.decision.attemptId], [true, true, "at-1"]);
    assert.deepEqual(g.refused, ["/v1/check challenge_passed"]);
  } finally {
    await g.close();
  }
});

test("a newer field only when used", async () => {
  for (const f of PREVIOUS.newer) assert.ok(!PREVIOUS.requests["POST /v1/check"].includes(f), f);
  const g = await oldGuardian();
  try {
    const c = client(g);
    await assert.rejects(c.check({ flow: "login", ip: IP, account: "a", secretFingerprint: fingerprint("k", "s") }), GuardianError);
    await assert.rejects(c.check({ flow: "login", ip: IP, account: "a", challengePassed: true }), GuardianError);
    await assert.rejects(c.check({ flow: "login", ip: IP, account: "a", passwordSHA1: passwordSHA1("hunter2") }), GuardianError);
    assert.deepEqual([...g.refused].sort(), PREVIOUS.newer.map((f) => `/v1/check ${f}`).sort());
  } finally {
    await g.close();
  }
});
