"""guardian's client for Python auth services: the standard library only.

An auth service asks guardian before it verifies a credential or sends a code
(:meth:`Client.check`) and tells it afterwards how the attempt went
(:meth:`Client.report`); :meth:`Client.attempt` is that whole flow in one
call, with guardian's challenge a function the caller must give. guardian
decides what happens when its own store fails; this client makes the auth
service decide what happens when guardian fails: ``on_unavailable`` has no
default, and :meth:`Client.check` never raises "guardian is down" for the
caller to forget about, it returns the decision of that policy with
``unavailable`` set. README.md shows a login handler (a test runs it).
"""

from __future__ import annotations

import base64
import enum
import hashlib
import hmac
import http.client
import ipaddress
import itertools
import json
import math
import os
import secrets
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Union

__all__ = [
    "Client", "Policy", "Decision", "Attempt", "Limit", "ShadowResult", "ReportResult", "AccountStatus", "NetworkStatus",
    "ListAdded", "ListEntry", "Lists",
    "LocalLimits", "Rate", "Stats", "GuardianError", "UnavailableError", "ConfigError",
    "StaticToken", "FileToken", "Responder", "Response", "fingerprint",
    "RULE_LOCAL_ACCOUNT", "RULE_LOCAL_IP",
    "NoBreachedFilterError", "password_sha1",
]

#: Default deadline of one call, its retry included, in seconds: the same in
#: the Go, Python and TypeScript clients. guardian answers in about a
#: millisecond and waits at most its --store-timeout (5ms) on Redis; 100ms
#: leaves room for a network hop, a pause and a retry on a busy host, and is
#: about what hashing one password costs, so a guardian that hangs delays a
#: login by no more than verifying it does.
DEFAULT_TIMEOUT = 0.1
#: Default deadline, in seconds, of the calls made before the client's first
#: call ended (every client's): a first call pays for its connection and
#: guardian's first request on it, and under FAIL_CLOSED a first call that
#: timed out is a real user refused after every restart.
DEFAULT_FIRST_CALL_TIMEOUT = 1.0
#: Default wait of a FAIL_CLOSED decision, in milliseconds: the wait guardian
#: itself gives when its store is down and a rule says closed.
DEFAULT_CLOSED_RETRY_AFTER_MS = 1000
_PROXY_RETRY_AFTER_MS = 1000
_MAX_ANSWER = 1 << 20

#: Rule names of decisions the LOCAL policy makes.
RULE_LOCAL_ACCOUNT = "local-account"
RULE_LOCAL_IP = "local-ip"
_LOCAL_PREFIX = "local:"
_LOCAL_ATTEMPT_TTL = 600.0
#: How many of a full table's oldest keys the LOCAL policy looks at to pick
#: the one it forgets.
_EVICT_SAMPLE = 8


class Policy(enum.Enum):
    """What :meth:`Client.check` decides when guardian does not answer."""

    #: Slow, for ``closed_retry_after_ms``: nothing is verified while guardian
    #: is down. Safe against attackers; a login outage while it lasts.
    FAIL_CLOSED = "fail_closed"
    #: Allow: logins go on unprotected. Every such decision is counted
    #: (:attr:`Stats.failed_open`), so it is never silent.
    FAIL_OPEN = "fail_open"
    #: A small in-process limiter per account and per address
    #: (:class:`LocalLimits`): stricter than guardian, blind to other
    #: instances, never an open door.
    LOCAL = "local"


class ConfigError(ValueError):
    """A :class:`Client` configuration that cannot work."""


class GuardianError(Exception):
    """A request guardian refused: a 4xx other than 429, a bug or a
    misconfiguration on the caller's side. Never turned into a decision."""

    def __init__(self, status: int, code: str = "", message: str = ""):
        self.status, self.code, self.message = status, code, message
        super().__init__(f"guardian refused the request: {code or f'status {status}'}" + (f": {message}" if message else ""))

    @property
    def already_reported(self) -> bool:
        """True for guardian's answer to a second report of one attempt (409)."""
        return self.code == "already_reported"

    @property
    def invalid_attempt(self) -> bool:
        """True for a forged or expired attempt id (400)."""
        return self.code == "invalid_attempt"


class NoBreachedFilterError(GuardianError):
    """:meth:`Client.check_password` could not be answered: guardian has no
    breached-password filter that can (none loaded, or one of NTLM hashes;
    404). Nothing was looked up: "unknown", never "not breached"."""


def password_sha1(password: Union[str, bytes]) -> str:
    """The SHA-1 of a password (UTF-8) in hex: what :meth:`Client.check_password`
    sends in place of the password, which never leaves the auth service."""
    if isinstance(password, str):
        password = password.encode("utf-8")
    return hashlib.sha1(password).hexdigest()


