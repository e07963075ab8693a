"""The Python client against a real guardian on a real Redis."""

import json
import math
import os
import secrets
import socket
import tempfile
import unittest

from guardian_client import (Client, ConfigError, Decision, FileToken, GuardianError, LocalLimits, Policy, Rate,
                             Responder, UnavailableError, fingerprint, RULE_LOCAL_ACCOUNT, NoBreachedFilterError,
                             password_sha1, NetworkStatus, ListEntry, Lists)

from .fleet import BREACHED, NETWORK_RULES, ROOT, Fleet, free_port


def account() -> str:
    return f"user-{secrets.token_hex(6)}@example.com"


class AgainstGuardian(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet()

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()

    def client(self, tokens=None, **kw) -> Client:
        c = Client(self.fleet.url, tokens=tokens or self.fleet.check_token, on_unavailable=Policy.FAIL_CLOSED,
                   timeout=5.0, **kw)
        self.addCleanup(c.close)
        return c

    def test_allow(self):
        d = self.client().check("login", ip="203.0.113.7", account=account())
        self.assertEqual(d.decision, "allow")
        self.assertTrue(d.proceed)
        self.assertTrue(d.attempt_id)
        self.assertFalse(d.degraded)
        self.assertFalse(d.unavailable)
        self.assertEqual([(l.rule, l.remaining) for l in d.limits], [("ct-account", 1)])
        self.assertIsNone(Responder().refuse(d))

    def test_slow_with_retry_after(self):
        c, user = self.client(), account()
        for _ in range(2):
            self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "allow")
        d = c.check("login", ip="203.0.113.7", account=user)
        self.assertEqual((d.decision, d.rule, d.unavailable), ("slow", "ct-account", False))
        self.assertFalse(d.proceed)
        self.assertGreater(d.retry_after_ms, 0)
        self.assertIn('"ct-account"', d.ratelimit_policy)

        r = Responder().refuse(d)
        self.assertEqual(r.status, 429)
        self.assertEqual(r.headers["Retry-After"], str(math.ceil(d.retry_after_ms / 1000)))
        self.assertEqual(r.headers["RateLimit-Policy"], d.ratelimit_policy)
        self.assertEqual(json.loads(r.body), {"error": "too_many_attempts", "next": "wait"})
        quiet = Responder(slow_as_invalid=True).refuse(d)
        self.assertEqual(quiet.status, 401)
        self.assertNotIn("Retry-After", quiet.headers)
        self.assertNotIn("RateLimit", quiet.headers)
        self.assertEqual(quiet.body, Responder(slow_as_invalid=True).invalid_credentials(d).body)

        # The verified reset lifts it (admin scope).
        admin = self.client(tokens=self.fleet.admin_token)
        self.assertEqual(admin.account_status(user).limits[0].remaining, 0)
        admin.reset_account(user)
        self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "allow")

    def test_repeat_guess(self):
        c, user = self.client(), account()
        fp = fingerprint(b"the auth service's fingerprint key", b"last year's password")
        d = c.check("login", ip="203.0.113.7", account=user, secret_fingerprint=fp)
        self.assertFalse(d.repeat_guess)
        c.report(d.attempt_id, "failure")
        d = c.check("login", ip="203.0.113.7", account=user, secret_fingerprint=fp)
        self.assertTrue(d.repeat_guess)
        self.assertEqual([(l.rule, l.remaining) for l in d.limits], [("ct-account", 1)])
        admin = self.client(tokens=self.fleet.admin_token)
        self.assertEqual(admin.account_status(user).remembered_guesses, 1)

    def test_repeat_capped(self):
        c, user = self.client(), account()
        fp = fingerprint(b"the auth service's fingerprint key", b"a constant fingerprint")
        c.report(c.check("login", ip="203.0.113.7", account=user, secret_fingerprint=fp).attempt_id, "failure")
        # 20 repeats a day are free; the 21st counts like any failure.
        for _ in range(20):
            d = c.check("login", ip="203.0.113.7", account=user, secret_fingerprint=fp)
            self.assertEqual((d.decision, d.repeat_guess, d.repeat_capped), ("allow", True, False))
        d = c.check("login", ip="203.0.113.7", account=user, secret_fingerprint=fp)
        self.assertEqual((d.decision, d.repeat_guess, d.repeat_capped), ("allow", False, True))
        self.assertEqual([(l.rule, l.remaining) for l in d.limits], [("ct-account", 0)])

    def test_familiar_networks(self):
        _, url = self.fleet.start_guardian(NETWORK_RULES, "networks.log")
        c = Client(url, tokens=self.fleet.check_token, on_unavailable=Policy.FAIL_CLOSED, timeout=5.0)
        admin = Client(url, tokens=self.fleet.admin_token, on_unavailable=Policy.FAIL_CLOSED, timeout=5.0)
        self.addCleanup(c.close)
        self.addCleanup(admin.close)
        user = account()
        self.assertEqual(admin.account_status(user).networks, ())
        # The owner's success makes 198.51.100.0/24 familiar; failures from
        # another of its addresses count there, not for other networks.
        c.report(c.check("login", ip="198.51.100.7", account=user).attempt_id, "success")
        for _ in range(3):
            c.report(c.check("login", ip="198.51.100.9", account=user).attempt_id, "failure")
        s = admin.account_status(user)
        self.assertEqual((s.consecutive_failures, s.blocked), (0, False))
        self.assertEqual(len(s.networks), 1)
        n = s.networks[0]
        self.assertIsInstance(n, NetworkStatus)
        self.assertRegex(n.network, r"^h-[A-Za-z0-9_-]{22}$")
        self.assertEqual((n.consecutive_failures, n.blocked), (3, True))
        self.assertEqual(c.check("login", ip="198.51.100.9", account=user).decision, "block")
        self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "allow")

    def test_lists(self):
        _, url = self.fleet.start_guardian(NETWORK_RULES, "lists.log")
        c = Client(url, tokens=self.fleet.check_token, on_unavailable=Policy.FAIL_CLOSED, timeout=5.0)
        admin = Client(url, tokens=self.fleet.admin_token, on_unavailable=Policy.FAIL_CLOSED, timeout=5.0)
        self.addCleanup(c.close)
        self.addCleanup(admin.close)
        user = account()
        denied = admin.add_deny(account=user, ttl="1h", reason="incident 7")
        self.assertTrue(denied.id)
        self.assertRegex(denied.expires_at, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        d = c.check("login", ip="203.0.113.7", account=user)
        self.assertEqual((d.decision, d.rule), ("block", "deny-list"))
        self.assertGreater(d.retry_after_ms, 0)

        allowed = admin.add_allow("192.0.2.0/28", ["ct-ip"], reason="office NAT")
        self.assertIsNone(allowed.expires_at)
        ls = admin.lists()
        self.assertIsInstance(ls, Lists)
        [deny] = [e for e in ls.deny if e.id == denied.id]
        self.assertIsInstance(deny, ListEntry)
        # The account only as its pseudonym.
        self.assertRegex(deny.account, r"^h-[A-Za-z0-9_-]{22}$")
        self.assertNotIn(user, repr(ls))
        self.assertEqual((deny.network, deny.reason, deny.expires_at, deny.subject, deny.source),
                         ("", "incident 7", denied.expires_at, "client-test", "api"))
        [allow] = [e for e in ls.allow if e.id == allowed.id]
        self.assertEqual((allow.network, allow.exempt, allow.reason, allow.expires_at), ("192.0.2.0/28", ("ct-ip",), "office NAT", None))

        # An allow entry never lifts an account's limits.
        with self.assertRaises(GuardianError) as e:
            admin.add_allow("192.0.2.0/28", ["ct-hard-stop"])
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid_field"))

        admin.delete_list_entry(denied.id)
        admin.delete_list_entry(allowed.id)
        self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "allow")
        self.assertEqual([e.id for e in admin.lists().deny + admin.lists().allow if e.id in (denied.id, allowed.id)], [])
        with self.assertRaises(GuardianError) as e:
            admin.delete_list_entry(denied.id)
        self.assertEqual(e.exception.status, 404)

    def test_report_twice(self):
        c, user = self.client(), account()
        d = c.check("login", ip="203.0.113.7", account=user)
        first = c.report(d.attempt_id, "success")
        self.assertTrue(first.device_token)
        with self.assertRaises(GuardianError) as e:
            c.report(d.attempt_id, "success")
        self.assertEqual((e.exception.status, e.exception.code), (409, "already_reported"))
        self.assertTrue(e.exception.already_reported)
        # The device token keeps a budget of its own for the account.
        self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "allow")
        self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "slow")
        own = c.check("login", ip="203.0.113.7", account=user, device_token=first.device_token)
        self.assertEqual(own.decision, "allow")

    def test_refused_request_is_no_decision(self):
        with self.assertRaises(GuardianError) as e:
            self.client().check("login", ip="300.1.1.1", account=account())
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid_ip"))
        with self.assertRaises(GuardianError) as e:
            self.client().report("forged", "failure")
        self.assertTrue(e.exception.invalid_attempt)

    def test_file_token_is_read_again(self):
        with tempfile.NamedTemporaryFile("w", delete=False) as f:
            f.write("not-a-token\n")
        self.addCleanup(os.unlink, f.name)
        c = self.client(tokens=FileToken(f.name, interval=0))
        with self.assertRaises(GuardianError) as e:
            c.check("login", ip="203.0.113.7", account=account())
        self.assertEqual(e.exception.status, 401)
        with open(f.name, "w") as out:
            out.write(self.fleet.check_token + "\n")
        self.assertEqual(c.check("login", ip="203.0.113.7", account=account()).decision, "allow")

    def test_attempt_allowed(self):
        c, user, calls = self.client(), account(), []
        a = c.attempt("login", ip="203.0.113.7", account=user,
                      on_challenge=lambda d: calls.append("challenge") or True,
                      verify=lambda: calls.append("verify") or True)
        self.assertEqual((a.decision.decision, a.verified, a.ok, calls), ("allow", True, True, ["verify"]))
        self.assertTrue(a.device_token)
        self.assertIsNone(a.report_error)
        # The success was reported: its device token has a budget of its own.
        for _ in range(2):
            c.check("login", ip="203.0.113.7", account=user)
        self.assertEqual(c.check("login", ip="203.0.113.7", account=user, device_token=a.device_token).decision, "allow")

    def test_attempt_slowed_verifies_nothing(self):
        c, user, calls = self.client(), account(), []
        for _ in range(2):
            c.check("login", ip="203.0.113.7", account=user)
        a = c.attempt("login", ip="203.0.113.7", account=user,
                      on_challenge=lambda d: calls.append("challenge") or True,
                      verify=lambda: calls.append("verify") or True)
        self.assertEqual((a.decision.decision, a.verified, calls), ("slow", False, []))
        self.assertEqual(Responder().refuse(a.decision).status, 429)

    def test_attempt_needs_both_steps(self):
        c = self.client()
        with self.assertRaises(TypeError):
            c.attempt("login", ip="203.0.113.7", account=account(), verify=lambda: True)  # pylint: disable=missing-kwoa
        with self.assertRaises(ConfigError):
            c.attempt("login", ip="203.0.113.7", account=account(), on_challenge=None, verify=lambda: True)
        self.assertEqual(c.stats.checks, 0)

    def test_callable_token(self):
        calls = []
        c = self.client(tokens=lambda: calls.append(1) or self.fleet.check_token)
        self.assertEqual(c.check("login", ip="203.0.113.7", account=account()).decision, "allow")
        self.assertEqual(len(calls), 1)

    def test_check_password_without_a_filter(self):
        # This fleet serves no breached-password filter: unknown, never a "no".
        with self.assertRaises(NoBreachedFilterError) as e:
            self.client().check_password("hunter2")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        self.assertIsInstance(e.exception, GuardianError)
        # A check with password_sha1 is decided as usual, breached unknown.
        d = self.client().check("login", ip="203.0.113.7", account=account(), password_sha1=password_sha1("hunter2"))
        self.assertEqual((d.decision, d.breached), ("allow", None))


