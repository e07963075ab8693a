// Every JavaScript and TypeScript snippet of the READMEs and docs, run as
// written against a real guardian whose rules challenge a sprayed password.
//
// A snippet may use, besides the client (imported by its package name), only
// what an auth service has of its own: app (an Express-like router),
// loadSecret, secondFactorOk, verifyPassword and storePassword (given here),
// and GUARDIAN_URL and GUARDIAN_CHECK_TOKEN_FILE in the environment. A
// snippet that serves POST /login is then driven through a spray: it must
// never verify the sprayed password once guardian challenges it, unless its
// challenge branch ran and was passed. A snippet that serves POST /password
// must refuse, and never store, a password guardian's breached-password
// filter holds.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { after, before, describe, test } from "node:test";

import { BREACHED, CHALLENGE_RULES, Fleet, ROOT } from "./fleet.mjs";

// Where client snippets live: every Markdown file of the checkout's docs.
const DOCS = [join(ROOT, "README.md"), join(ROOT, "clients", "typescript", "README.md"),
  ...readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => join(ROOT, "docs", f))];
const BLOCK = /^```(?:js|javascript|ts|typescript)\n([\s\S]*?)^```/gm;

// The spray: the rules challenge a sprayed password past its 3rd failure.
const BURST = 3;
const ACCOUNTS = 12;

function snippets() {
  const out = [];
  for (const path of DOCS) {
    for (const m of readFileSync(path, "utf8").matchAll(BLOCK)) out.push({ where: relative(ROOT, path), source: m[1] });
  }
  return out;
}

/** The auth service around a snippet: its users, its second factor, its routes, and a log of what the snippet called. */
class Host {
  constructor(sprayed) {
    this.sprayed = sprayed;
    // bob's password is the one being sprayed; his second factor 135790.
    this.passwords = { "bob@example.com": sprayed, "alice@example.com": "correct horse" };
    this.codes = { "bob@example.com": "135790" };
    this.calls = [];
    this.routes = {};
    this.app = { post: (path, handler) => { this.routes[`POST ${path}`] = handler; } };
    this.loadSecret = () => Buffer.from("the auth service's fingerprint key, 32 bytes or more");
    this.secondFactorOk = (user, code) => {
      this.calls.push(["challenge", user]);
      return !!code && this.codes[user] === code;
    };
    this.verifyPassword = async (user, password) => {
      this.calls.push(["verify", user]);
      return this.passwords[user] === password;
    };
    this.storePassword = async (user) => {
      this.calls.push(["store", user]);
    };
  }
}

/** An Express-like response that records what was sent. */
function response() {
  const r = { statusCode: 200, headers: {}, cookies: {}, body: undefined };
  r.status = (s) => { r.statusCode = s; return r; };
  r.set = (h) => { Object.assign(r.headers, h); return r; };
  r.cookie = (name, value) => { r.cookies[name] = value; return r; };
  r.send = (b) => { r.body = b; return r; };
  return r;
}

const request = (username, password, ip, code) => ({ body: { username, password, code }, socket: { remoteAddress: ip }, cookies: {} });

/** Drives POST /login through a spray and returns what it did wrong. */
async function spray(host) {
  const login = host.routes["POST /login"];
  const problems = [];
  const call = async (label, req, wantStatus, wantCalls) => {
    host.calls = [];
    const res = response();
    await login(req, res);
    if (res.statusCode !== wantStatus || JSON.stringify(host.calls) !== JSON.stringify(wantCalls)) {
      problems.push(`${label}: ${res.statusCode} ${JSON.stringify(res.body)} after ${JSON.stringify(host.calls)}, want ${wantStatus} after ${JSON.stringify(wantCalls)}`);
    }
  };
  for (let i = 0; i < ACCOUNTS; i++) {
    const user = `user-${i}@example.com`;
    const req = request(user, host.sprayed, `10.${i}.0.1`);
    if (i < BURST) await call(`spray ${i + 1}, before the challenge`, req, 401, [["verify", user]]);
    else await call(`spray ${i + 1}, challenged`, req, 401, [["challenge", user]]);
  }
  const bob = "bob@example.com";
  await call("bob without his second factor", request(bob, host.sprayed, "10.200.0.1"), 401, [["challenge", bob]]);
  await call("bob with a wrong second factor", request(bob, host.sprayed, "10.201.0.1", "000000"), 401, [["challenge", bob]]);
  await call("bob with his second factor", request(bob, host.sprayed, "10.202.0.1", "135790"), 200, [["challenge", bob], ["verify", bob]]);
  return problems;
}

/**
 * Changes a password through POST /password to one the filter holds, then to
 * one of this run alone, and returns what the route did wrong.
 */