class UnavailableError(Exception):
    """guardian did not answer a report or an admin call. ``reason`` is one of
    ``timeout``, ``connection``, ``server_error``, ``malformed``, ``throttled``."""

    def __init__(self, reason: str, detail: str = ""):
        self.reason = reason
        super().__init__(f"guardian unavailable ({reason})" + (f": {detail}" if detail else ""))


@dataclass(frozen=True)
class Limit:
    """Where one of guardian's enforced rules stands after a check."""

    rule: str
    remaining: int
    reset_ms: int


@dataclass(frozen=True)
class ShadowResult:
    """What a shadow rule would have decided on its own."""

    rule: str
    decision: str
    retry_after_ms: int


@dataclass(frozen=True)
class Decision:
    """The answer to a check: ``decision`` is ``allow``, ``challenge``,
    ``slow`` or ``block``. ``limits`` and ``shadow`` are for the auth
    service's logs, never for the end user."""

    decision: str
    rule: str = ""
    retry_after_ms: int = 0
    attempt_id: str = ""
    degraded: bool = False
    limits: tuple = ()
    shadow: tuple = ()
    trust: str = ""
    repeat_guess: bool = False
    #: The check's fingerprint was one of the account's last failed ones,
    #: but its free repeats for the day (20) were spent: the check counted
    #: like any failure. Answer the end user alike either way.
    repeat_capped: bool = False
    #: guardian did not answer and the policy decided; ``reason`` says why.
    unavailable: bool = False
    reason: str = ""
    #: The RateLimit-Policy and RateLimit headers exactly as guardian sent them.
    ratelimit_policy: str = ""
    ratelimit: str = ""
    #: The check carried ``challenge_passed``: the end user already solved
    #: the challenge, so a challenge lets the attempt go ahead.
    challenge_passed: bool = False
    #: guardian's answer to the check's ``password_sha1``: whether its
    #: breached-password filter holds the password. None is "unknown", never
    #: "not breached": no ``password_sha1``, no filter that can answer, or
    #: the policy decided.
    breached: Optional[bool] = None

    @property
    def proceed(self) -> bool:
        """Whether to go on and verify: true for allow, and for a challenge to
        a check that carried ``challenge_passed`` (the challenge was passed,
        then the attempt checked again); false for slow, block, and a
        challenge not yet passed. :meth:`Client.attempt` makes that re-check
        itself. (Before this release it was true for every challenge.)"""
        return self.decision == "allow" or (self.decision == "challenge" and self.challenge_passed)


@dataclass(frozen=True)
class Attempt:
    """What :meth:`Client.attempt` did. ``decision`` let the attempt go ahead
    or stopped it (answer a stopped one with :meth:`Responder.refuse`);
    ``verified`` says ``verify`` was called and ``ok`` what it returned.
    ``device_token`` is guardian's, after a success with an account.
    ``report_error`` is why the report did not reach guardian, or None:
    guardian then counts the attempt as a failure, the safe side."""

    decision: Decision
    verified: bool = False
    ok: bool = False
    device_token: str = ""
    report_error: Optional[Exception] = None


@dataclass(frozen=True)
class ReportResult:
    """guardian's answer to a report: on a success with an account, a device
    token to keep on the device (an HttpOnly cookie) and send back on checks."""

    device_token: str = ""


@dataclass(frozen=True)
class AccountStatus:
    """Where an account stands in guardian (admin scope)."""

    consecutive_failures: int
    blocked: bool
    next_allowed_ms: int
    limits: tuple
    #: How many failed secret fingerprints guardian remembers for the
    #: account (at most 3, for 24 hours each).
    remembered_guesses: int = 0
    #: The account's familiar networks (:class:`NetworkStatus`), each as a
    #: check from there without a device token finds its own count;
    #: ``consecutive_failures`` and ``blocked`` above are those of checks
    #: from an unfamiliar network.
    networks: tuple = ()


@dataclass(frozen=True)
class NetworkStatus:
    """Where an account stands for checks from one of its familiar networks:
    ``network`` is the network's pseudonym ("h-" and 22 characters),
    ``blocked`` that checks from there without a device token are at its
    hard stop."""

    network: str
    consecutive_failures: int
    blocked: bool


@dataclass(frozen=True)
class ListAdded:
    """guardian's answer to an added list entry: ``id`` for
    :meth:`Client.delete_list_entry`, ``expires_at`` when it lapses (RFC
    3339, to the second), None for an allow entry without a ttl."""

    id: str
    expires_at: Optional[str] = None


@dataclass(frozen=True)
class ListEntry:
    """A deny or allow entry as guardian shows it: ``network`` a prefix, or
    ``account`` the pseudonym of a deny entry's account ("h-" and 22
    characters), never the account. ``exempt`` are the rules an allow
    entry's checks skip; ``expires_at`` is None for an entry without an end;
    ``subject`` is the admin token's that added it (empty for a rules
    file's entry), ``source`` ``api`` or the rules file's path."""

    id: str
    network: str = ""
    account: str = ""
    exempt: tuple = ()
    reason: str = ""
    created_at: str = ""
    expires_at: Optional[str] = None
    subject: str = ""
    source: str = ""


