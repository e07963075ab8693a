"""Every Python snippet of the READMEs and docs, run as written against a
real guardian whose rules challenge a sprayed password.

A snippet may use, besides the client, only what an auth service has of its
own: load_secret, second_factor_ok, verify_password and store_password
(given here), and GUARDIAN_URL and GUARDIAN_CHECK_TOKEN_FILE in the
environment. A snippet that defines login(req) is then driven through a
spray: it must never verify the sprayed password once guardian challenges
it, unless its challenge branch ran and was passed. A snippet that defines
change_password(user, new_password) must refuse, and never store, a
password guardian's breached-password filter holds.
"""

import glob
import os
import re
import secrets
import textwrap
import types
import unittest
from unittest import mock

from .fleet import BREACHED, CHALLENGE_RULES, ROOT, Fleet

# Where client snippets live: every Markdown file of the checkout's docs.
DOCS = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "clients", "python", "README.md"),
        *sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))]

BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)

# The spray: the rules challenge a sprayed password past its 3rd failure.
BURST = 3
ACCOUNTS = 12


def snippets():
    """(file, source) of every ```python block of DOCS."""
    out = []
    for path in DOCS:
        with open(path, encoding="utf-8") as f:
            out += [(os.path.relpath(path, ROOT), m.group(1)) for m in BLOCK.finditer(f.read())]
    return out


class Host:
    """The auth service around a snippet: its users, its second factor, and a
    log of what the snippet called, in order."""

    def __init__(self, sprayed: str):
        self.sprayed = sprayed
        # bob's password is the one being sprayed; his second factor 135790.
        self.passwords = {"bob@example.com": sprayed, "alice@example.com": "correct horse"}
        self.codes = {"bob@example.com": "135790"}
        self.calls = []

    def namespace(self) -> dict:
        def load_secret(name):
            return b"the auth service's fingerprint key, 32 bytes or more"

        def second_factor_ok(user, code):
            self.calls.append(("challenge", user))
            return bool(code) and self.codes.get(user) == code

        def verify_password(user, password):
            self.calls.append(("verify", user))
            return self.passwords.get(user) == password

        def store_password(user, password):
            self.calls.append(("store", user))

        return {"__name__": "snippet", "load_secret": load_secret, "second_factor_ok": second_factor_ok,
                "verify_password": verify_password, "store_password": store_password}


def request(user, password, ip, code=""):
    form = {"username": user, "password": password}
    if code:
        form["code"] = code
    return types.SimpleNamespace(form=form, remote_addr=ip, cookies={})


def spray(host: Host, login) -> list:
    """Drives login through a spray and returns what it did wrong."""
    problems = []

    def call(label, req, want_status, want_calls):
        host.calls.clear()
        status, _, body = login(req)
        if status != want_status or host.calls != want_calls:
            problems.append(f"{label}: {status} {body!r} after {host.calls}, want {want_status} after {want_calls}")

    for i in range(ACCOUNTS):
        user = f"user-{i}@example.com"
        req = request(user, host.sprayed, f"10.{i}.0.1")
        if i < BURST:
            call(f"spray {i + 1}, before the challenge", req, 401, [("verify", user)])
        else:
            call(f"spray {i + 1}, challenged", req, 401, [("challenge", user)])
    bob = "bob@example.com"
    call("bob without his second factor", request(bob, host.sprayed, "10.200.0.1"), 401, [("challenge", bob)])
    call("bob with a wrong second factor", request(bob, host.sprayed, "10.201.0.1", "000000"), 401, [("challenge", bob)])
    call("bob with his second factor", request(bob, host.sprayed, "10.202.0.1", "135790"), 200,
         [("challenge", bob), ("verify", bob)])
    return problems


