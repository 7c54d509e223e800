#!/usr/bin/env python3
"""Each binary's command line against its man page: the options `--help` lists are the
man page's OPTIONS, both ways; the usage lines are the SYNOPSIS, line for line; every option is in a
synopsis; and `--help` ends with the exit statuses and the man page to read. The generator takes no
options (systemd gives it directories): its usage line is its SYNOPSIS."""

import os
import re
import subprocess
import unittest

from unbounded_tests.harness import GENERATOR, SETUP, main
from unbounded_tests.man_pages import man_page, section, terms

LICENSE_BIN = os.environ.get("LICENSE_BIN", "")
HOST_BIN = os.environ.get("HOST_BIN", "")
CONSUMERS_BIN = os.environ.get("CONSUMERS_BIN", "")
OPTION = re.compile(r"(?<![\w-])(--?[a-z][a-z-]*)")
# Shown by every program and not part of any synopsis.
EVERYWHERE = {"-h", "--help", "--version"}


def plain(scdoc_line):
    """A synopsis line as a terminal shows it: no bold or underline, the program by its name."""
    text = re.sub(r"[*_]", "", scdoc_line).strip()
    first, _, rest = text.partition(" ")
    return (os.path.basename(first) + " " + rest).strip()


def man_synopsis(page):
    return [plain(line) for line in section(page, "SYNOPSIS").split("\n") if line.strip()]


def man_options(page):
    """The options named by the terms (the lines at column 0) of the OPTIONS section."""
    options = set()
    for term in terms(section(page, "OPTIONS")):
        options.update(re.findall(r"\*(--?[a-z][a-z-]*)\*", term))
    return options


def help_usage(text):
    """The usage lines of --help: 'Usage: ' and the lines under it that name the program again."""
    lines = text.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("Usage: "))
    usage = [lines[first][len("Usage: "):]]
    program = usage[0].split()[0]
    for line in lines[first + 1:]:
        if not line.strip().startswith(program + " ") or not line.startswith(" "):
            break
        usage.append(line.strip())
    return usage


def help_options(text):
    """The options of the 'Options:' block: each line's names, left of its description."""
    block = text.split("\nOptions:\n", 1)[1].split("\n\n", 1)[0]
    options = set()
    for line in block.split("\n"):
        m = re.match(r"  (-\S.*?)(?: {2,}|$)", line)
        if m:
            options.update(OPTION.findall(m.group(1)))
    return options


class CliCase(unittest.TestCase):
    binary = None
    page = None
    name = None

    def help(self):
        r = subprocess.run([self.binary, "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        return r.stdout

    def check_options_match(self):
        page = man_page(self.page)
        in_help, in_man = help_options(self.help()), man_options(page)
        self.assertGreaterEqual(len(in_man), 5, f"options read from {self.page}.scd: {in_man}")
        self.assertEqual(sorted(in_help - in_man), [], f"in --help, not in {self.page}'s OPTIONS")
        self.assertEqual(sorted(in_man - in_help), [], f"in {self.page}'s OPTIONS, not in --help")

    def check_usage_is_the_synopsis(self):
        page = man_page(self.page)
        self.assertEqual(help_usage(self.help()), man_synopsis(page))
        in_synopsis = set(OPTION.findall(" ".join(man_synopsis(page))))
        self.assertEqual(sorted(man_options(page) - EVERYWHERE - in_synopsis), [], "options no synopsis shows")

    def check_help_ends_with_exit_status_and_man_page(self):
        text = self.help()
        self.assertRegex(text, r"\nExit status: 0 [^\n]*, 1 [^\n]*, 2 [^\n]*")
        self.assertTrue(text.endswith(f"\nSee {self.page.rsplit('.', 1)[0]}({self.page.rsplit('.', 1)[1]}).\n"), text)


class CliChecks:
    """The three checks, for each binary's case (a mixin: CliCase itself names no binary)."""

    def test_help_options_are_the_man_page_options(self):
        self.check_options_match()

    def test_usage_lines_are_the_synopsis(self):
        self.check_usage_is_the_synopsis()

    def test_help_ends_with_exit_status_and_man_page(self):
        self.check_help_ends_with_exit_status_and_man_page()


class TestSetup(CliChecks, CliCase):
    binary = SETUP
    page = "unbounded-nvidia-setup.8"


class TestLicenseReload(CliChecks, CliCase):
    binary = LICENSE_BIN
    page = "unbounded-nvidia-license-reload.8"


class TestHost(CliChecks, CliCase):
    binary = HOST_BIN
    page = "unbounded-nvidia-host.8"


if CONSUMERS_BIN:  # built where gRPC and the CRI's api.proto were found (make's build: always)
    class TestConsumers(CliChecks, CliCase):
        binary = CONSUMERS_BIN
        page = "unbounded-nvidia-consumers.8"


class TestGenerator(unittest.TestCase):
    def test_no_options(self):
        self.assertIsNone(section(man_page("unbounded-nvidia-generator.8"), "OPTIONS"))

    def test_usage_line_is_the_synopsis(self):
        r = subprocess.run([GENERATOR], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertEqual(r.stdout, "")
        self.assertTrue(r.stderr.startswith("Usage: "), r.stderr)
        self.assertEqual([r.stderr.strip()[len("Usage: "):]], man_synopsis(man_page("unbounded-nvidia-generator.8")))


if __name__ == "__main__":
    main()