@dataclass(frozen=True)
class Lists:
    """The deny and allow entries in force (:class:`ListEntry` each)."""

    deny: tuple = ()
    allow: tuple = ()


@dataclass(frozen=True)
class Rate:
    """``burst`` attempts back to back after idle, then one every
    ``every`` seconds (GCRA, as guardian's rate rules)."""

    burst: int
    every: float


@dataclass(frozen=True)
class LocalLimits:
    """The LOCAL policy's limits; the defaults mirror guardian's built-in
    login rules. Each process counts alone, from zero when guardian stops
    answering: divide by the number of instances where that matters."""

    account: Rate = Rate(5, 60.0)
    ip: Rate = Rate(30, 20.0)
    #: How many keys and open attempts each table tracks; when full, a new
    #: key pushes out what expires soonest among the oldest few, so a flood
    #: of new keys makes room for fresh users out of its own.
    max_keys: int = 100_000


@dataclass
class Stats:
    """A client's counts since it was made."""

    checks: int = 0
    unavailable: int = 0
    failed_open: int = 0


# Token sources ------------------------------------------------------------

TokenSource = Union[str, Callable[[], str], "StaticToken", "FileToken"]


class StaticToken:
    """Always the same token, such as one printed by ``guardian token``."""

    def __init__(self, token: str):
        self._token = token

    def __call__(self) -> str:
        return self._token


