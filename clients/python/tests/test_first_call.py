"""A process's first check, against a guardian that has just started: the
first-call allowance keeps it from timing out."""

import json
import os
import subprocess
import sys
import unittest

import guardian_client

from .fleet import Fleet

STARTS = 50

# One check at once, from a process of its own, with the client's defaults.
FIRST_CHECK = """
import json, sys, time
from guardian_client import Client, Policy
c = Client(sys.argv[1], tokens=sys.argv[2], on_unavailable=Policy.FAIL_CLOSED)
t = time.monotonic()
d = c.check("login", ip="203.0.113.7", account=sys.argv[3])
print(json.dumps({"unavailable": d.unavailable, "reason": d.reason, "decision": d.decision, "ms": (time.monotonic() - t) * 1000}))
"""


class FirstCall(unittest.TestCase):
    def test_fifty_starts_each_checked_at_once(self):
        fleet = Fleet()
        self.addCleanup(fleet.close)
        # The subprocess imports the package this suite imports.
        env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(guardian_client.__file__)))
        results = []
        for i in range(STARTS):
            p, url = fleet.start_guardian(log=f"guardian-{i}.log")
            try:
                out = subprocess.run([sys.executable, "-c", FIRST_CHECK, url, fleet.check_token, f"first-{i}@example.com"],
                                     capture_output=True, text=True, env=env, timeout=60, check=True)
            finally:
                fleet.stop(p)
            results.append(json.loads(out.stdout))
        late = [r for r in results if r["unavailable"]]
        ms = sorted(r["ms"] for r in results)
        print(f"\npython first checks: {STARTS - len(late)}/{STARTS} answered; ms min {ms[0]:.1f} median "
              f"{ms[len(ms) // 2]:.1f} max {ms[-1]:.1f}", file=sys.stderr)
        self.assertEqual(late, [], "first checks the client's policy decided")
        self.assertTrue(all(r["decision"] == "allow" for r in results), results)


if __name__ == "__main__":
    unittest.main()
