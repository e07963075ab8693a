// guardian's client for Node auth services (Node 18 or later): node:http
// and node:crypto only. Types are in guardian.d.ts. A login is one
// call, attempt(): check, guardian's challenge (a function the caller must
// give), verify, report; README.md shows a login handler (a test runs it).
//
// guardian decides what happens when its own store fails; this client makes
// the auth service decide what happens when guardian fails: onUnavailable has
// no default, and check() never throws "guardian is down" for the caller to
// forget about, it returns the decision of that policy with unavailable set.

import { createHash, createHmac, randomBytes } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { Agent as HttpAgent, request as httpRequest } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import { isIP } from "node:net";

/** What check() decides when guardian does not answer. */
export const Policy = Object.freeze({
  /** Slow, for closedRetryAfterMs: nothing is verified while guardian is down. */
  FAIL_CLOSED: "fail_closed",
  /** Allow: logins go on unprotected; counted in stats.failedOpen. */
  FAIL_OPEN: "fail_open",
  /** An in-process limiter per account and per address: never an open door. */
  LOCAL: "local",
});

/**
 * Deadline of one call, its retry included: the same in the Go, Python and
 * TypeScript clients. guardian answers in about a millisecond and waits at
 * most its --store-timeout (5ms) on Redis; 100ms leaves room for a network
 * hop, a pause and a retry on a busy host, and is about what hashing one
 * password costs, so a guardian that hangs delays a login by no more than
 * verifying it does.
 */
export const DEFAULT_TIMEOUT_MS = 100;
/**
 * Deadline of the calls made before the client's first call ended (every
 * client's): a first call pays for its connection and guardian's first
 * request on it (and, with a fetch option, for Node loading its fetch: 100 to
 * 800ms measured on a busy host); under FAIL_CLOSED a first call that timed
 * out is a real user refused after every restart.
 */
export const DEFAULT_FIRST_CALL_TIMEOUT_MS = 1000;
export const DEFAULT_CLOSED_RETRY_AFTER_MS = 1000;
export const RULE_LOCAL_ACCOUNT = "local-account";
export const RULE_LOCAL_IP = "local-ip";
const PROXY_RETRY_AFTER_MS = 1000;
// The most of an answer the client reads; guardian's are far smaller.
const MAX_ANSWER = 1 << 20;
const LOCAL_PREFIX = "local:";
const LOCAL_ATTEMPT_TTL_MS = 600_000;
// How many of a full table's oldest keys the LOCAL policy looks at to pick
// the one it forgets.
const EVICT_SAMPLE = 8;

/** A request guardian refused (4xx other than 429): never a decision. */
export class GuardianError extends Error {
  constructor(status, code = "", message = "") {
    super(`guardian refused the request: ${code || `status ${status}`}${message ? `: ${message}` : ""}`);
    this.name = "GuardianError";
    this.status = status;
    this.code = code;
    this.detail = message;
  }
  get alreadyReported() { return this.code === "already_reported"; }
  get invalidAttempt() { return this.code === "invalid_attempt"; }
}

/** guardian did not answer a report or an admin call. */
export class UnavailableError extends Error {
  constructor(reason, detail = "") {
    super(`guardian unavailable (${reason})${detail ? `: ${detail}` : ""}`);
    this.name = "UnavailableError";
    this.reason = reason;
  }
}

class Unavailable {
  constructor(reason, detail) { this.reason = reason; this.detail = detail; }
}

/**
 * checkPassword() could not be answered: guardian has no breached-password
 * filter that can (none loaded, or one of NTLM hashes; 404). Nothing was
 * looked up: "unknown", never "not breached".
 */
export class NoBreachedFilterError extends GuardianError {
  constructor(status, code = "", message = "") {
    super(status, code, message);
    this.name = "NoBreachedFilterError";
  }
}

/**
 * The SHA-1 of a password (UTF-8) in hex: what checkPassword() sends in
 * place of the password, which never leaves the auth service.
 */
export function passwordSHA1(password) {
  return createHash("sha1").update(typeof password === "string" ? Buffer.from(password, "utf8") : password).digest("hex");
}

// Token sources ------------------------------------------------------------

/** Always the same token, such as one printed by `guardian token`. */
export function staticToken(token) {
  return () => token;
}

