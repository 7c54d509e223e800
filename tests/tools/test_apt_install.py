#!/usr/bin/env python3
"""tests/apt-install.sh against a stand-in apt-get: an update that fails (a mirror mid-sync) is retried and
then left to the install; the install's own failure stays fatal and loud."""

import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "apt-install.sh")

FAKE_APT = """#!/bin/sh
echo "$*" >> "$LOG"
case "$1" in
update) exit "$UPDATE_RC" ;;
install) exit "$INSTALL_RC" ;;
esac
"""


class TestAptInstall(unittest.TestCase):
    def run_script(self, update_rc, install_rc):
        with tempfile.TemporaryDirectory() as d:
            for name, text in (("apt-get", FAKE_APT), ("sleep", "#!/bin/sh\n"), ("sudo", '#!/bin/sh\nexec "$@"\n')):
                with open(os.path.join(d, name), "w") as f:
                    f.write(text)
                os.chmod(os.path.join(d, name), 0o755)
            log = os.path.join(d, "log")
            env = dict(os.environ, PATH=f"{d}:{os.environ['PATH']}", LOG=log, UPDATE_RC=str(update_rc), INSTALL_RC=str(install_rc))
            r = subprocess.run(["sh", SCRIPT, "meson", "catch2"], capture_output=True, text=True, env=env)
            with open(log) as f:
                calls = [line.split()[0] for line in f]
            return r, calls

    def test_a_good_update_is_run_once(self):
        r, calls = self.run_script(0, 0)
        self.assertEqual((r.returncode, calls), (0, ["update", "install"]))

    def test_a_failing_update_is_retried_then_left_to_the_install(self):
        r, calls = self.run_script(100, 0)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(calls, ["update", "update", "update", "install"])
        self.assertIn("apt-get update did not fetch every index", r.stderr)

    def test_a_failing_install_is_fatal_and_says_what(self):
        r, calls = self.run_script(100, 100)
        self.assertEqual(r.returncode, 1)
        self.assertIn("Failed to install the Debian packages: meson catch2", r.stderr)


if __name__ == "__main__":
    from unbounded_tests.harness import main
    main()
