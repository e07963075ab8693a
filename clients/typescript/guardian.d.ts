// Types of guardian.mjs, guardian's client for Node auth services.

export declare const Policy: Readonly<{
  /** Slow, for closedRetryAfterMs: nothing is verified while guardian is down. */
  FAIL_CLOSED: "fail_closed";
  /** Allow: logins go on unprotected; counted in stats.failedOpen. */
  FAIL_OPEN: "fail_open";
  /** An in-process limiter per account and per address: never an open door. */
  LOCAL: "local";
}>;
export type Policy = (typeof Policy)[keyof typeof Policy];

/** 100: every client's default deadline of one call. */
export declare const DEFAULT_TIMEOUT_MS: number;
/** 1000: every client's deadline of the calls made before the first one ended. */
export declare const DEFAULT_FIRST_CALL_TIMEOUT_MS: number;
export declare const DEFAULT_CLOSED_RETRY_AFTER_MS: number;
/** Rule names of decisions the LOCAL policy makes. */
export declare const RULE_LOCAL_ACCOUNT: "local-account";
export declare const RULE_LOCAL_IP: "local-ip";

export type Flow = "login" | "password_reset" | "otp_send" | "otp_verify";
export type Action = "allow" | "challenge" | "slow" | "block";
export type Outcome = "success" | "failure";
export type Reason = "timeout" | "connection" | "server_error" | "malformed" | "throttled";

/** A token, or a function giving one (called on every request: cache in it). */
export type TokenSource = string | (() => string | Promise<string>);

export interface CheckRequest {
  flow: Flow;
  /** The client address the auth service saw. */
  ip: string;
  /** The claimed identity, sent even when no such account exists. */
  account?: string;
  /** Where a code is sent; required for otp_send. */
  recipient?: string;
  /** The token an earlier successful report returned for this account. */
  deviceToken?: string;
  /** Units spent on attempt-counting rules; guardian counts 1 when absent. */
  cost?: number;
  /** fingerprint(key, secret) of the guessed secret. */
  secretFingerprint?: string;
  /** The end user solved a CAPTCHA or second factor for this attempt. */
  challengePassed?: boolean;
  /** passwordSHA1() of the password about to be verified: the decision's breached answers for it. Sent only when given. */
  passwordSHA1?: string;
}

export interface Limit { rule: string; remaining: number; resetMs: number }
export interface ShadowResult { rule: string; decision: Action; retryAfterMs: number }

export interface Decision {
  decision: Action;
  /** The rule that decided; empty on allow. */
  rule: string;
  retryAfterMs: number;
  /** What to pass to report(); empty when there is nothing to report. */
  attemptId: string;
  /** guardian decided some rule from its own store fallback. */
  degraded: boolean;
  /** For the auth service's logs, never for the end user. */
  limits: Limit[];
  shadow: ShadowResult[];
  trust: string;
  repeatGuess: boolean;
  /**
   * The check's fingerprint was one of the account's last failed ones, but its
   * free repeats for the day (20) were spent: the check counted like any
   * failure. Answer the end user alike either way.
   */
  repeatCapped: boolean;
  /** The RateLimit-Policy and RateLimit headers as guardian sent them. */
  rateLimitPolicy: string;
  rateLimit: string;
  /** guardian did not answer and the policy decided; reason says why. */
  unavailable: boolean;
  reason: Reason | "";
  /** The check carried challengePassed: a challenge lets the attempt go ahead. */
  challengePassed: boolean;
  /**
   * Whether guardian's breached-password filter holds the check's passwordSHA1;
   * null is "unknown", never "not breached": no passwordSHA1, no filter that can
   * answer, or the policy decided.
   */
  breached: boolean | null;
}

/** What attempt() needs besides the check: both required. */
export interface AttemptSteps {
  /** Puts guardian's challenge to the end user (a CAPTCHA, a second factor sent with the attempt); true when passed. */
  onChallenge: (d: Decision) => boolean | Promise<boolean>;
  /** Verifies the credential (sends the code); true when right. Called only when guardian lets the attempt go ahead. */
  verify: () => boolean | Promise<boolean>;
}

export interface AttemptResult {
  /** The decision that let the attempt go ahead, or the one that stopped it. */
  decision: Decision;
  /** verify was called. */
  verified: boolean;
  /** What verify returned. */
  ok: boolean;
  /** guardian's device token, after a success with an account. */
  deviceToken: string;
  /** Why the report did not reach guardian (which then counts a failure), or null. */
  reportError: UnavailableError | GuardianError | null;
}

export interface ReportResult {
  /** On a success with an account: keep it in an HttpOnly cookie. */
  deviceToken: string;
}

export interface AccountStatus {
  consecutiveFailures: number;
  blocked: boolean;
  nextAllowedMs: number;
  limits: Limit[];
  /** Failed secret fingerprints guardian remembers for the account (at most 3, 24 h each). */
  rememberedGuesses: number;
  /**
   * The account's familiar networks, each as a check from there without a
   * device token finds its own count; consecutiveFailures and blocked above
   * are those of checks from an unfamiliar network.
   */
  networks: NetworkStatus[];
}

/** Where an account stands for checks from one of its familiar networks. */
export interface NetworkStatus {
  /** The network's pseudonym ("h-" and 22 characters). */
  network: string;
  consecutiveFailures: number;
  /** Checks from the network without a device token are at its hard stop. */
  blocked: boolean;
}