/**
 * A token read from a file (a mounted secret), read again when the file
 * changes, checked at most every intervalMs: rotating it needs no restart.
 */
export function fileToken(path, { intervalMs = 1000, now = Date.now } = {}) {
  let token = "", stamp = "", checked = -Infinity, pending = null;
  const refresh = async () => {
    const st = await stat(path);
    const s = `${st.mtimeMs}:${st.size}:${st.ino}`;
    if (s !== stamp || !token) {
      const t = (await readFile(path, "utf8")).trim();
      if (!t) throw new Error(`token file ${path} is empty`);
      token = t;
      stamp = s;
    }
    return token;
  };
  return async () => {
    const t = now();
    if (token && t - checked < intervalMs) return token;
    checked = t;
    pending ??= refresh().finally(() => { pending = null; });
    return pending;
  };
}

function tokenSource(tokens) {
  if (typeof tokens === "string") return staticToken(tokens);
  if (typeof tokens === "function") return tokens;
  throw new TypeError("tokens must be a token or a function returning one");
}

// Fingerprints -------------------------------------------------------------

/**
 * The secret fingerprint of a guessed secret: HMAC-SHA256 of secret keyed
 * with key, the full 32 bytes in unpadded base64url (43 characters). Strings
 * are UTF-8. The same as the Go and Python clients'.
 */
export function fingerprint(key, secret) {
  return createHmac("sha256", key).update(secret).digest("base64url");
}

// The end-user responder ---------------------------------------------------

const BODIES = {
  invalid: { error: "invalid_credentials", next: "retry" },
  slow: { error: "too_many_attempts", next: "wait" },
  block: { error: "account_locked", next: "reset" },
  challenge: { error: "second_factor_required", next: "second_factor" },
};
const STATUS = { slow: 429, block: 403, challenge: 401 };

/**
 * The auth service's answer to an end user whose attempt did not go through:
 * { status, headers, body }. omitQuota drops the RateLimit headers;
 * slowAsInvalid answers a slowed attempt exactly like a wrong password.
 */
export class Responder {
  constructor({ omitQuota = false, slowAsInvalid = false } = {}) {
    this.omitQuota = omitQuota;
    this.slowAsInvalid = slowAsInvalid;
  }

  /** The answer for slow, block or a challenge not yet passed; null for a decision that goes ahead (proceed). */
  refuse(d) {
    if (proceed(d)) return null;
    if (d.decision === "slow" && this.slowAsInvalid) return this.invalidCredentials(d);
    if (!(d.decision in STATUS)) return null;
    const headers = this.#quota(d);
    if (d.decision === "slow" && d.retryAfterMs > 0) headers["Retry-After"] = String(Math.ceil(d.retryAfterMs / 1000));
    return answer(STATUS[d.decision], headers, BODIES[d.decision]);
  }

  /** The answer for a credential verified and wrong: 401, never a Retry-After. */
  invalidCredentials(d) {
    return answer(401, this.slowAsInvalid ? {} : this.#quota(d), BODIES.invalid);
  }

  #quota(d) {
    const h = {};
    if (!this.omitQuota) {
      if (d.rateLimitPolicy) h["RateLimit-Policy"] = d.rateLimitPolicy;
      if (d.rateLimit) h["RateLimit"] = d.rateLimit;
    }
    return h;
  }
}

function answer(status, headers, body) {
  const text = JSON.stringify(body);
  return {
    status,
    headers: { ...headers, "Content-Type": "application/json", "Cache-Control": "no-store", "Content-Length": String(Buffer.byteLength(text)) },
    body: text,
  };
}

// The LOCAL policy ---------------------------------------------------------

class GCRA {
  constructor({ burst, everyMs }) {
    this.interval = everyMs;
    this.tolerance = burst * everyMs;
    this.tat = new Map();
  }
  /** [new arrival time, 0] when one more fits, [null, wait] otherwise. */
  fits(key, now, max) {
    let tat = this.tat.get(key);
    if (tat === undefined) {
      if (this.tat.size >= max) this.#evict();
      tat = now;
    }
    const next = Math.max(tat, now) + this.interval;
    const over = next - now - this.tolerance;
    return over > 0 ? [null, over] : [next, 0];
  }
  /** Forgets what expires soonest among the oldest few keys: a flood of new
   * keys makes room for fresh users out of its own. */
  #evict() {
    let victim, soonest = Infinity, n = 0;
    for (const [k, t] of this.tat) {
      if (t < soonest) [victim, soonest] = [k, t];
      if (++n === EVICT_SAMPLE) break;
    }
    this.tat.delete(victim);
  }
  give(key, now) {
    const tat = this.tat.get(key);
    if (tat === undefined) return;
    if (tat - this.interval <= now) this.tat.delete(key);
    else this.tat.set(key, tat - this.interval);
  }
}

