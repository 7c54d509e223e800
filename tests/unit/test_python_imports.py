#!/usr/bin/env python3
"""The Python tests' import rule: a test module imports its bases and helpers from the shared
package tests/lib/unbounded_tests, never from another test module, and does not reach into another
test directory through sys.path (PYTHONPATH, which meson sets, is the one way to the package). Every name
a test module imports from the package must exist there: the system, containerd, consumer and package
tiers only run as root in booted machines, so this is where their imports are checked on every build.
A module of the package imported by its bare name (`from harness import main`, the layout before the
package) is reported too."""

import ast
import importlib
import os
import tempfile
import unittest

from unbounded_tests import TESTS_DIR
from unbounded_tests.harness import main

SOURCE_ROOT = os.path.dirname(TESTS_DIR)
PACKAGE = "unbounded_tests"
# The package's modules by their bare names (harness, cdi_case, ...): importing one of those bare is the
# old way (a sys.path entry into tests/integration), which no longer finds them.
MODULES = {n[:-3] for n in os.listdir(os.path.join(TESTS_DIR, "lib", PACKAGE)) if n.endswith(".py") and n != "__init__.py"}


def python_files(top):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith(".py"):
                yield os.path.join(dirpath, name)


def imports(tree):
    """(line, module, names) for every absolute import in the module, nested ones included; names is
    None for `import module`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.lineno, node.module, [alias.name for alias in node.names]


def touches_sys_path(tree):
    """Lines that change sys.path (sys.path.insert/append/extend, or an assignment to sys.path)."""
    def is_sys_path(n):
        return isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value):
            yield node.lineno
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(is_sys_path(t) for t in targets):
                yield node.lineno


def violations(top, rel_to):
    """What breaks the rule among the Python files under `top` (paths shown relative to `rel_to`)."""
    found = []
    for path in python_files(top):
        rel = os.path.relpath(path, rel_to)
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        is_test = os.path.basename(path).startswith("test_")
        for line, module, names in sorted(imports(tree), key=lambda i: i[0]):
            parts = module.split(".")
            if any(p.startswith("test_") for p in parts):
                found.append(f"{rel}:{line}: imports the test module {module}; move what it needs to {PACKAGE}")
            elif parts[0] == PACKAGE:
                found.extend(f"{rel}:{line}: {e}" for e in missing(module, names))
            elif parts[0] in MODULES:
                found.append(f"{rel}:{line}: imports {module} bare; it is {PACKAGE}.{module}")
        if is_test:
            found.extend(f"{rel}:{line}: changes sys.path; the shared code is on PYTHONPATH as {PACKAGE}"
                         for line in sorted(touches_sys_path(tree)))
    return found


def missing(module, names):
    """Why `from module import names` (or `import module`) would fail, as messages ([] when it works)."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        return [f"cannot import {module}: {e}"]
    out = []
    for name in names or []:
        if hasattr(mod, name):
            continue
        try:
            importlib.import_module(f"{module}.{name}")  # a submodule: from unbounded_tests import cdi_schema
        except ImportError:
            out.append(f"{module} has no {name}")
    return out


class TestTheRuleHolds(unittest.TestCase):
    def test_no_test_module_imports_another(self):
        found = []
        for top in (TESTS_DIR, os.path.join(SOURCE_ROOT, "bench")):
            found += violations(top, SOURCE_ROOT)
        self.assertEqual(found, [])

    def test_the_package_is_what_pythonpath_reaches(self):
        # Not a stray copy elsewhere on sys.path: the files this check reads are the ones the tests run.
        pkg = importlib.import_module(PACKAGE)
        self.assertEqual(os.path.dirname(os.path.abspath(pkg.__file__)), os.path.join(TESTS_DIR, "lib", PACKAGE))


class TestTheCheckFails(unittest.TestCase):
    """The check itself: each way of breaking the rule is reported."""

    def check(self, name, text):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
            return violations(d, d)

    def test_an_import_of_a_test_module(self):
        self.assertEqual(self.check("test_a.py", "from test_cdi import CdiCase\n"),
                         [f"test_a.py:1: imports the test module test_cdi; move what it needs to {PACKAGE}"])
        self.assertEqual(len(self.check("test_a.py", "import os\n\ndef f():\n    import test_setup\n")), 1)
        self.assertEqual(len(self.check("bench.py", "from tests.integration.test_cdi import fake_hook\n")), 1)

    def test_a_sys_path_change_in_a_test_module(self):
        text = "import sys\nsys.path.insert(0, '../integration')\nsys.path += ['x']\n"
        self.assertEqual(self.check("test_a.py", text),
                         [f"test_a.py:{n}: changes sys.path; the shared code is on PYTHONPATH as {PACKAGE}" for n in (2, 3)])
        self.assertEqual(self.check("helper.py", text), [])  # a helper (cri.py's generated stubs) may

    def test_a_name_the_package_lacks(self):
        self.assertEqual(self.check("test_a.py", f"from {PACKAGE}.harness import MachineRoot, NoSuchThing\n"),
                         [f"test_a.py:1: {PACKAGE}.harness has no NoSuchThing"])
        self.assertEqual(len(self.check("test_a.py", f"from {PACKAGE}.no_such_module import x\n")), 1)
        self.assertEqual(self.check("test_a.py", f"from {PACKAGE} import cdi_case, TESTS_DIR\n"), [])

    def test_a_bare_import_of_a_module_of_the_package(self):
        self.assertEqual(self.check("test_a.py", "from harness import main\nimport cdi_schema\n"),
                         [f"test_a.py:1: imports harness bare; it is {PACKAGE}.harness",
                          f"test_a.py:2: imports cdi_schema bare; it is {PACKAGE}.cdi_schema"])


if __name__ == "__main__":
    main()