class BreachedPasswords(unittest.TestCase):
    """guardian serving a breached-password filter of clients/testdata/breached.txt."""

    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet(breached=BREACHED)

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()

    def client(self, tokens=None) -> Client:
        c = Client(self.fleet.url, tokens=tokens or self.fleet.check_token, on_unavailable=Policy.FAIL_CLOSED, timeout=5.0)
        self.addCleanup(c.close)
        return c

    def test_check_password(self):
        c = self.client()
        with open(BREACHED, encoding="utf-8") as f:
            listed = [line.rstrip("\n") for line in f if line.strip()]
        self.assertTrue(listed)
        for p in listed:
            self.assertTrue(c.check_password(p), p)
            self.assertTrue(c.check_password(p.encode()), p)
        # Not in the list, and not one of the 1 in 256 false positives of
        # this filter.
        self.assertFalse(c.check_password("a password nobody has breached yet"))
        self.assertTrue(self.client(tokens=self.fleet.admin_token).check_password("hunter2"))

    def test_only_the_hash_is_sent(self):
        self.assertEqual(password_sha1("password"), "5baa61e4c9b93f3f0682250b6cf8331b7ee68fd8")
        self.assertEqual(password_sha1("café"), password_sha1("café".encode("utf-8")))
        self.client().check_password("hunter2")
        self.assertNotIn("hunter2", self.fleet.log())
        self.assertNotIn(password_sha1("hunter2"), self.fleet.log())

    def test_check_carries_password_sha1(self):
        # The answer's breached is the filter's, the decision guardian's as
        # without the field; a check without it has breached None.
        c = self.client()
        for pw, want in (("hunter2", True), ("a password nobody has breached yet", False)):
            d = c.check("login", ip="203.0.113.7", account=account(), password_sha1=password_sha1(pw))
            self.assertEqual((d.decision, d.breached), ("allow", want), pw)
        self.assertIsNone(c.check("login", ip="203.0.113.7", account=account()).breached)
        a = c.attempt("login", ip="203.0.113.7", account=account(), password_sha1=password_sha1("hunter2"),
                      on_challenge=lambda d: False, verify=lambda: True)
        self.assertEqual((a.verified, a.decision.breached), (True, True))
        self.assertNotIn(password_sha1("hunter2"), self.fleet.log())

    def test_refused_token(self):
        with self.assertRaises(GuardianError) as e:
            self.client(tokens="not-a-token").check_password("hunter2")
        self.assertEqual(e.exception.status, 401)
        self.assertNotIsInstance(e.exception, NoBreachedFilterError)


