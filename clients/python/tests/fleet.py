"""A real guardian on a real Redis, both on loopback, for the client's tests.

guardian is the binary in GUARDIAN_BIN (`make test-clients` builds it once),
or built here with `go build`; Redis is a redis-server process of its own
with no persistence. GUARDIAN_ROOT names the checkout when the tests run
from a copy, against the installed package (`make test-clients` does).
"""

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.environ.get("GUARDIAN_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))

# The rules every client test runs, shared with the TypeScript client.
RULES = os.path.join(ROOT, "clients", "testdata", "rules.yaml")
# The breached-password list of a fleet that serves one, shared with the
# TypeScript client.
BREACHED = os.path.join(ROOT, "clients", "testdata", "breached.txt")
# Rules that learn an account's familiar networks, where it counts its
# consecutive failures apart, with an address rule for allow list entries,
# shared with the TypeScript client.
NETWORK_RULES = os.path.join(ROOT, "clients", "testdata", "networks.yaml")
# Rules that challenge a password sprayed over accounts, for the README's
# snippets.
CHALLENGE_RULES = os.path.join(ROOT, "clients", "testdata", "challenge.yaml")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what, cond, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise RuntimeError(f"{what} did not come up within {timeout}s")


class Fleet:
    """A redis-server and a guardian serving on it; close() stops both.
    start_guardian() starts more guardians on the same Redis. With
    ``breached``, a plain password list, every guardian of the fleet also
    serves a breached-password filter built from it."""

    def __init__(self, rules: str = RULES, breached: str = ""):
        self.breached = breached
        self.dir = tempfile.mkdtemp(prefix="guardian-client-test-")
        self.procs = []
        try:
            self._start(rules)
        except BaseException:
            self.close()
            raise

    def _start(self, rules):
        binary = os.environ.get("GUARDIAN_BIN")
        if not binary:
            binary = os.path.join(self.dir, "guardian")
            subprocess.run(["go", "build", "-o", binary, "./cmd/guardian"], cwd=ROOT, check=True)
        self.binary = binary
        self.key_file = os.path.join(self.dir, "signing-key")
        with open(self.key_file, "w") as f:
            f.write(secrets.token_hex(32))

        self.redis_port = free_port()
        self.redis = self._spawn(["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", self.dir], "redis.log")
        _wait("redis-server", lambda: self._connects(self.redis_port))

        self.filter = ""
        if self.breached:
            self.filter = os.path.join(self.dir, "breached.bgf")
            subprocess.run([binary, "breached", "build", "--format", "plain", "--out", self.filter, self.breached],
                           check=True, capture_output=True)
        self.guardian, self.url = self.start_guardian(rules, "guardian.log")
        self.check_token = self.token("check")
        self.admin_token = self.token("admin")

    def start_guardian(self, rules: str = RULES, log: str = "guardian.log"):
        """Starts a guardian on the fleet's Redis (and its breached-password
        filter, if any) and waits until /readyz answers 200; returns its
        process and its URL."""
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        p = self._spawn([self.binary, "serve", "--addr", f"127.0.0.1:{port}",
                         "--redis-url", f"redis://127.0.0.1:{self.redis_port}/0",
                         "--signing-key-file", self.key_file, "--rules", rules,
                         "--store-timeout", "250ms", "--log-format", "text"]
                        + (["--breached", self.filter] if self.filter else []), log)
        _wait("guardian", lambda: self._ready(url) == 200)
        return p, url

    def _spawn(self, argv, log):
        out = open(os.path.join(self.dir, log), "wb")
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs.append(p)
        return p

    @staticmethod
    def _connects(port) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            return False

    @staticmethod
    def _ready(url) -> int:
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                return r.status
        except OSError:
            return 0

    def token(self, scope: str) -> str:
        out = subprocess.run([self.binary, "token", "--scope", scope, "--subject", "client-test",
                              "--signing-key-file", self.key_file], check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def stop(self, p):
        """Stops one process the fleet started."""
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def stop_redis(self):
        self.redis.kill()
        self.redis.wait()

    def log(self, name="guardian.log") -> str:
        with open(os.path.join(self.dir, name), errors="replace") as f:
            return f.read()

    def close(self):
        for p in reversed(self.procs):
            self.stop(p)
        shutil.rmtree(self.dir, ignore_errors=True)