class FileToken:
    """A token read from a file (a mounted secret), read again when the file
    changes, checked at most every ``interval`` seconds: rotating the secret
    needs no restart. Surrounding whitespace is dropped. Thread-safe."""

    def __init__(self, path: str, interval: float = 1.0, clock: Callable[[], float] = time.monotonic):
        self._path, self._interval, self._clock = path, interval, clock
        self._lock = threading.Lock()
        self._token, self._stamp, self._checked = "", None, -math.inf

    def __call__(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token and now - self._checked < self._interval:
                return self._token
            self._checked = now
            st = os.stat(self._path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
            if stamp != self._stamp or not self._token:
                with open(self._path, encoding="utf-8") as f:
                    token = f.read().strip()
                if not token:
                    raise ConfigError(f"token file {self._path} is empty")
                self._token, self._stamp = token, stamp
            return self._token


def _token_source(tokens) -> Callable[[], str]:
    if isinstance(tokens, str):
        return StaticToken(tokens)
    if callable(tokens):
        return tokens
    raise ConfigError("tokens must be a token, a FileToken or a callable returning one")


# Fingerprints -------------------------------------------------------------

def fingerprint(key: Union[bytes, str], secret: Union[bytes, str]) -> str:
    """The secret fingerprint of a guessed secret, for a check's
    ``secret_fingerprint``: HMAC-SHA256 of ``secret`` keyed with ``key``, the
    full 32 bytes in unpadded base64url (43 characters of ``[A-Za-z0-9_-]``).

    ``key`` is the auth service's own secret (32 random bytes or more, the
    same on every instance, never guardian's signing key); ``secret`` the
    bytes the auth service verifies, as the end user gave them. Strings are
    encoded as UTF-8. The Go and TypeScript clients compute the same."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if isinstance(secret, str):
        secret = secret.encode("utf-8")
    digest = hmac.new(key, secret, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


# The end-user responder ---------------------------------------------------

@dataclass(frozen=True)
class Response:
    """An answer for the end user: the status, the headers and the JSON body."""

    status: int
    headers: dict
    body: bytes


_BODIES = {
    "invalid_credentials": {"error": "invalid_credentials", "next": "retry"},
    "slow": {"error": "too_many_attempts", "next": "wait"},
    "block": {"error": "account_locked", "next": "reset"},
    "challenge": {"error": "second_factor_required", "next": "second_factor"},
}
_STATUS = {"slow": 429, "block": 403, "challenge": 401}


@dataclass(frozen=True)
class Responder:
    """Writes the auth service's answer to an end user whose attempt did not
    go through. The default answers each decision with its own status,
    headers and body; the options say less to an attacker.

    ``omit_quota`` leaves out RateLimit-Policy and RateLimit, which tell an
    unauthenticated client how to pace an attack. ``slow_as_invalid``
    answers a slowed attempt exactly like a wrong password (401, no
    Retry-After); then also spend as long on it as on a password check."""

    omit_quota: bool = False
    slow_as_invalid: bool = False

    def refuse(self, d: Decision) -> Optional[Response]:
        """The answer for a decision that stops the attempt (slow, block, a
        challenge not yet passed); None for one that goes ahead
        (:attr:`Decision.proceed`)."""
        if d.proceed:
            return None
        if d.decision == "slow" and self.slow_as_invalid:
            return self.invalid_credentials(d)
        if d.decision not in _STATUS:
            return None
        headers = self._quota(d)
        if d.decision == "slow" and d.retry_after_ms > 0:
            headers["Retry-After"] = str(-(-d.retry_after_ms // 1000))
        return _response(_STATUS[d.decision], headers, _BODIES[d.decision])

    def invalid_credentials(self, d: Decision) -> Response:
        """The answer for a credential that was verified and wrong: 401, with
        the RateLimit headers unless omitted, never a Retry-After."""
        headers = {} if self.slow_as_invalid else self._quota(d)
        return _response(401, headers, _BODIES["invalid_credentials"])

    def _quota(self, d: Decision) -> dict:
        h = {}
        if not self.omit_quota:
            if d.ratelimit_policy:
                h["RateLimit-Policy"] = d.ratelimit_policy
            if d.ratelimit:
                h["RateLimit"] = d.ratelimit
        return h


def _response(status: int, headers: dict, body: dict) -> Response:
    out = json.dumps(body, separators=(",", ":")).encode()
    headers.update({"Content-Type": "application/json", "Cache-Control": "no-store", "Content-Length": str(len(out))})
    return Response(status, headers, out)


# The LOCAL policy ---------------------------------------------------------

class _GCRA:
    """One limit's state: each key's theoretical arrival time."""

    def __init__(self, rate: Rate):
        self.interval, self.tolerance = rate.every, rate.burst * rate.every
        self.tat: dict = {}

    def fits(self, key: str, now: float, max_keys: int):
        """(new arrival time, 0) when one more unit fits, (None, wait) otherwise."""
        tat = self.tat.get(key)
        if tat is None:
            if len(self.tat) >= max_keys:
                oldest = itertools.islice(self.tat.items(), _EVICT_SAMPLE)
                del self.tat[min(oldest, key=lambda kt: kt[1])[0]]
            tat = now
        nxt = max(tat, now) + self.interval
        over = nxt - now - self.tolerance
        if over > 0:
            return None, over
        return nxt, 0.0

    def give(self, key: str, now: float):
        tat = self.tat.get(key)
        if tat is None:
            return
        tat -= self.interval
        if tat <= now:
            del self.tat[key]
        else:
            self.tat[key] = tat


class _Limiter:
    """The LOCAL policy: a GCRA per account and per address, spent together
    or not at all; a success report gives both back."""

    def __init__(self, limits: LocalLimits):
        self.lock = threading.Lock()
        self.account, self.ip = _GCRA(limits.account), _GCRA(limits.ip)
        self.max = limits.max_keys
        self.pending: dict = {}

    def decide(self, flow, account, recipient, ip, now) -> tuple:
        """(decision, rule, retry_after_ms, attempt_id)."""
        ak, ik = _account_key(flow, account, recipient), _ip_key(flow, ip)
        with self.lock:
            a_tat, a_wait = (None, 0.0)
            if ak:
                a_tat, a_wait = self.account.fits(ak, now, self.max)
            i_tat, i_wait = self.ip.fits(ik, now, self.max)
            if (ak and a_tat is None) or i_tat is None:
                if ak and a_tat is None and a_wait >= i_wait:
                    return "slow", RULE_LOCAL_ACCOUNT, math.ceil(a_wait * 1000), ""
                return "slow", RULE_LOCAL_IP, math.ceil(i_wait * 1000), ""
            if ak:
                self.account.tat[ak] = a_tat
            self.ip.tat[ik] = i_tat
            return "allow", "", 0, self._open(ak, ik, now)

    def _open(self, ak, ik, now) -> str:
        if len(self.pending) >= self.max:
            for k in [k for k, p in self.pending.items() if now - p[2] >= _LOCAL_ATTEMPT_TTL]:
                del self.pending[k]
            if len(self.pending) >= self.max:
                return ""
        aid = _LOCAL_PREFIX + secrets.token_hex(16)
        self.pending[aid] = (ak, ik, now)
        return aid

    def settle(self, aid: str, outcome: str, now: float):
        with self.lock:
            p = self.pending.pop(aid, None)
            if p is None or outcome != "success" or now - p[2] >= _LOCAL_ATTEMPT_TTL:
                return
            if p[0]:
                self.account.give(p[0], now)
            self.ip.give(p[1], now)


def _account_key(flow, account, recipient) -> str:
    ident, kind = (account, "a") if account else (recipient, "r")
    ident = (ident or "").strip().lower()
    return f"{flow}\0{kind}\0{ident}" if ident else ""


def _ip_key(flow, ip) -> str:
    ip = (ip or "").strip()
    try:
        a = ipaddress.ip_address(ip.split("%", 1)[0])
        if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped:
            a = a.ipv4_mapped
        ip = str(ipaddress.ip_network(f"{a}/64", strict=False)) if a.version == 6 else str(a)
    except ValueError:
        pass
    return f"{flow}\0{ip}"


# The client ---------------------------------------------------------------

class _Unavailable(Exception):
    def __init__(self, reason: str, detail: str = ""):
        self.reason, self.detail = reason, detail


class Client:
    """Calls guardian. Thread-safe: make one and share it.

    ``base_url`` is guardian's address; ``tokens`` a token, a
    :class:`FileToken`, or any callable returning one (scope check for
    check and report, admin for the account calls); ``on_unavailable`` a
    :class:`Policy`, required. ``timeout`` is the deadline of one call in
    seconds, its retry included; ``first_call_timeout`` that of the calls
    made before the client's first call ended, when it is longer (a
    first-call allowance). ``now`` is the LOCAL policy's clock."""

    def __init__(self, base_url: str, *, tokens, on_unavailable: Policy, timeout: float = DEFAULT_TIMEOUT,
                 first_call_timeout: float = DEFAULT_FIRST_CALL_TIMEOUT,
                 closed_retry_after_ms: int = DEFAULT_CLOSED_RETRY_AFTER_MS, local: LocalLimits = LocalLimits(),
                 now: Callable[[], float] = time.monotonic):
        if not isinstance(on_unavailable, Policy):
            raise ConfigError("on_unavailable must be Policy.FAIL_CLOSED, Policy.FAIL_OPEN or Policy.LOCAL")
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError(f"base_url {base_url!r} is not an http or https URL")
        if timeout <= 0 or first_call_timeout <= 0 or closed_retry_after_ms <= 0:
            raise ConfigError("timeout, first_call_timeout and closed_retry_after_ms must be positive")
        if min(local.account.burst, local.ip.burst, local.max_keys) <= 0 or min(local.account.every, local.ip.every) <= 0:
            raise ConfigError("local limits must be positive")
        self._https = u.scheme == "https"
        self._host, self._port = u.hostname, u.port or (443 if self._https else 80)
        self._path = u.path.rstrip("/")
        self._tokens = _token_source(tokens)
        self._timeout, self._policy, self._closed = timeout, on_unavailable, closed_retry_after_ms
        self._first_timeout = max(first_call_timeout, timeout)
        #: Set once a call has ended: from then on calls have ``timeout``.
        self._warm = False
        self._now = now
        self._local = _Limiter(local) if on_unavailable is Policy.LOCAL else None
        self._stats, self._stats_lock = Stats(), threading.Lock()
        self._conns = threading.local()

    @property
    def stats(self) -> Stats:
        """A copy of the client's counts."""
        with self._stats_lock:
            return Stats(self._stats.checks, self._stats.unavailable, self._stats.failed_open)

    def check(self, flow: str, *, ip: str, account: str = "", recipient: str = "", device_token: str = "",
              cost: int = 0, secret_fingerprint: str = "", challenge_passed: bool = False,
              password_sha1: str = "") -> Decision:
        """Asks guardian whether an attempt may go ahead, before verifying a
        credential or sending a code. When guardian does not answer (deadline,
        connection, 5xx, an answer not in the contract) it returns the
        policy's decision with ``unavailable`` set, and raises nothing. A 429
        without a decision (a proxy) is slow for its Retry-After. Raises
        :class:`GuardianError` only for a request guardian refused: then
        nothing was decided, verify nothing.

        ``password_sha1`` (:func:`password_sha1` of the password about to be
        verified) asks guardian, in the same call, whether its
        breached-password filter holds it: the answer is the decision's
        ``breached``, the decision unchanged. Like every field of a newer
        release than 0.1.0, it is sent only when given."""
        body = {"flow": flow, "ip": ip}
        for k, v in (("account", account), ("recipient", recipient), ("device_token", device_token),
                     ("cost", cost), ("secret_fingerprint", secret_fingerprint), ("challenge_passed", challenge_passed),
                     ("password_sha1", password_sha1)):
            if v:
                body[k] = v
        try:
            status, headers, data, _ = self._call("POST", "/v1/check", body)
            d = self._decision(status, headers, data)
        except _Unavailable as e:
            d = self._decide_unavailable(e.reason, flow, account, recipient, ip)
        if challenge_passed:
            d = replace(d, challenge_passed=True)
        with self._stats_lock:
            self._stats.checks += 1
            if d.unavailable:
                self._stats.unavailable += 1
                if d.decision == "allow":
                    self._stats.failed_open += 1
        return d

    def attempt(self, flow: str, *, ip: str, on_challenge: Callable[[Decision], bool], verify: Callable[[], bool],
                account: str = "", recipient: str = "", device_token: str = "", cost: int = 0,
                secret_fingerprint: str = "", challenge_passed: bool = False, password_sha1: str = "") -> Attempt:
        """The whole flow of one attempt: check, the challenge if guardian asks
        for one, verify, report.

        Slow or block (guardian's, or the policy's while guardian is down):
        nothing is verified. A challenge: ``on_challenge(decision)`` puts it
        to the end user (checks the CAPTCHA answer or second factor sent
        with the attempt) and returns whether it was passed; not passed, the
        attempt stops unverified and unreported (guardian counts it as a
        failure); passed, it is checked again with ``challenge_passed`` and
        goes on with that decision. Allow, or a challenge to a check that
        carried ``challenge_passed``: ``verify()`` is called, its outcome
        reported, and a success's device token returned.

        ``on_challenge`` and ``verify`` are required: code that has no answer
        to a challenge cannot call this. Raises :class:`GuardianError` as
        :meth:`check` does (nothing verified), and whatever ``on_challenge``
        or ``verify`` raise. Against a guardian older than
        ``challenge_passed`` (0.1.0, during a rolling upgrade), which refuses
        the field, a passed challenge lets the first check's attempt go
        ahead, as that release's contract says."""
        if not callable(on_challenge) or not callable(verify):
            raise ConfigError("attempt needs on_challenge and verify, both callables")
        fields = dict(ip=ip, account=account, recipient=recipient, device_token=device_token, cost=cost,
                      secret_fingerprint=secret_fingerprint, password_sha1=password_sha1)
        d = self.check(flow, challenge_passed=challenge_passed, **fields)
        if d.decision == "challenge" and not d.challenge_passed:
            if not on_challenge(d):
                return Attempt(d)
            try:
                d = self.check(flow, challenge_passed=True, **fields)
            except GuardianError as e:
                if e.code != "unknown_field":
                    raise
                d = replace(d, challenge_passed=True)
        if not d.proceed:
            return Attempt(d)
        ok = bool(verify())
        try:
            res = self.report(d.attempt_id, "success" if ok else "failure")
        except (UnavailableError, GuardianError) as e:
            return Attempt(d, verified=True, ok=ok, report_error=e)
        return Attempt(d, verified=True, ok=ok, device_token=res.device_token)

    def report(self, attempt_id: str, outcome: str) -> ReportResult:
        """Tells guardian how the attempt went (``success`` or ``failure``).
        An empty attempt id (a FAIL_OPEN decision) is nothing to report. A
        report is sent again only when the first never reached guardian; an
        ``already_reported`` answer to that second send counts as made.
        Raises :class:`UnavailableError` when guardian does not answer
        (guardian then counts the attempt as a failure, the safe side) and
        :class:`GuardianError` when it refuses (409 on a second report)."""
        if not attempt_id:
            return ReportResult()
        if self._local is not None and attempt_id.startswith(_LOCAL_PREFIX):
            self._local.settle(attempt_id, outcome, self._now())
            return ReportResult()
        try:
            status, _, data, retried = self._call("POST", "/v1/report", {"attempt_id": attempt_id, "outcome": outcome})
        except _Unavailable as e:
            raise UnavailableError(e.reason, e.detail) from None
        if status == 200:
            w = _json(data)
            if not isinstance(w, dict) or w.get("recorded") is not True:
                raise UnavailableError("malformed", 'report answer is not {"recorded": true}')
            return ReportResult(device_token=str(w.get("device_token") or ""))
        err = _answer_error(status, data)
        if retried and isinstance(err, GuardianError) and err.already_reported:
            return ReportResult()
        raise err

    def account_status(self, account: str) -> AccountStatus:
        """Where ``account`` stands (admin scope)."""
        w = self._admin("GET", "/v1/accounts/status?account=" + urllib.parse.quote(account, safe=""), None)
        return AccountStatus(int(w.get("consecutive_failures", 0)), bool(w.get("blocked")),
                             int(w.get("next_allowed_ms", 0)), _limits(w.get("limits")),
                             int(w.get("remembered_guesses", 0)), _networks(w.get("networks")))

    def reset_account(self, account: str) -> None:
        """Lifts the account's hard stop and clears its counters (admin
        scope). Only after the owner proved who they are through a verified
        channel."""
        self._admin("POST", "/v1/accounts/reset", {"account": account})

    def add_deny(self, *, ttl: str, network: str = "", account: str = "", reason: str = "") -> ListAdded:
        """Adds a deny list entry, fleet-wide (admin scope): every check from
        ``network`` (an IPv4 or IPv6 prefix of any length, or one address)
        or of ``account``, one of them, is answered ``block`` with rule
        ``deny-list`` for ``ttl`` (a duration like ``1h`` or ``30d``, at most
        a year)."""
        body = {"ttl": ttl}
        if network:
            body["network"] = network
        if account:
            body["account"] = account
        if reason:
            body["reason"] = reason
        return self._list_added(self._admin("POST", "/v1/lists/deny", body, 201))

    def add_allow(self, network: str, exempt, *, ttl: str = "", reason: str = "") -> ListAdded:
        """Adds an allow list entry, fleet-wide (admin scope): checks from
        ``network`` skip the rules named in ``exempt``, for ``ttl`` or, without
        one, until deleted. Only rules with ``key: ip``, ``key: global`` or
        ``type: distinct`` may be named (:class:`GuardianError` 400
        ``invalid_field`` otherwise): an allow entry never lifts an
        account's limits or its hard stop."""
        body = {"network": network, "exempt": list(exempt)}
        if ttl:
            body["ttl"] = ttl
        if reason:
            body["reason"] = reason
        return self._list_added(self._admin("POST", "/v1/lists/allow", body, 201))

    def lists(self) -> Lists:
        """The deny and allow entries in force (admin scope)."""
        w = self._admin("GET", "/v1/lists", None)
        return Lists(_list_entries(w.get("deny")), _list_entries(w.get("allow")))

    def delete_list_entry(self, entry_id: str) -> None:
        """Removes the entry ``entry_id``, fleet-wide (admin scope); one not in
        force is :class:`GuardianError` 404."""
        self._admin("DELETE", "/v1/lists/" + urllib.parse.quote(entry_id, safe=""), None)

    @staticmethod
    def _list_added(w) -> ListAdded:
        if not isinstance(w.get("id"), str) or not w["id"]:
            raise UnavailableError("malformed", 'list answer is not {"id", "expires_at"}')
        expires = w.get("expires_at")
        return ListAdded(w["id"], expires if isinstance(expires, str) else None)

    def check_password(self, password: Union[str, bytes]) -> bool:
        """Whether ``password`` is known to be breached, for password set and
        change flows (NIST SP 800-63B 3.1.1.2): refuse a new password when
        True. Only its SHA-1 is sent (:func:`password_sha1`); guardian answers
        from the filter of ``serve --breached`` and never logs, keeps or
        counts it. A password not in the list answers True 1 time in 256.
        Raises :class:`NoBreachedFilterError` when guardian has no filter that
        can answer, :class:`UnavailableError` when it does not answer and
        :class:`GuardianError` when it refuses: none of them is a "no"."""
        try:
            w = self._admin("POST", "/v1/passwords/check", {"sha1": password_sha1(password)})
        except GuardianError as e:
            if e.status == 404:
                raise NoBreachedFilterError(e.status, e.code, e.message) from None
            raise
        breached = w.get("breached")
        if not isinstance(breached, bool):
            raise UnavailableError("malformed", 'password check answer is not {"breached": bool}')
        return breached

    def close(self) -> None:
        """Closes this thread's connection to guardian."""
        conn = getattr(self._conns, "conn", None)
        if conn is not None:
            conn.close()
            self._conns.conn = None

    # -- internals

    def _admin(self, method, path, body, ok=200) -> dict:
        try:
            status, _, data, _ = self._call(method, path, body)
        except _Unavailable as e:
            raise UnavailableError(e.reason, e.detail) from None
        if status != ok:
            raise _answer_error(status, data)
        w = _json(data)
        if not isinstance(w, dict):
            raise UnavailableError("malformed", "answer is not a JSON object")
        return w

    def _decision(self, status, headers, data) -> Decision:
        if status in (200, 429):
            d = _parse_decision(status, headers, data)
            if d is not None:
                return d
            if status == 429:
                wait = _retry_after_ms(headers.get("retry-after", ""))
                return Decision("slow", retry_after_ms=_PROXY_RETRY_AFTER_MS if wait is None else wait)
            raise _Unavailable("malformed", "check answer is not a decision")
        if status >= 500:
            raise _Unavailable("server_error", f"status {status}")
        if status >= 400:
            raise _answer_error(status, data)
        raise _Unavailable("malformed", f"unexpected status {status}")

    def _decide_unavailable(self, reason, flow, account, recipient, ip) -> Decision:
        if self._policy is Policy.FAIL_CLOSED:
            return Decision("slow", retry_after_ms=self._closed, unavailable=True, reason=reason)
        if self._policy is Policy.FAIL_OPEN:
            return Decision("allow", unavailable=True, reason=reason)
        action, rule, wait, aid = self._local.decide(flow, account, recipient, ip, self._now())
        return Decision(action, rule=rule, retry_after_ms=wait, attempt_id=aid, unavailable=True, reason=reason)

    def _call(self, method, path, body):
        """One request within the deadline (the first-call allowance while no
        call has ended), sent a second time only when the first failed before
        reaching guardian (the connection was refused). Returns (status,
        headers, body, retried)."""
        token = self._tokens()
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        headers = {"Accept": "application/json", "Authorization": "Bearer " + token}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        deadline = time.monotonic() + (self._timeout if self._warm else self._first_timeout)
        try:
            return self._send(method, path, payload, headers, deadline)
        finally:
            self._warm = True

    def _send(self, method, path, payload, headers, deadline):
        for attempt in (0, 1):
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Unavailable("timeout", "deadline passed")
            conn, reused = self._conn(left)
            try:
                conn.request(method, self._path + path, body=payload, headers=headers)
                res = conn.getresponse()
                data = res.read(_MAX_ANSWER)
                hdrs = {k.lower(): v for k, v in res.getheaders()}
                if res.will_close:
                    self.close()
                return res.status, hdrs, data, attempt > 0
            except (socket.timeout, TimeoutError) as e:
                self.close()
                raise _Unavailable("timeout", str(e)) from None
            except ConnectionRefusedError as e:
                self.close()
                if attempt == 0:
                    continue
                raise _Unavailable("connection", str(e)) from None
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as e:
                # A kept-alive connection guardian had closed: nothing of this
                # request reached it, so one more send is safe.
                self.close()
                if attempt == 0 and reused:
                    continue
                raise _Unavailable("connection", str(e)) from None
            except (OSError, http.client.HTTPException) as e:
                self.close()
                raise _Unavailable("connection", str(e)) from None
        raise _Unavailable("connection", "unreachable")

    def _conn(self, timeout):
        conn = getattr(self._conns, "conn", None)
        if conn is not None:
            conn.timeout = timeout
            if conn.sock is not None:
                conn.sock.settimeout(timeout)
            return conn, True
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=timeout)
        self._conns.conn = conn
        return conn, False