class GuardianDown(unittest.TestCase):
    """No guardian at the address: each policy decides, and says so."""

    def setUp(self):
        self.url = f"http://127.0.0.1:{free_port()}"

    def client(self, policy, **kw) -> Client:
        return Client(self.url, tokens="t", on_unavailable=policy, timeout=2.0, **kw)

    def test_no_policy_is_refused(self):
        with self.assertRaises(TypeError):
            Client(self.url, tokens="t")  # pylint: disable=missing-kwoa
        with self.assertRaises(ConfigError):
            Client(self.url, tokens="t", on_unavailable="fail_open")

    def test_fail_closed(self):
        c = self.client(Policy.FAIL_CLOSED)
        d = c.check("login", ip="203.0.113.7", account=account())
        self.assertEqual((d.decision, d.retry_after_ms, d.unavailable, d.reason), ("slow", 1000, True, "connection"))
        self.assertEqual(Responder().refuse(d).headers["Retry-After"], "1")
        self.assertEqual(c.stats.failed_open, 0)

    def test_fail_open(self):
        c = self.client(Policy.FAIL_OPEN)
        d = c.check("login", ip="203.0.113.7", account=account())
        self.assertEqual((d.decision, d.attempt_id, d.unavailable), ("allow", "", True))
        self.assertEqual(c.report(d.attempt_id, "failure").device_token, "")
        self.assertEqual((c.stats.checks, c.stats.unavailable, c.stats.failed_open), (1, 1, 1))

    def test_local(self):
        c = self.client(Policy.LOCAL, local=LocalLimits(account=Rate(2, 60.0)))
        user = account()
        first = c.check("login", ip="203.0.113.7", account=user)
        second = c.check("login", ip="203.0.113.8", account=user)
        self.assertEqual([first.decision, second.decision], ["allow", "allow"])
        self.assertTrue(first.attempt_id.startswith("local:"))
        third = c.check("login", ip="203.0.113.9", account=user.upper())
        self.assertEqual((third.decision, third.rule, third.unavailable), ("slow", RULE_LOCAL_ACCOUNT, True))
        self.assertGreater(third.retry_after_ms, 0)
        # A success gives its reservation back.
        c.report(first.attempt_id, "success")
        self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "allow")

    def test_local_flood(self):
        # A flood of new accounts from new addresses fills the tables; fresh
        # users are allowed after it, and an account slowed for longer than
        # the flood's keys stays slowed.
        c = self.client(Policy.LOCAL, local=LocalLimits(account=Rate(2, 60.0), max_keys=50))
        user = account()
        for _ in range(2):
            self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "allow")
        for i in range(500):
            c.check("login", ip=f"198.51.100.{i % 250}", account=f"flood-{i}@example.com")
            if i % 10 == 0:
                self.assertEqual(c.check("login", ip="203.0.113.7", account=user).decision, "slow")
        for i in range(10):
            d = c.check("login", ip=f"192.0.2.{i}", account=account())
            self.assertEqual((d.decision, d.unavailable), ("allow", True))

    def test_check_password_raises(self):
        # No policy decides a password check.
        with self.assertRaises(UnavailableError) as e:
            self.client(Policy.FAIL_OPEN).check_password("hunter2")
        self.assertEqual(e.exception.reason, "connection")

    def test_report_and_admin_calls_raise(self):
        c = self.client(Policy.FAIL_CLOSED)
        with self.assertRaises(UnavailableError) as e:
            c.report("an-attempt", "failure")
        self.assertEqual(e.exception.reason, "connection")
        with self.assertRaises(UnavailableError):
            c.reset_account("alice")

    def test_timeout(self):
        # Accepts connections (the kernel's backlog) and never answers.
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        self.addCleanup(s.close)
        c = Client(f"http://127.0.0.1:{s.getsockname()[1]}", tokens="t", on_unavailable=Policy.FAIL_CLOSED, timeout=0.2)
        d = c.check("login", ip="203.0.113.7", account=account())
        self.assertEqual((d.decision, d.unavailable, d.reason), ("slow", True, "timeout"))