class Limiter {
  constructor({ account = { burst: 5, everyMs: 60_000 }, ip = { burst: 30, everyMs: 20_000 }, maxKeys = 100_000 } = {}) {
    for (const r of [account, ip]) {
      if (!(r.burst > 0 && r.everyMs > 0)) throw new TypeError("local limits must be positive");
    }
    if (!(maxKeys > 0)) throw new TypeError("local limits must be positive");
    this.account = new GCRA(account);
    this.ip = new GCRA(ip);
    this.max = maxKeys;
    this.pending = new Map();
  }
  decide(req, now) {
    const ak = accountKey(req), ik = ipKey(req);
    const [aTat, aWait] = ak ? this.account.fits(ak, now, this.max) : [0, 0];
    const [iTat, iWait] = this.ip.fits(ik, now, this.max);
    if (aTat === null || iTat === null) {
      if (aTat === null && aWait >= iWait) return { decision: "slow", rule: RULE_LOCAL_ACCOUNT, retryAfterMs: Math.ceil(aWait) };
      return { decision: "slow", rule: RULE_LOCAL_IP, retryAfterMs: Math.ceil(iWait) };
    }
    if (ak) this.account.tat.set(ak, aTat);
    this.ip.tat.set(ik, iTat);
    return { decision: "allow", attemptId: this.#open(ak, ik, now) };
  }
  #open(ak, ik, now) {
    if (this.pending.size >= this.max) {
      for (const [k, p] of this.pending) if (now - p.at >= LOCAL_ATTEMPT_TTL_MS) this.pending.delete(k);
      if (this.pending.size >= this.max) return "";
    }
    const id = LOCAL_PREFIX + randomBytes(16).toString("hex");
    this.pending.set(id, { ak, ik, at: now });
    return id;
  }
  settle(id, outcome, now) {
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    if (outcome !== "success" || now - p.at >= LOCAL_ATTEMPT_TTL_MS) return;
    if (p.ak) this.account.give(p.ak, now);
    this.ip.give(p.ik, now);
  }
}

function accountKey({ flow, account, recipient }) {
  const [id, kind] = account ? [account, "a"] : [recipient ?? "", "r"];
  const norm = id.trim().toLowerCase();
  return norm ? `${flow}\0${kind}\0${norm}` : "";
}

function ipKey({ flow, ip }) {
  let a = (ip ?? "").trim().split("%")[0];
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a);
  if (mapped) a = mapped[1];
  if (isIP(a) === 6) a = ipv6Prefix64(a);
  return `${flow}\0${a}`;
}

function ipv6Prefix64(a) {
  const [head, tail = ""] = a.toLowerCase().split("::");
  const h = head ? head.split(":") : [], t = tail ? tail.split(":") : [];
  const groups = a.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  return groups.slice(0, 4).map((g) => parseInt(g, 16).toString(16)).join(":") + "::/64";
}

// The transport ------------------------------------------------------------

/**
 * A fetch of the few features the client uses, on node:http and node:https,
 * with connections kept alive (an idle one keeps no process running) and no
 * redirect followed. Node's own fetch is loaded on its first use, which
 * makes a process's first call several times slower than on node:http.
 */
function httpFetch() {
  const agents = { "http:": new HttpAgent({ keepAlive: true }), "https:": new HttpsAgent({ keepAlive: true }) };
  return (url, { method, headers, body, signal }) => new Promise((resolve, reject) => {
    const u = new URL(url);
    const h = body === undefined ? headers : { ...headers, "Content-Length": String(Buffer.byteLength(body)) };
    const send = u.protocol === "https:" ? httpsRequest : httpRequest;
    const req = send(u, { method, headers: h, signal, agent: agents[u.protocol] }, (res) => {
      const chunks = [];
      let size = 0;
      res.on("data", (c) => { if ((size += c.length) <= MAX_ANSWER) chunks.push(c); });
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        const get = (k) => {
          const v = res.headers[k.toLowerCase()];
          return v === undefined ? null : [].concat(v).join(", ");
        };
        resolve({ status: res.statusCode, headers: { get }, text: async () => text });
      });
      res.on("error", reject);
      res.on("close", () => { if (!res.complete) reject(signal.aborted ? signal.reason : new Error("connection closed mid-answer")); });
    });
    req.on("error", reject);
    req.end(body);
  });
}