export interface Rate { burst: number; everyMs: number }
export interface LocalLimits {
  /** Default 5 back to back, then one a minute. */
  account?: Rate;
  /** Default 30 back to back, then one every 20 s (IPv4 address, IPv6 /64). */
  ip?: Rate;
  /** Keys and open attempts tracked, each; default 100,000. When full, a
   * new key pushes out what expires soonest among the oldest few. */
  maxKeys?: number;
}

export interface ClientOptions {
  tokens: TokenSource;
  /** Required: there is no default. */
  onUnavailable: Policy;
  /** Deadline of one call, its retry included; default 100. */
  timeoutMs?: number;
  /** Deadline of the calls made before the client's first call ended, when longer; default 1000. */
  firstCallTimeoutMs?: number;
  /** Wait of FAIL_CLOSED decisions; default 1000. */
  closedRetryAfterMs?: number;
  local?: LocalLimits;
  /** The LOCAL policy's clock, in milliseconds. */
  now?: () => number;
  /** Sends the requests; default one on node:http and node:https, connections kept alive. */
  fetch?: typeof fetch;
}

export interface Stats { checks: number; unavailable: number; failedOpen: number }

export declare class Client {
  constructor(baseUrl: string, options: ClientOptions);
  readonly stats: Stats;
  /** Rejects with GuardianError only for a request guardian refused. */
  check(req: CheckRequest): Promise<Decision>;
  /** Check, the challenge when guardian asks for one, verify, report: the whole flow of one attempt. */
  attempt(req: CheckRequest, steps: AttemptSteps): Promise<AttemptResult>;
  /** Rejects with UnavailableError or GuardianError (409 on a second report). */
  report(attemptId: string, outcome: Outcome): Promise<ReportResult>;
  accountStatus(account: string): Promise<AccountStatus>;
  resetAccount(account: string): Promise<void>;
  /** Whether a password is known to be breached; only its SHA-1 is sent. */
  checkPassword(password: string | Uint8Array): Promise<boolean>;
  /** A deny list entry, fleet-wide: its checks are blocked with rule "deny-list" (admin scope). */
  addDeny(entry: DenyEntry): Promise<ListAdded>;
  /** An allow list entry, fleet-wide: its checks skip the exempt rules (admin scope). */
  addAllow(entry: AllowEntry): Promise<ListAdded>;
  /** The deny and allow entries in force (admin scope). */
  lists(): Promise<Lists>;
  /** Removes an entry, fleet-wide; one not in force is GuardianError 404 (admin scope). */
  deleteListEntry(id: string): Promise<void>;
}

/** A deny list entry to add: network or account, never both. */
export interface DenyEntry {
  /** An IPv4 or IPv6 prefix of any length ("198.51.100.0/24"), or one address. */
  network?: string;
  /** The account as checks name it; guardian keeps and shows only its pseudonym. */
  account?: string;
  /** How long it holds, a duration like "1h" or "30d", at most a year. */
  ttl: string;
  reason?: string;
}

/** An allow list entry to add: checks from network skip the exempt rules (key: ip, key: global or type: distinct only). */
export interface AllowEntry {
  network: string;
  exempt: string[];
  /** How long it holds; without one, until deleted. */
  ttl?: string;
  reason?: string;
}

export interface ListAdded {
  /** For deleteListEntry(). */
  id: string;
  /** When it lapses (RFC 3339, to the second); null for an allow entry without a ttl. */
  expiresAt: string | null;
}

/** An entry as guardian shows it: an account only as its pseudonym. */
export interface ListEntry {
  id: string;
  /** The entry's network as a prefix; empty on an account entry. */
  network: string;
  /** The pseudonym of a deny entry's account ("h-" and 22 characters), never the account; empty on a network entry. */
  account: string;
  /** The rules an allow entry's checks skip. */
  exempt: string[];
  reason: string;
  createdAt: string;
  /** null for an entry without an end. */
  expiresAt: string | null;
  /** The admin token's subject that added it; empty for a rules file's entry. */
  subject: string;
  /** "api", or the path of the rules file that holds the entry. */
  source: string;
}

export interface Lists { deny: ListEntry[]; allow: ListEntry[] }

export declare class GuardianError extends Error {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly alreadyReported: boolean;
  readonly invalidAttempt: boolean;
}

export declare class UnavailableError extends Error {
  readonly reason: Reason;
}

export interface Response { status: number; headers: Record<string, string>; body: string }

export declare class Responder {
  constructor(options?: { omitQuota?: boolean; slowAsInvalid?: boolean });
  /** The answer for slow, block or a challenge not yet passed; null for a decision that goes ahead. */
  refuse(d: Decision): Response | null;
  /** The answer for a credential verified and wrong: 401. */
  invalidCredentials(d: Decision): Response;
}

export declare function staticToken(token: string): () => string;
export declare function fileToken(path: string, options?: { intervalMs?: number; now?: () => number }): () => Promise<string>;
/** HMAC-SHA256 of secret keyed with key, unpadded base64url: 43 characters. */
export declare function fingerprint(key: string | Uint8Array, secret: string | Uint8Array): string;
/** Whether to go on and verify: allow, or a challenge to a check that carried challengePassed. */
export declare function proceed(d: Decision): boolean;

/** checkPassword() could not be answered: guardian has no breached-password filter that can (404). */
export declare class NoBreachedFilterError extends GuardianError {}
/** The SHA-1 of a password (UTF-8) in hex, what checkPassword() sends. */
export declare function passwordSHA1(password: string | Uint8Array): string;
