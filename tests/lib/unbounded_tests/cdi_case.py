"""The base of the CDI spec tests (test_cdi.py, and the tests of the specs beside it): a machine that
setup has run on, and the spec compared with its golden file and checked against the CDI schema."""

import os
import re
import unittest

from . import TESTS_DIR, cdi_schema
from .harness import ARCH, MachineRoot

GOLDEN = os.path.join(TESTS_DIR, "golden", "cdi")
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
SPEC = "/etc/cdi/nvidia.yaml"


def fake_hook(commands, log=None):
    """A stand-in nvidia-cdi-hook whose --help lists `commands`; every run is counted in `log`."""
    lines = "".join(f"   {c}\\tsome help\\n" for c in commands)
    count = f'echo run >> "{log}"\n' if log else ""
    return (f"#!/bin/sh\n{count}"
            f'printf "NAME:\\n   NVIDIA CDI Hook - Command to structure files for usage inside a container\\n\\n'
            f'USAGE:\\n   nvidia-cdi-hook [global options] command [command options]\\n\\nCOMMANDS:\\n{lines}\\n'
            f'GLOBAL OPTIONS:\\n   --debug  Enable debug-level logging\\n"\n')


class CdiCase(unittest.TestCase):
    def ready_machine(self, **kw):
        m = MachineRoot(self).standard(**kw)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        return m

    def setup_ok(self, m):
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def read(self, m, path):
        with open(m.p(path)) as f:
            return f.read()

    def generate(self, m):
        r = m.run("generate-cdi")
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def assertGolden(self, name, text):
        path = os.path.join(GOLDEN, name)
        text = text.replace(ARCH, "@MULTIARCH@")
        # The marker names the version; the goldens do not change with it.
        text = re.sub(r"^# Written by unbounded-nvidia-setup \S+;", "# Written by unbounded-nvidia-setup @VERSION@;", text)
        if UPDATE:
            os.makedirs(GOLDEN, exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        with open(path) as f:
            expected = f.read()
        if text != expected:
            import difflib
            diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True), path, "generated"))
            self.fail(f"spec differs from {name}:\n{diff}")

    def assertSchemaValid(self, text):
        self.assertEqual(cdi_schema.errors(text), [])