// The client ---------------------------------------------------------------

/** Calls guardian. Make one and share it. */
export class Client {
  #base; #tokens; #timeoutMs; #firstCallTimeoutMs; #warm = false; #policy; #closed; #local; #now; #fetch;

  /**
   * @param {string} baseUrl guardian's address
   * @param {object} options tokens and onUnavailable are required
   */
  constructor(baseUrl, { tokens, onUnavailable, timeoutMs = DEFAULT_TIMEOUT_MS, firstCallTimeoutMs = DEFAULT_FIRST_CALL_TIMEOUT_MS,
    closedRetryAfterMs = DEFAULT_CLOSED_RETRY_AFTER_MS, local, now = Date.now, fetch: f = httpFetch() } = {}) {
    if (!Object.values(Policy).includes(onUnavailable)) {
      throw new TypeError("onUnavailable must be Policy.FAIL_CLOSED, Policy.FAIL_OPEN or Policy.LOCAL");
    }
    let u;
    try { u = new URL(baseUrl); } catch { u = null; }
    if (!u || !["http:", "https:"].includes(u.protocol)) throw new TypeError(`baseUrl ${JSON.stringify(baseUrl)} is not an http or https URL`);
    if (!(timeoutMs > 0 && firstCallTimeoutMs > 0 && closedRetryAfterMs > 0)) {
      throw new TypeError("timeoutMs, firstCallTimeoutMs and closedRetryAfterMs must be positive");
    }
    this.#base = u.origin + u.pathname.replace(/\/+$/, "");
    this.#tokens = tokenSource(tokens);
    this.#timeoutMs = timeoutMs;
    this.#firstCallTimeoutMs = Math.max(firstCallTimeoutMs, timeoutMs);
    this.#policy = onUnavailable;
    this.#closed = closedRetryAfterMs;
    this.#local = onUnavailable === Policy.LOCAL ? new Limiter(local) : null;
    this.#now = now;
    this.#fetch = f;
    /** The client's counts: checks, unavailable, failedOpen. */
    this.stats = { checks: 0, unavailable: 0, failedOpen: 0 };
  }

  /**
   * Asks guardian whether an attempt may go ahead. When guardian does not
   * answer, resolves to the policy's decision with unavailable set. Rejects
   * with GuardianError only for a request guardian refused: verify nothing.
   * passwordSHA1 (passwordSHA1() of the password about to be verified) asks
   * in the same call whether guardian's breached-password filter holds it:
   * the decision's breached, the decision unchanged. Like every field newer
   * than guardian 0.1.0, it is sent only when given.
   */
  async check(req) {
    const body = { flow: req.flow, ip: req.ip };
    for (const [k, w] of [["account", "account"], ["recipient", "recipient"], ["deviceToken", "device_token"], ["cost", "cost"],
      ["secretFingerprint", "secret_fingerprint"], ["challengePassed", "challenge_passed"], ["passwordSHA1", "password_sha1"]]) {
      if (req[k]) body[w] = req[k];
    }
    let d;
    try {
      const a = await this.#call("POST", "/v1/check", body);
      d = decision(a);
    } catch (e) {
      if (!(e instanceof Unavailable)) throw e;
      d = this.#decideUnavailable(e.reason, req);
    }
    if (req.challengePassed) d.challengePassed = true;
    this.stats.checks++;
    if (d.unavailable) {
      this.stats.unavailable++;
      if (d.decision === "allow") this.stats.failedOpen++;
    }
    return d;
  }

