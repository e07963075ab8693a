"""The package installs offline from the checkout, as its README says:
`pip install --no-build-isolation ./clients/python`, with the setuptools the
system has (Debian's python3-setuptools), nothing fetched."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from .fleet import ROOT

# The system's Python, whose setuptools is the distribution's; another one
# with GUARDIAN_INSTALL_PYTHON.
PYTHON = os.environ.get("GUARDIAN_INSTALL_PYTHON") or (
    "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)

INSPECT = """
import importlib.metadata as m, json, guardian_client
md = m.metadata("guardian-client")
print(json.dumps({"file": guardian_client.__file__, "version": md["Version"], "license": md["License"],
                  "timeout": guardian_client.DEFAULT_TIMEOUT}))
"""


class Install(unittest.TestCase):
    def test_offline_with_the_systems_setuptools(self):
        work = tempfile.mkdtemp(prefix="guardian-client-install-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        # pip builds in the source tree: install from a copy, so the checkout
        # stays clean.
        src = os.path.join(work, "src")
        shutil.copytree(os.path.join(ROOT, "clients", "python"), src,
                        ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"))
        venv = os.path.join(work, "venv")
        subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", venv], check=True)
        py = os.path.join(venv, "bin", "python")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS="", PIP_DISABLE_PIP_VERSION_CHECK="1")
        out = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", src],
                             capture_output=True, text=True, env=env)
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        # -I: the installed package, not one on the current directory's path.
        got = json.loads(subprocess.run([py, "-I", "-c", INSPECT], capture_output=True, text=True, check=True,
                                        cwd=work).stdout)
        self.assertTrue(got["file"].startswith(os.path.realpath(venv)) or got["file"].startswith(venv), got)
        self.assertEqual((got["version"], got["license"], got["timeout"]), ("0.1.0", "Apache-2.0", 0.1))


if __name__ == "__main__":
    unittest.main()
