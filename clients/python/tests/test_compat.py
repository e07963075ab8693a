"""A client of this release against the previous release's API, and the
defaults every client shares."""

import json
import os
import unittest

import guardian_client
from guardian_client import Client, Policy, fingerprint

from .fleet import ROOT
from .standin import PREVIOUS, OldGuardian

CHALLENGED = '{"decision":"challenge","rule":"spray","attempt_id":"at-1","degraded":false,"limits":[],"shadow":[]}'


class AgainstThePreviousRelease(unittest.TestCase):
    """During a rolling upgrade a client of this release meets the previous
    release's guardian: what it sends by default is never refused there, and
    a newer field goes out only when the caller uses its feature."""

    def old(self, decision=None) -> OldGuardian:
        g = OldGuardian(decision) if decision else OldGuardian()
        self.addCleanup(g.close)
        return g

    def client(self, g) -> Client:
        c = Client(g.url, tokens="t", on_unavailable=Policy.FAIL_CLOSED, timeout=5.0)
        self.addCleanup(c.close)
        return c

    def test_every_call_with_what_it_sends_by_default(self):
        g = self.old()
        c = self.client(g)
        for kw in ({"flow": "login", "account": "alice@example.com", "device_token": "dev-1"},
                   {"flow": "password_reset", "account": "alice@example.com"},
                   {"flow": "otp_send", "recipient": "+15550100000", "cost": 2},
                   {"flow": "otp_verify", "recipient": "+15550100000"}):
            flow = kw.pop("flow")
            d = c.check(flow, ip="203.0.113.7", **kw)
            self.assertFalse(d.unavailable, d)
        c.report("at-1", "success")
        c.reset_account("alice@example.com")
        a = c.attempt("login", ip="203.0.113.7", account="alice@example.com",
                      on_challenge=lambda d: False, verify=lambda: True)
        self.assertEqual((a.verified, a.ok, a.device_token), (True, True, "dev-old"))
        self.assertEqual(g.refused, [])

    def test_a_challenge_passed_goes_ahead_as_that_release_says(self):
        g = self.old(CHALLENGED)
        c = self.client(g)
        a = c.attempt("login", ip="203.0.113.7", account="alice@example.com",
                      on_challenge=lambda d: True, verify=lambda: True)
        self.assertEqual((a.verified, a.ok, a.decision.attempt_id), (True, True, "at-1"))
        self.assertEqual(g.refused, ["/v1/check challenge_passed"])

    def test_a_newer_field_only_when_used(self):
        for f in PREVIOUS["newer"]:
            self.assertNotIn(f, PREVIOUS["requests"]["POST /v1/check"])
        g = self.old()
        c = self.client(g)
        with self.assertRaises(guardian_client.GuardianError):
            c.check("login", ip="203.0.113.7", account="a", secret_fingerprint=fingerprint(b"k", b"s"))
        with self.assertRaises(guardian_client.GuardianError):
            c.check("login", ip="203.0.113.7", account="a", challenge_passed=True)
        with self.assertRaises(guardian_client.GuardianError):
            c.check("login", ip="203.0.113.7", account="a", password_sha1=guardian_client.password_sha1("hunter2"))
        self.assertEqual(sorted(g.refused), sorted(f"/v1/check {f}" for f in PREVIOUS["newer"]))


class Defaults(unittest.TestCase):
    def test_timeouts_are_every_clients(self):
        with open(os.path.join(ROOT, "client", "testdata", "defaults.json"), encoding="utf-8") as f:
            want = json.load(f)
        self.assertEqual(round(guardian_client.DEFAULT_TIMEOUT * 1000), want["timeout_ms"])
        self.assertEqual(round(guardian_client.DEFAULT_FIRST_CALL_TIMEOUT * 1000), want["first_call_timeout_ms"])


if __name__ == "__main__":
    unittest.main()