async function change(host) {
  const route = host.routes["POST /password"];
  const problems = [];
  for (const [label, password, stored] of [["a breached password", "hunter2", false], ["a password of its own", host.sprayed, true]]) {
    host.calls = [];
    const res = response();
    await route({ body: { username: "alice@example.com", password }, socket: { remoteAddress: "10.250.0.1" }, cookies: {} }, res);
    const didStore = JSON.stringify(host.calls) === JSON.stringify([["store", "alice@example.com"]]);
    if ((res.statusCode === 200) !== stored || didStore !== stored) {
      problems.push(`${label}: ${res.statusCode} ${JSON.stringify(res.body)} after ${JSON.stringify(host.calls)}, want it ${stored ? "" : "not "}stored`);
    }
  }
  return problems;
}

// A password change that never asks guardian: the check below must catch it.
const CHANGES_UNCHECKED = `
app.post("/password", async (req, res) => {
  await storePassword(req.body.username, req.body.password);
  return res.status(200).send({ changed: true });
});
`;

// A login that skips guardian's challenges: it refuses only slow and block.
// The check below must catch it, or it could not catch a README that did.
const SKIPS_CHALLENGES = `
import { Client, Policy, Responder, fileToken, fingerprint } from "@guardian-sec/guardian-client";
const guardian = new Client(process.env.GUARDIAN_URL, { tokens: fileToken(process.env.GUARDIAN_CHECK_TOKEN_FILE), onUnavailable: Policy.LOCAL });
const PEPPER = loadSecret("fingerprint-key");
app.post("/login", async (req, res) => {
  const { username, password } = req.body;
  const d = await guardian.check({ flow: "login", ip: req.socket.remoteAddress, account: username, secretFingerprint: fingerprint(PEPPER, password) });
  if (d.decision === "slow" || d.decision === "block") {
    const r = new Responder().refuse(d);
    return res.status(r.status).set(r.headers).send(r.body);
  }
  const ok = await verifyPassword(username, password);
  await guardian.report(d.attemptId, ok ? "success" : "failure");
  return res.status(ok ? 200 : 401).send({});
});
`;

describe("snippets", () => {
  let fleet, dir, tokenFile, n = 0;
  before(async () => {
    fleet = await Fleet.start(CHALLENGE_RULES, { breached: BREACHED });
    dir = mkdtempSync(join(tmpdir(), "guardian-snippets-"));
    tokenFile = join(dir, "check-token");
    writeFileSync(tokenFile, fleet.checkToken);
    // The snippets import the client by its package name, as a service
    // that installed it does.
    mkdirSync(join(dir, "node_modules", "@guardian-sec"), { recursive: true });
    symlinkSync(join(ROOT, "clients", "typescript"), join(dir, "node_modules", "@guardian-sec", "guardian-client"), "dir");
  });
  after(async () => {
    await fleet?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // runSnippet runs source as a module of the auth service and returns its host.
  async function runSnippet(source) {
    const host = new Host(`Winter-${randomBytes(4).toString("hex")}!`); // a password of this run alone
    globalThis.guardianSnippetHost = host;
    process.env.GUARDIAN_URL = fleet.url;
    process.env.GUARDIAN_CHECK_TOKEN_FILE = tokenFile;
    const file = join(dir, `snippet-${++n}.mjs`);
    writeFileSync(file, "const { app, loadSecret, secondFactorOk, verifyPassword, storePassword } = globalThis.guardianSnippetHost;\n" + source);
    await import(pathToFileURL(file).href);
    return host;
  }

  test("every snippet runs and never skips a challenge", async () => {
    const found = snippets();
    assert.ok(found.some((s) => s.where === join("clients", "typescript", "README.md")), "clients/typescript/README.md has no js snippet");
    let logins = 0, changes = 0;
    for (const { where, source } of found) {
      const host = await runSnippet(source);
      if (host.routes["POST /login"]) {
        logins++;
        assert.deepEqual(await spray(host), [], `${where}: ${source.split("\n")[0]}`);
      }
      if (host.routes["POST /password"]) {
        changes++;
        assert.deepEqual(await change(host), [], `${where}: ${source.split("\n")[0]}`);
      }
    }
    assert.ok(logins > 0, "no snippet serves POST /login");
    assert.ok(changes > 0, "no snippet serves POST /password");
  });

  test("the check catches a change that stores a breached password", async () => {
    const host = await runSnippet(CHANGES_UNCHECKED);
    const problems = await change(host);
    assert.ok(problems.some((p) => p.startsWith("a breached password")), JSON.stringify(problems));
  });

  test("the check catches a snippet that skips challenges", async () => {
    const host = await runSnippet(SKIPS_CHALLENGES);
    const problems = await spray(host);
    assert.ok(problems.some((p) => p.includes("challenged")), JSON.stringify(problems));
  });
});