class RedisDown(unittest.TestCase):
    """guardian up, its Redis gone: guardian's own fallback decides, degraded."""

    def test_degraded(self):
        fleet = Fleet()
        self.addCleanup(fleet.close)
        c = Client(fleet.url, tokens=fleet.check_token, on_unavailable=Policy.FAIL_CLOSED, timeout=5.0)
        self.addCleanup(c.close)
        self.assertFalse(c.check("login", ip="203.0.113.7", account=account()).degraded)
        fleet.stop_redis()
        user = account()
        got = [c.check("login", ip="203.0.113.7", account=user) for _ in range(3)]
        self.assertEqual([d.decision for d in got], ["allow", "allow", "slow"], fleet.log())
        self.assertTrue(all(d.degraded and not d.unavailable for d in got))
        self.assertEqual(got[2].rule, "ct-account")


class Proceed(unittest.TestCase):
    def test_only_allow_or_a_challenge_passed(self):
        cases = [(Decision("allow"), True), (Decision("challenge"), False),
                 (Decision("challenge", challenge_passed=True), True), (Decision("slow"), False), (Decision("block"), False)]
        for d, want in cases:
            self.assertEqual(d.proceed, want, d)
            self.assertEqual(Responder().refuse(d) is None, want, d)
        self.assertEqual(Responder().refuse(Decision("challenge")).status, 401)