  /**
   * The whole flow of one attempt: check, the challenge if guardian asks for
   * one, verify, report. Slow or block: nothing is verified. A challenge:
   * onChallenge(decision) puts it to the end user and resolves to whether it
   * was passed; not passed, the attempt stops unverified and unreported
   * (guardian counts it as a failure); passed, it is checked again with
   * challengePassed and goes on with that decision. Allow, or a challenge to
   * a check that carried challengePassed: verify() is called and its outcome
   * reported. onChallenge and verify are required. Rejects as check() does
   * (nothing verified), and with whatever onChallenge or verify throw.
   * Against a guardian older than challenge_passed (0.1.0, during a rolling
   * upgrade), which refuses the field, a passed challenge lets the first
   * check's attempt go ahead, as that release's contract says.
   */
  async attempt(req, { onChallenge, verify } = {}) {
    if (typeof onChallenge !== "function" || typeof verify !== "function") {
      throw new TypeError("attempt needs onChallenge and verify, both functions");
    }
    let d = await this.check(req);
    if (d.decision === "challenge" && !d.challengePassed) {
      if (!(await onChallenge(d))) return { decision: d, verified: false, ok: false, deviceToken: "", reportError: null };
      try {
        d = await this.check({ ...req, challengePassed: true });
      } catch (e) {
        if (!(e instanceof GuardianError && e.code === "unknown_field")) throw e;
        d = { ...d, challengePassed: true };
      }
    }
    if (!proceed(d)) return { decision: d, verified: false, ok: false, deviceToken: "", reportError: null };
    const ok = !!(await verify());
    try {
      const res = await this.report(d.attemptId, ok ? "success" : "failure");
      return { decision: d, verified: true, ok, deviceToken: res.deviceToken, reportError: null };
    } catch (e) {
      if (!(e instanceof UnavailableError || e instanceof GuardianError)) throw e;
      return { decision: d, verified: true, ok, deviceToken: "", reportError: e };
    }
  }

  /**
   * Tells guardian how the attempt went ("success" or "failure"). Rejects
   * with UnavailableError when guardian does not answer, GuardianError when
   * it refuses (409 on a second report).
   */
  async report(attemptId, outcome) {
    if (!attemptId) return { deviceToken: "" };
    if (this.#local && attemptId.startsWith(LOCAL_PREFIX)) {
      this.#local.settle(attemptId, outcome, this.#now());
      return { deviceToken: "" };
    }
    const a = await this.#external("POST", "/v1/report", { attempt_id: attemptId, outcome });
    if (a.status === 200) {
      const w = parse(a.text);
      if (w?.recorded !== true) throw new UnavailableError("malformed", 'report answer is not {"recorded": true}');
      return { deviceToken: typeof w.device_token === "string" ? w.device_token : "" };
    }
    const err = answerError(a);
    if (a.retried && err instanceof GuardianError && err.alreadyReported) return { deviceToken: "" };
    throw err;
  }

  /** Where an account stands (admin scope). */
  async accountStatus(account) {
    const w = await this.#admin("GET", "/v1/accounts/status?account=" + encodeURIComponent(account));
    return { consecutiveFailures: w.consecutive_failures ?? 0, blocked: !!w.blocked, nextAllowedMs: w.next_allowed_ms ?? 0, limits: limits(w.limits),
      rememberedGuesses: w.remembered_guesses ?? 0, networks: networks(w.networks) };
  }

  /** Lifts the account's hard stop after a verified reset (admin scope). */
  async resetAccount(account) {
    await this.#admin("POST", "/v1/accounts/reset", { account });
  }

