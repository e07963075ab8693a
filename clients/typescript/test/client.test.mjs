// The TypeScript client against a real guardian on a real Redis.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { createServer as createHttpServer } from "node:http";

import {
  Client, DEFAULT_FIRST_CALL_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, GuardianError, Policy, Responder, RULE_LOCAL_ACCOUNT, UnavailableError,
  fileToken, fingerprint, proceed, NoBreachedFilterError, passwordSHA1,
} from "../guardian.mjs";
import { BREACHED, Fleet, NETWORK_RULES, ROOT, RULES, freePort } from "./fleet.mjs";

const account = () => `user-${randomBytes(6).toString("hex")}@example.com`;
const IP = "203.0.113.7";

describe("against guardian", () => {
  let fleet;
  before(async () => { fleet = await Fleet.start(); });
  after(async () => { await fleet?.close(); });
  const client = (tokens = fleet.checkToken) => new Client(fleet.url, { tokens, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });

  test("allow", async () => {
    const d = await client().check({ flow: "login", ip: IP, account: account() });
    assert.equal(d.decision, "allow");
    assert.ok(proceed(d));
    assert.ok(d.attemptId);
    assert.equal(d.degraded, false);
    assert.equal(d.unavailable, false);
    assert.deepEqual(d.limits.map((l) => [l.rule, l.remaining]), [["ct-account", 1]]);
    assert.equal(new Responder().refuse(d), null);
  });

  test("a repeated wrong password costs the account once", async () => {
    const c = client(), user = account();
    const fp = fingerprint("the auth service's fingerprint key", "last year's password");
    let d = await c.check({ flow: "login", ip: IP, account: user, secretFingerprint: fp });
    assert.equal(d.repeatGuess, false);
    await c.report(d.attemptId, "failure");
    d = await c.check({ flow: "login", ip: IP, account: user, secretFingerprint: fp });
    assert.equal(d.repeatGuess, true);
    assert.deepEqual(d.limits.map((l) => [l.rule, l.remaining]), [["ct-account", 1]]);
    assert.equal((await client(fleet.adminToken).accountStatus(user)).rememberedGuesses, 1);
  });

  test("past 20 free repeats a day, a repeat counts", async () => {
    const c = client(), user = account();
    const fp = fingerprint("the auth service's fingerprint key", "a constant fingerprint");
    await c.report((await c.check({ flow: "login", ip: IP, account: user, secretFingerprint: fp })).attemptId, "failure");
    for (let i = 0; i < 20; i++) {
      const d = await c.check({ flow: "login", ip: IP, account: user, secretFingerprint: fp });
      assert.deepEqual([d.decision, d.repeatGuess, d.repeatCapped], ["allow", true, false]);
    }
    const d = await c.check({ flow: "login", ip: IP, account: user, secretFingerprint: fp });
    assert.deepEqual([d.decision, d.repeatGuess, d.repeatCapped], ["allow", false, true]);
    assert.deepEqual(d.limits.map((l) => [l.rule, l.remaining]), [["ct-account", 0]]);
  });

  test("familiar networks count apart in the account status", async () => {
    const { url } = await fleet.startGuardian(NETWORK_RULES, "networks.log");
    const c = new Client(url, { tokens: fleet.checkToken, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });
    const admin = new Client(url, { tokens: fleet.adminToken, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });
    const user = account();
    assert.deepEqual((await admin.accountStatus(user)).networks, []);
    // The owner's success makes 198.51.100.0/24 familiar; failures from
    // another of its addresses count there, not for other networks.
    await c.report((await c.check({ flow: "login", ip: "198.51.100.7", account: user })).attemptId, "success");
    for (let i = 0; i < 3; i++) {
      await c.report((await c.check({ flow: "login", ip: "198.51.100.9", account: user })).attemptId, "failure");
    }
    const s = await admin.accountStatus(user);
    assert.deepEqual([s.consecutiveFailures, s.blocked], [0, false]);
    assert.equal(s.networks.length, 1);
    assert.match(s.networks[0].network, /^h-[A-Za-z0-9_-]{22}$/);
    assert.deepEqual([s.networks[0].consecutiveFailures, s.networks[0].blocked], [3, true]);
    assert.equal((await c.check({ flow: "login", ip: "198.51.100.9", account: user })).decision, "block");
    assert.equal((await c.check({ flow: "login", ip: IP, account: user })).decision, "allow");
  });

  test("deny and allow lists", async () => {
    const { url } = await fleet.startGuardian(NETWORK_RULES, "lists.log");
    const c = new Client(url, { tokens: fleet.checkToken, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });
    const admin = new Client(url, { tokens: fleet.adminToken, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });
    const user = account();
    const denied = await admin.addDeny({ account: user, ttl: "1h", reason: "incident 7" });
    assert.ok(denied.id);
    assert.match(denied.expiresAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const d = await c.check({ flow: "login", ip: IP, account: user });
    assert.deepEqual([d.decision, d.rule], ["block", "deny-list"]);
    assert.ok(d.retryAfterMs > 0);

    const allowed = await admin.addAllow({ network: "192.0.2.0/28", exempt: ["ct-ip"], reason: "office NAT" });
    assert.equal(allowed.expiresAt, null);
    const ls = await admin.lists();
    const deny = ls.deny.find((e) => e.id === denied.id);
    // The account only as its pseudonym.
    assert.match(deny.account, /^h-[A-Za-z0-9_-]{22}$/);
    assert.ok(!JSON.stringify(ls).includes(user));
    assert.deepEqual([deny.network, deny.reason, deny.expiresAt, deny.subject, deny.source], ["", "incident 7", denied.expiresAt, "client-test", "api"]);
    const allow = ls.allow.find((e) => e.id === allowed.id);
    assert.deepEqual([allow.network, allow.exempt, allow.reason, allow.expiresAt], ["192.0.2.0/28", ["ct-ip"], "office NAT", null]);

    // An allow entry never lifts an account's limits.
    await assert.rejects(admin.addAllow({ network: "192.0.2.0/28", exempt: ["ct-hard-stop"] }),
      (e) => e instanceof GuardianError && e.status === 400 && e.code === "invalid_field");

    await admin.deleteListEntry(denied.id);
    await admin.deleteListEntry(allowed.id);
    assert.equal((await c.check({ flow: "login", ip: IP, account: user })).decision, "allow");
    const left = await admin.lists();
    assert.deepEqual([...left.deny, ...left.allow].filter((e) => e.id === denied.id || e.id === allowed.id), []);
    await assert.rejects(admin.deleteListEntry(denied.id), (e) => e instanceof GuardianError && e.status === 404);
  });

  test("slow with Retry-After", async () => {
    const c = client(), user = account();
    for (let i = 0; i < 2; i++) assert.equal((await c.check({ flow: "login", ip: IP, account: user })).decision, "allow");
    const d = await c.check({ flow: "login", ip: IP, account: user });
    assert.deepEqual([d.decision, d.rule, d.unavailable], ["slow", "ct-account", false]);
    assert.ok(!proceed(d));
    assert.ok(d.retryAfterMs > 0);
    assert.match(d.rateLimitPolicy, /"ct-account"/);

    const r = new Responder().refuse(d);
    assert.equal(r.status, 429);
    assert.equal(r.headers["Retry-After"], String(Math.ceil(d.retryAfterMs / 1000)));
    assert.equal(r.headers["RateLimit-Policy"], d.rateLimitPolicy);
    assert.deepEqual(JSON.parse(r.body), { error: "too_many_attempts", next: "wait" });
    const quiet = new Responder({ slowAsInvalid: true }).refuse(d);
    assert.equal(quiet.status, 401);
    assert.equal(quiet.headers["Retry-After"], undefined);
    assert.equal(quiet.headers.RateLimit, undefined);
    assert.equal(quiet.body, new Responder({ slowAsInvalid: true }).invalidCredentials(d).body);

    // The verified reset lifts it (admin scope).
    const admin = client(fleet.adminToken);
    assert.equal((await admin.accountStatus(user)).limits[0].remaining, 0);
    await admin.resetAccount(user);
    assert.equal((await c.check({ flow: "login", ip: IP, account: user })).decision, "allow");
  });

  test("report twice: 409", async () => {
    const c = client(), user = account();
    const d = await c.check({ flow: "login", ip: IP, account: user });
    const first = await c.report(d.attemptId, "success");
    assert.ok(first.deviceToken);
    await assert.rejects(c.report(d.attemptId, "success"), (e) => e instanceof GuardianError && e.status === 409 && e.alreadyReported);
    // The device token keeps a budget of its own for the account.
    assert.equal((await c.check({ flow: "login", ip: IP, account: user })).decision, "allow");
    assert.equal((await c.check({ flow: "login", ip: IP, account: user })).decision, "slow");
    assert.equal((await c.check({ flow: "login", ip: IP, account: user, deviceToken: first.deviceToken })).decision, "allow");
  });

  test("a refused request is no decision", async () => {
    await assert.rejects(client().check({ flow: "login", ip: "300.1.1.1", account: account() }),
      (e) => e instanceof GuardianError && e.status === 400 && e.code === "invalid_ip");
    await assert.rejects(client().report("forged", "failure"), (e) => e instanceof GuardianError && e.invalidAttempt);
  });

  test("a token file is read again when it changes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "guardian-token-"));
    try {
      const path = join(dir, "token");
      writeFileSync(path, "not-a-token\n");
      const c = client(fileToken(path, { intervalMs: 0 }));
      await assert.rejects(c.check({ flow: "login", ip: IP, account: account() }), (e) => e instanceof GuardianError && e.status === 401);
      writeFileSync(path, fleet.checkToken + "\n");
      assert.equal((await c.check({ flow: "login", ip: IP, account: account() })).decision, "allow");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("attempt: allowed, verified, reported", async () => {
    const c = client(), user = account(), calls = [];
    const a = await c.attempt({ flow: "login", ip: IP, account: user }, {
      onChallenge: () => { calls.push("challenge"); return true; },
      verify: async () => { calls.push("verify"); return true; },
    });
    assert.deepEqual([a.decision.decision, a.verified, a.ok, calls, a.reportError], ["allow", true, true, ["verify"], null]);
    assert.ok(a.deviceToken);
    // The success was reported: its device token has a budget of its own.
    for (let i = 0; i < 2; i++) await c.check({ flow: "login", ip: IP, account: user });
    assert.equal((await c.check({ flow: "login", ip: IP, account: user, deviceToken: a.deviceToken })).decision, "allow");
  });

  test("attempt: slowed, nothing verified", async () => {
    const c = client(), user = account(), calls = [];
    for (let i = 0; i < 2; i++) await c.check({ flow: "login", ip: IP, account: user });
    const a = await c.attempt({ flow: "login", ip: IP, account: user }, {
      onChallenge: () => { calls.push("challenge"); return true; },
      verify: () => { calls.push("verify"); return true; },
    });
    assert.deepEqual([a.decision.decision, a.verified, calls], ["slow", false, []]);
    assert.equal(new Responder().refuse(a.decision).status, 429);
  });

  test("attempt needs both steps", async () => {
    const c = client();
    await assert.rejects(c.attempt({ flow: "login", ip: IP, account: account() }, { verify: () => true }), TypeError);
    await assert.rejects(c.attempt({ flow: "login", ip: IP, account: account() }, { onChallenge: () => true }), TypeError);
    await assert.rejects(c.attempt({ flow: "login", ip: IP, account: account() }), TypeError);
    assert.equal(c.stats.checks, 0);
  });

  test("a function gives the token", async () => {
    let calls = 0;
    const c = client(async () => { calls++; return fleet.checkToken; });
    assert.equal((await c.check({ flow: "login", ip: IP, account: account() })).decision, "allow");
    assert.equal(calls, 1);
  });

  test("a password check without a filter is unknown, never a no", async () => {
    // This fleet serves no breached-password filter.
    await assert.rejects(client().checkPassword("hunter2"),
      (e) => e instanceof NoBreachedFilterError && e instanceof GuardianError && e.status === 404 && e.code === "not_found");
    // A check with passwordSHA1 is decided as usual, breached unknown.
    const d = await client().check({ flow: "login", ip: IP, account: account(), passwordSHA1: passwordSHA1("hunter2") });
    assert.deepEqual([d.decision, d.breached], ["allow", null]);
  });
});

describe("breached passwords", () => {
  let fleet;
  before(async () => { fleet = await Fleet.start(RULES, { breached: BREACHED }); });
  after(async () => { await fleet?.close(); });
  const client = (tokens = fleet.checkToken) => new Client(fleet.url, { tokens, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });

  test("every listed password is breached", async () => {
    const listed = readFileSync(BREACHED, "utf8").split("\n").filter((l) => l.trim());
    assert.ok(listed.length > 0);
    for (const p of listed) {
      assert.equal(await client().checkPassword(p), true, p);
      assert.equal(await client().checkPassword(new TextEncoder().encode(p)), true, p);
    }
    // Not in the list, and not one of the 1 in 256 false positives of this filter.
    assert.equal(await client().checkPassword("a password nobody has breached yet"), false);
    assert.equal(await client(fleet.adminToken).checkPassword("hunter2"), true);
  });

  test("only the hash is sent", async () => {
    assert.equal(passwordSHA1("password"), "5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8");
    assert.equal(passwordSHA1("café"), passwordSHA1(new TextEncoder().encode("café")));
    const seen = [];
    const spy = async (url, init) => { seen.push(init.body); return fetch(url, init); };
    const c = new Client(fleet.url, { tokens: fleet.checkToken, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000, fetch: spy });
    assert.equal(await c.checkPassword("hunter2"), true);
    assert.deepEqual(seen, [JSON.stringify({ sha1: passwordSHA1("hunter2") })]);
    assert.ok(!fleet.log().includes(passwordSHA1("hunter2")));
  });

  test("a check carries passwordSHA1 only when given, and answers breached", async () => {
    const c = client();
    for (const [pw, want] of [["hunter2", true], ["a password nobody has breached yet", false]]) {
      const d = await c.check({ flow: "login", ip: IP, account: account(), passwordSHA1: passwordSHA1(pw) });
      assert.deepEqual([d.decision, d.breached], ["allow", want], pw);
    }
    assert.equal((await c.check({ flow: "login", ip: IP, account: account() })).breached, null);
    const a = await c.attempt({ flow: "login", ip: IP, account: account(), passwordSHA1: passwordSHA1("hunter2") },
      { onChallenge: () => false, verify: () => true });
    assert.deepEqual([a.verified, a.decision.breached], [true, true]);
    assert.ok(!fleet.log().includes(passwordSHA1("hunter2")));
  });

  test("a refused token is a GuardianError", async () => {
    await assert.rejects(client("not-a-token").checkPassword("hunter2"),
      (e) => e instanceof GuardianError && !(e instanceof NoBreachedFilterError) && e.status === 401);
  });
});

describe("guardian down: each policy decides", () => {
  let url;
  before(async () => { url = `http://127.0.0.1:${await freePort()}`; });
  const client = (onUnavailable, opts = {}) => new Client(url, { tokens: "t", onUnavailable, timeoutMs: 2000, ...opts });

  test("no policy is refused", () => {
    assert.throws(() => new Client(url, { tokens: "t" }), TypeError);
    assert.throws(() => new Client(url, { tokens: "t", onUnavailable: "open" }), TypeError);
  });

  test("fail closed", async () => {
    const c = client(Policy.FAIL_CLOSED);
    const d = await c.check({ flow: "login", ip: IP, account: account() });
    assert.deepEqual([d.decision, d.retryAfterMs, d.unavailable, d.reason], ["slow", 1000, true, "connection"]);
    assert.equal(new Responder().refuse(d).headers["Retry-After"], "1");
    assert.equal(c.stats.failedOpen, 0);
  });

  test("fail open", async () => {
    const c = client(Policy.FAIL_OPEN);
    const d = await c.check({ flow: "login", ip: IP, account: account() });
    assert.deepEqual([d.decision, d.attemptId, d.unavailable], ["allow", "", true]);
    assert.equal((await c.report(d.attemptId, "failure")).deviceToken, "");
    assert.deepEqual(c.stats, { checks: 1, unavailable: 1, failedOpen: 1 });
  });

  test("local", async () => {
    const c = client(Policy.LOCAL, { local: { account: { burst: 2, everyMs: 60000 } } });
    const user = account();
    const first = await c.check({ flow: "login", ip: "203.0.113.7", account: user });
    const second = await c.check({ flow: "login", ip: "203.0.113.8", account: user });
    assert.deepEqual([first.decision, second.decision], ["allow", "allow"]);
    assert.ok(first.attemptId.startsWith("local:"));
    const third = await c.check({ flow: "login", ip: "203.0.113.9", account: user.toUpperCase() });
    assert.deepEqual([third.decision, third.rule, third.unavailable], ["slow", RULE_LOCAL_ACCOUNT, true]);
    assert.ok(third.retryAfterMs > 0);
    // A success gives its reservation back.
    await c.report(first.attemptId, "success");
    assert.equal((await c.check({ flow: "login", ip: IP, account: user })).decision, "allow");
  });

  test("local, after a flood", async () => {
    // A flood of new accounts from new addresses fills the tables; fresh
    // users are allowed after it, and an account slowed for longer than
    // the flood's keys stays slowed.
    const c = client(Policy.LOCAL, { local: { account: { burst: 2, everyMs: 60000 }, maxKeys: 50 } });
    const user = account();
    for (let i = 0; i < 2; i++) assert.equal((await c.check({ flow: "login", ip: "203.0.113.7", account: user })).decision, "allow");
    for (let i = 0; i < 500; i++) {
      await c.check({ flow: "login", ip: `198.51.100.${i % 250}`, account: `flood-${i}@example.com` });
      if (i % 10 === 0) assert.equal((await c.check({ flow: "login", ip: "203.0.113.7", account: user })).decision, "slow");
    }
    for (let i = 0; i < 10; i++) {
      const d = await c.check({ flow: "login", ip: `192.0.2.${i}`, account: account() });
      assert.deepEqual([d.decision, d.unavailable], ["allow", true]);
    }
  });

  test("a password check rejects: no policy decides it", async () => {
    await assert.rejects(client(Policy.FAIL_OPEN).checkPassword("hunter2"), (e) => e instanceof UnavailableError && e.reason === "connection");
  });

  test("report and admin calls reject", async () => {
    const c = client(Policy.FAIL_CLOSED);
    await assert.rejects(c.report("an-attempt", "failure"), (e) => e instanceof UnavailableError && e.reason === "connection");
    await assert.rejects(c.resetAccount("alice"), UnavailableError);
  });

  test("timeout", async () => {
    // Accepts connections and never answers.
    const sockets = [];
    const s = createServer((sock) => sockets.push(sock));
    await new Promise((r) => s.listen(0, "127.0.0.1", r));
    try {
      const c = new Client(`http://127.0.0.1:${s.address().port}`, { tokens: "t", onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 200 });
      const d = await c.check({ flow: "login", ip: IP, account: account() });
      assert.deepEqual([d.decision, d.unavailable, d.reason], ["slow", true, "timeout"]);
    } finally {
      sockets.forEach((x) => x.destroy());
      await new Promise((r) => s.close(r));
    }
  });
});

describe("Redis down: guardian's own fallback decides, degraded", () => {
  test("degraded", async () => {
    const fleet = await Fleet.start();
    try {
      const c = new Client(fleet.url, { tokens: fleet.checkToken, onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 5000 });
      assert.equal((await c.check({ flow: "login", ip: IP, account: account() })).degraded, false);
      await fleet.stopRedis();
      const user = account();
      const got = [];
      for (let i = 0; i < 3; i++) got.push(await c.check({ flow: "login", ip: IP, account: user }));
      assert.deepEqual(got.map((d) => d.decision), ["allow", "allow", "slow"], fleet.log());
      assert.ok(got.every((d) => d.degraded && !d.unavailable));
      assert.equal(got[2].rule, "ct-account");
    } finally {
      await fleet.close();
    }
  });
});

test("proceed: allow, or a challenge already passed", () => {
  const d = (decision, challengePassed = false) => ({ decision, challengePassed, rule: "", retryAfterMs: 0, rateLimitPolicy: "", rateLimit: "" });
  for (const [x, want] of [[d("allow"), true], [d("challenge"), false], [d("challenge", true), true], [d("slow"), false], [d("block"), false]]) {
    assert.equal(proceed(x), want, JSON.stringify(x));
    assert.equal(new Responder().refuse(x) === null, want, JSON.stringify(x));
  }
  assert.equal(new Responder().refuse(d("challenge")).status, 401);
});

test("the first-call allowance", async () => {
  // Answers after 300 ms: longer than timeoutMs, far shorter than the allowance.
  const srv = createHttpServer((req, res) => {
    req.resume();
    req.on("end", () => setTimeout(() => {
      if (res.destroyed) return;
      res.setHeader("Content-Type", "application/json");
      res.end('{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}');
    }, 300));
  });
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  try {
    const c = new Client(`http://127.0.0.1:${srv.address().port}`, { tokens: "t", onUnavailable: Policy.FAIL_CLOSED, timeoutMs: 100, firstCallTimeoutMs: 10000 });
    // Five first calls at once: none has ended when the others start.
    const first = await Promise.all([1, 2, 3, 4, 5].map(() => c.check({ flow: "login", ip: IP, account: account() })));
    for (const d of first) assert.deepEqual([d.decision, d.unavailable], ["allow", false]);
    const later = await c.check({ flow: "login", ip: IP, account: account() });
    assert.deepEqual([later.unavailable, later.reason], [true, "timeout"]);
  } finally {
    srv.closeAllConnections();
    await new Promise((r) => srv.close(r));
  }
});

test("the defaults are every client's", () => {
  const want = JSON.parse(readFileSync(join(ROOT, "client", "testdata", "defaults.json"), "utf8"));
  assert.equal(DEFAULT_TIMEOUT_MS, want.timeout_ms);
  assert.equal(DEFAULT_FIRST_CALL_TIMEOUT_MS, want.first_call_timeout_ms);
});

test("fingerprints match the shared vectors", () => {
  const { vectors } = JSON.parse(readFileSync(join(ROOT, "client", "testdata", "fingerprint.json"), "utf8"));
  assert.ok(vectors.length > 0);
  for (const v of vectors) {
    const got = fingerprint(v.key, v.secret);
    assert.equal(got, v.fingerprint, JSON.stringify(v));
    assert.equal(got, fingerprint(Buffer.from(v.key), Buffer.from(v.secret)));
    assert.match(got, /^[A-Za-z0-9_-]{43}$/);
  }
});