class FirstCall(unittest.TestCase):
    """The calls made before the client's first call ended have
    first_call_timeout; later ones have timeout."""

    def test_allowance(self):
        import http.server
        import threading
        import time as t

        class Slow(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                t.sleep(0.3)  # longer than timeout, far shorter than the allowance
                out = b'{"decision":"allow","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}'
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up: the second call's timeout

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        c = Client(f"http://127.0.0.1:{srv.server_address[1]}", tokens="t", on_unavailable=Policy.FAIL_CLOSED,
                   timeout=0.1, first_call_timeout=10.0)
        self.addCleanup(c.close)
        first = c.check("login", ip="203.0.113.7", account=account())
        self.assertEqual((first.decision, first.unavailable), ("allow", False))
        second = c.check("login", ip="203.0.113.7", account=account())
        self.assertEqual((second.unavailable, second.reason), (True, "timeout"))


class Fingerprints(unittest.TestCase):
    def test_shared_vectors(self):
        with open(os.path.join(ROOT, "client", "testdata", "fingerprint.json"), encoding="utf-8") as f:
            vectors = json.load(f)["vectors"]
        self.assertTrue(vectors)
        for v in vectors:
            got = fingerprint(v["key"], v["secret"])
            self.assertEqual(got, v["fingerprint"], v)
            self.assertEqual(got, fingerprint(v["key"].encode(), v["secret"].encode()))
            self.assertRegex(got, r"^[A-Za-z0-9_-]{43}$")


if __name__ == "__main__":
    unittest.main()