def _json(data: bytes):
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def _limits(ws) -> tuple:
    if not isinstance(ws, list):
        return ()
    return tuple(Limit(str(w.get("rule", "")), int(w.get("remaining", 0)), int(w.get("reset_ms", 0)))
                 for w in ws if isinstance(w, dict))


def _networks(ws) -> tuple:
    if not isinstance(ws, list):
        return ()
    return tuple(NetworkStatus(str(w.get("network", "")), int(w.get("consecutive_failures", 0)), bool(w.get("blocked")))
                 for w in ws if isinstance(w, dict))


def _list_entries(ws) -> tuple:
    if not isinstance(ws, list):
        return ()
    return tuple(ListEntry(str(w.get("id", "")), network=str(w.get("network") or ""), account=str(w.get("account") or ""),
                           exempt=tuple(str(r) for r in (w.get("exempt") or [])), reason=str(w.get("reason") or ""),
                           created_at=str(w.get("created_at") or ""),
                           expires_at=w["expires_at"] if isinstance(w.get("expires_at"), str) else None,
                           subject=str(w.get("subject") or ""), source=str(w.get("source") or ""))
                 for w in ws if isinstance(w, dict))


def _parse_decision(status, headers, data) -> Optional[Decision]:
    w = _json(data)
    if not isinstance(w, dict):
        return None
    action = w.get("decision")
    if action not in ("allow", "challenge", "slow", "block") or (action in ("allow", "challenge")) != (status == 200):
        return None
    try:
        retry = int(w.get("retry_after_ms") or 0)
        shadow = tuple(ShadowResult(str(s.get("rule", "")), str(s.get("decision", "")), int(s.get("retry_after_ms") or 0))
                       for s in (w.get("shadow") or []))
        limits = _limits(w.get("limits"))
    except (TypeError, ValueError, AttributeError):
        return None
    if retry < 0:
        return None
    if action == "slow" and retry == 0:
        retry = _retry_after_ms(headers.get("retry-after", "")) or 0
    return Decision(action, rule=str(w.get("rule") or ""), retry_after_ms=retry, attempt_id=str(w.get("attempt_id") or ""),
                    degraded=bool(w.get("degraded")), limits=limits, shadow=shadow, trust=str(w.get("trust") or ""),
                    repeat_guess=bool(w.get("repeat_guess")), repeat_capped=w.get("repeat_capped") is True,
                    ratelimit_policy=headers.get("ratelimit-policy", ""),
                    ratelimit=headers.get("ratelimit", ""),
                    breached=w["breached"] if isinstance(w.get("breached"), bool) else None)


def _retry_after_ms(v: str) -> Optional[int]:
    v = v.strip()
    if v.isdigit() and int(v) <= 86400:
        return int(v) * 1000
    if v:
        try:
            from email.utils import parsedate_to_datetime
            return max(0, math.ceil((parsedate_to_datetime(v).timestamp() - time.time()) * 1000))
        except (TypeError, ValueError):
            return None
    return None


def _answer_error(status, data) -> Exception:
    if status == 429:
        return UnavailableError("throttled", f"status {status}")
    if status >= 500:
        return UnavailableError("server_error", f"status {status}")
    if status >= 400:
        w = _json(data)
        e = w.get("error") if isinstance(w, dict) else None
        if isinstance(e, dict):
            return GuardianError(status, str(e.get("code", "")), str(e.get("message", "")))
        return GuardianError(status)
    return UnavailableError("malformed", f"unexpected status {status}")