  /**
   * Adds a deny list entry, fleet-wide (admin scope): every check from network
   * (an IPv4 or IPv6 prefix of any length, or one address) or of account, one
   * of them, is answered block with rule "deny-list" for ttl (a duration like
   * "1h" or "30d", at most a year).
   */
  async addDeny({ network = "", account = "", ttl, reason = "" }) {
    const body = { ttl };
    if (network) body.network = network;
    if (account) body.account = account;
    if (reason) body.reason = reason;
    return listAdded(await this.#admin("POST", "/v1/lists/deny", body, 201));
  }

  /**
   * Adds an allow list entry, fleet-wide (admin scope): checks from network
   * skip the rules named in exempt, for ttl or, without one, until deleted.
   * Only rules with key: ip, key: global or type: distinct may be named
   * (GuardianError 400 invalid_field otherwise): an allow entry never lifts an
   * account's limits or its hard stop.
   */
  async addAllow({ network, exempt, ttl = "", reason = "" }) {
    const body = { network, exempt: [...exempt] };
    if (ttl) body.ttl = ttl;
    if (reason) body.reason = reason;
    return listAdded(await this.#admin("POST", "/v1/lists/allow", body, 201));
  }

  /** The deny and allow entries in force (admin scope). */
  async lists() {
    const w = await this.#admin("GET", "/v1/lists");
    return { deny: listEntries(w.deny), allow: listEntries(w.allow) };
  }

  /** Removes the entry id, fleet-wide (admin scope); one not in force is GuardianError 404. */
  async deleteListEntry(id) {
    await this.#admin("DELETE", "/v1/lists/" + encodeURIComponent(id));
  }

  /**
   * Whether a password is known to be breached, for password set and change
   * flows: refuse a new password on true. Only its SHA-1 is sent; guardian
   * answers from the filter of serve --breached and never logs, keeps or
   * counts it. A password not in the list answers true 1 time in 256.
   * Rejects with NoBreachedFilterError when guardian has no filter that can
   * answer, UnavailableError when it does not answer, GuardianError when it
   * refuses: none of them is a "no".
   */
  async checkPassword(password) {
    let w;
    try {
      w = await this.#admin("POST", "/v1/passwords/check", { sha1: passwordSHA1(password) });
    } catch (e) {
      if (e instanceof GuardianError && e.status === 404) throw new NoBreachedFilterError(e.status, e.code, e.detail);
      throw e;
    }
    if (typeof w.breached !== "boolean") throw new UnavailableError("malformed", 'password check answer is not {"breached": bool}');
    return w.breached;
  }

  async #admin(method, path, body, ok = 200) {
    const a = await this.#external(method, path, body);
    if (a.status !== ok) throw answerError(a);
    const w = parse(a.text);
    if (w === null || typeof w !== "object") throw new UnavailableError("malformed", "answer is not a JSON object");
    return w;
  }

  async #external(method, path, body) {
    try {
      return await this.#call(method, path, body);
    } catch (e) {
      if (e instanceof Unavailable) throw new UnavailableError(e.reason, e.detail);
      throw e;
    }
  }

  #decideUnavailable(reason, req) {
    const base = { ...emptyDecision(), unavailable: true, reason };
    if (this.#policy === Policy.FAIL_CLOSED) return { ...base, decision: "slow", retryAfterMs: this.#closed };
    if (this.#policy === Policy.FAIL_OPEN) return { ...base, decision: "allow" };
    return { ...base, ...this.#local.decide(req, this.#now()) };
  }

  // One request within the deadline (the first-call allowance while no call
  // has ended), sent a second time only when the first never reached
  // guardian (the connection was refused).
  async #call(method, path, body) {
    const token = await this.#tokens();
    const headers = { Accept: "application/json", Authorization: `Bearer ${token}` };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const signal = AbortSignal.timeout(this.#warm ? this.#timeoutMs : this.#firstCallTimeoutMs);
    try {
      return await this.#send(method, path, headers, body, signal);
    } finally {
      this.#warm = true;
    }
  }

  async #send(method, path, headers, body, signal) {
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await this.#fetch(this.#base + path, {
          method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal, redirect: "manual",
        });
        const text = await res.text();
        return { status: res.status, headers: res.headers, text, retried: attempt > 0 };
      } catch (e) {
        if (signal.aborted || e?.name === "TimeoutError" || e?.name === "AbortError") throw new Unavailable("timeout", String(e?.message ?? e));
        const code = e?.cause?.code ?? e?.code;
        if (attempt === 0 && code === "ECONNREFUSED") continue;
        throw new Unavailable("connection", String(code ?? e?.message ?? e));
      }
    }
  }
}

function parse(text) {
  try { return JSON.parse(text); } catch { return null; }
}

function limits(ws) {
  return Array.isArray(ws) ? ws.map((l) => ({ rule: String(l?.rule ?? ""), remaining: Number(l?.remaining ?? 0), resetMs: Number(l?.reset_ms ?? 0) })) : [];
}

function networks(ws) {
  return Array.isArray(ws)
    ? ws.map((n) => ({ network: String(n?.network ?? ""), consecutiveFailures: Number(n?.consecutive_failures ?? 0), blocked: !!n?.blocked }))
    : [];
}

function listAdded(w) {
  if (typeof w.id !== "string" || !w.id) throw new UnavailableError("malformed", 'list answer is not {"id", "expires_at"}');
  return { id: w.id, expiresAt: typeof w.expires_at === "string" ? w.expires_at : null };
}