def change(host: Host, change_password) -> list:
    """Changes a password to one the filter holds, then to one of this run
    alone, and returns what change_password did wrong."""
    problems = []
    for label, password, stored in (("a breached password", "hunter2", False),
                                     ("a password of its own", host.sprayed, True)):
        host.calls.clear()
        status, body = change_password("alice@example.com", password)
        if (status == 200) != stored or (host.calls == [("store", "alice@example.com")]) != stored:
            problems.append(f"{label}: {status} {body!r} after {host.calls}, want it {'' if stored else 'not '}stored")
    return problems


# A password change that never asks guardian: the check below must catch it.
CHANGES_UNCHECKED = '''
def change_password(user, new_password):
    store_password(user, new_password)
    return 200, "password changed"
'''


# A login that skips guardian's challenges: it refuses only slow and block.
# The check below must catch it, or it could not catch a README that did.
SKIPS_CHALLENGES = '''
import os
from guardian_client import Client, FileToken, Policy, Responder, fingerprint

guardian = Client(os.environ["GUARDIAN_URL"], tokens=FileToken(os.environ["GUARDIAN_CHECK_TOKEN_FILE"]),
                  on_unavailable=Policy.LOCAL)
PEPPER = load_secret("fingerprint-key")

def login(req):
    user, password = req.form["username"], req.form["password"]
    d = guardian.check("login", ip=req.remote_addr, account=user, secret_fingerprint=fingerprint(PEPPER, password))
    if d.decision in ("slow", "block"):
        r = Responder().refuse(d)
        return r.status, r.headers, r.body
    ok = verify_password(user, password)
    guardian.report(d.attempt_id, "success" if ok else "failure")
    return (200, {}, b"") if ok else (401, {}, b"")
'''


class Snippets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fleet = Fleet(CHALLENGE_RULES, breached=BREACHED)
        cls.token_file = os.path.join(cls.fleet.dir, "check-token")
        with open(cls.token_file, "w") as f:
            f.write(cls.fleet.check_token)

    @classmethod
    def tearDownClass(cls):
        cls.fleet.close()

    def run_snippet(self, source: str) -> Host:
        """Runs source as a module of the auth service; returns its host, with
        the names the snippet defined in host.ns."""
        host = Host(f"Winter-{secrets.token_hex(4)}!")  # a password of this run alone
        host.ns = host.namespace()
        env = {"GUARDIAN_URL": self.fleet.url, "GUARDIAN_CHECK_TOKEN_FILE": self.token_file}
        with mock.patch.dict(os.environ, env):
            exec(compile(textwrap.dedent(source), "<snippet>", "exec"), host.ns)  # pylint: disable=exec-used
        return host

    def test_every_snippet_runs_and_never_skips_a_challenge(self):
        found = snippets()
        self.assertTrue(any(f == os.path.join("clients", "python", "README.md") for f, _ in found),
                        "clients/python/README.md has no python snippet")
        logins = changes = 0
        for where, source in found:
            with self.subTest(where=where, snippet=source.splitlines()[0]):
                host = self.run_snippet(source)
                if "login" in host.ns:
                    logins += 1
                    self.assertEqual(spray(host, host.ns["login"]), [])
                if "change_password" in host.ns:
                    changes += 1
                    self.assertEqual(change(host, host.ns["change_password"]), [])
        self.assertGreater(logins, 0, "no snippet defines login(req)")
        self.assertGreater(changes, 0, "no snippet defines change_password(user, new_password)")

    def test_the_check_catches_a_change_that_stores_a_breached_password(self):
        host = self.run_snippet(CHANGES_UNCHECKED)
        problems = change(host, host.ns["change_password"])
        self.assertTrue(any(p.startswith("a breached password") for p in problems), problems)

    def test_the_check_catches_a_snippet_that_skips_challenges(self):
        host = self.run_snippet(SKIPS_CHALLENGES)
        problems = spray(host, host.ns["login"])
        self.assertTrue(any("challenged" in p for p in problems), problems)


if __name__ == "__main__":
    unittest.main()