function listEntries(ws) {
  return Array.isArray(ws)
    ? ws.filter((e) => e !== null && typeof e === "object").map((e) => ({
      id: String(e.id ?? ""), network: String(e.network ?? ""), account: String(e.account ?? ""),
      exempt: Array.isArray(e.exempt) ? e.exempt.map(String) : [], reason: String(e.reason ?? ""), createdAt: String(e.created_at ?? ""),
      expiresAt: typeof e.expires_at === "string" ? e.expires_at : null, subject: String(e.subject ?? ""), source: String(e.source ?? ""),
    }))
    : [];
}

function emptyDecision() {
  return { decision: "", rule: "", retryAfterMs: 0, attemptId: "", degraded: false, limits: [], shadow: [], trust: "", repeatGuess: false,
    repeatCapped: false,
    rateLimitPolicy: "", rateLimit: "", unavailable: false, reason: "", challengePassed: false, breached: null };
}

const ACTIONS = ["allow", "challenge", "slow", "block"];

function decision(a) {
  if (a.status === 200 || a.status === 429) {
    const d = parseDecision(a);
    if (d) return d;
    if (a.status === 429) {
      const wait = retryAfterMs(a.headers.get("retry-after"));
      return { ...emptyDecision(), decision: "slow", retryAfterMs: wait ?? PROXY_RETRY_AFTER_MS };
    }
    throw new Unavailable("malformed", "check answer is not a decision");
  }
  if (a.status >= 500) throw new Unavailable("server_error", `status ${a.status}`);
  if (a.status >= 400) throw answerError(a);
  throw new Unavailable("malformed", `unexpected status ${a.status}`);
}

function parseDecision(a) {
  const w = parse(a.text);
  if (w === null || typeof w !== "object" || !ACTIONS.includes(w.decision)) return null;
  const proceed = w.decision === "allow" || w.decision === "challenge";
  if (proceed !== (a.status === 200)) return null;
  let retry = Number(w.retry_after_ms ?? 0);
  if (!Number.isFinite(retry) || retry < 0) return null;
  if (w.decision === "slow" && retry === 0) retry = retryAfterMs(a.headers.get("retry-after")) ?? 0;
  return {
    decision: w.decision, rule: String(w.rule ?? ""), retryAfterMs: retry, attemptId: String(w.attempt_id ?? ""),
    degraded: !!w.degraded, limits: limits(w.limits),
    shadow: Array.isArray(w.shadow) ? w.shadow.map((s) => ({ rule: String(s?.rule ?? ""), decision: String(s?.decision ?? ""), retryAfterMs: Number(s?.retry_after_ms ?? 0) })) : [],
    trust: String(w.trust ?? ""), repeatGuess: !!w.repeat_guess, repeatCapped: w.repeat_capped === true,
    rateLimitPolicy: a.headers.get("ratelimit-policy") ?? "", rateLimit: a.headers.get("ratelimit") ?? "",
    unavailable: false, reason: "", challengePassed: false,
    breached: typeof w.breached === "boolean" ? w.breached : null,
  };
}

function retryAfterMs(v) {
  if (!v) return null;
  if (/^\d+$/.test(v.trim())) {
    const s = Number(v.trim());
    return s <= 86400 ? s * 1000 : null;
  }
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, t - Date.now());
}

function answerError(a) {
  if (a.status === 429) return new UnavailableError("throttled", `status ${a.status}`);
  if (a.status >= 500) return new UnavailableError("server_error", `status ${a.status}`);
  if (a.status >= 400) {
    const e = parse(a.text)?.error;
    return e && typeof e === "object" ? new GuardianError(a.status, String(e.code ?? ""), String(e.message ?? "")) : new GuardianError(a.status);
  }
  return new UnavailableError("malformed", `unexpected status ${a.status}`);
}

/**
 * Whether to go on and verify: true for allow, and for a challenge to a
 * check that carried challengePassed (the challenge was passed, then the
 * attempt checked again); false for slow, block and a challenge not yet
 * passed. attempt() makes that re-check itself. (Before this release it was
 * true for every challenge.)
 */
export function proceed(d) {
  return d.decision === "allow" || (d.decision === "challenge" && d.challengePassed === true);
}
