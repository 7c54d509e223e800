#!/usr/bin/env python3
"""setup's hot text (oneshot/hot-text.ld, written by bench/hot_text.py): the script names functions
the binary has, and the link put them in .text.boot, as oneshot/meson.build asks the linker to. Both
can silently stop holding: a rename on the boot path leaves a name no input section has any more (the
function then lies with the cold code again), and a build whose linker does not take the script links
in source order. Either way setup still works and only its peak RSS grows (bench/README.md), so only
this check would notice."""

import os
import re
import subprocess
import unittest

from unbounded_tests.harness import main

SCRIPT = os.environ["HOT_TEXT_SCRIPT"]
SETUP_BIN = os.environ["SETUP_BIN"]
LINKED_WITH_SCRIPT = os.environ["HOT_TEXT"] == "true"
OPTION = os.environ["HOT_TEXT_OPTION"]  # allowed or disabled
# Of the listed functions, how many the binary must still have and hold in .text.boot. Not all: a
# missing one only costs RSS. The build the script was recorded from has all but the few whose local
# names several objects share. Other compiles inline differently and keep fewer of its names: the
# arm64 and ASan builds 80-90 %, the package's hardening flags, a shared libstdc++ (its 104 functions
# are not ours to place then), an -O0 build (where GCC makes no .text.unlikely or .text.startup).
AS_RECORDED = os.environ["HOT_TEXT_AS_RECORDED"] == "true"
MIN_FOUND = 0.9 if AS_RECORDED else 0.6

STARTUP = "*(.text.startup .text.startup.*)"
LINE = re.compile(r"^    \*\((\.text\.\S+)\)$")


def script_sections(text):
    """The input sections the script lists, one per line, after the static constructors' line."""
    body = text[text.index(STARTUP) + len(STARTUP):text.index("  }\n}\nINSERT BEFORE .text;")]
    return [LINE.match(line).group(1) if LINE.match(line) else line for line in body.strip("\n").split("\n")]


def listed_functions(sections, syms):
    names = set()
    for section in sections:
        if section.startswith(".text.unlikely."):
            # a function's .cold part, or a function declared [[gnu::cold]] (bench/hot_text.py)
            name = section[len(".text.unlikely."):]
            names.add(name + ".cold" if name + ".cold" in syms else name)
        else:
            names.add(section[len(".text."):])
    return names


def function_symbols(binary):
    """name -> (address, size) of the binary's functions, from readelf (any architecture's ELF)."""
    out = subprocess.run(["readelf", "-sW", binary], check=True, capture_output=True, text=True).stdout
    syms, seen_twice = {}, set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 8 and fields[3] == "FUNC" and fields[6] != "UND":
            size = int(fields[2], 16) if fields[2].startswith("0x") else int(fields[2])
            name = fields[7].split("@")[0]
            if name in syms:
                seen_twice.add(name)
            syms[name] = (int(fields[1], 16), size)
    for name in seen_twice:  # a local name several objects define (__tcf_0, a .constprop clone) names none
        syms.pop(name, None)
    return syms


def section_range(binary, name):
    """(start, end) of an output section of the binary, or None."""
    out = subprocess.run(["readelf", "-SW", binary], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 5 and fields[1] == name:
            return int(fields[3], 16), int(fields[3], 16) + int(fields[5], 16)
    return None


class HotText(unittest.TestCase):
    def setUp(self):
        with open(SCRIPT) as f:
            self.sections = script_sections(f.read())
        self.syms = function_symbols(SETUP_BIN)
        self.names = listed_functions(self.sections, self.syms)

    def test_the_script_lists_input_sections_of_functions(self):
        self.assertGreater(len(self.sections), 100, "the script is nearly empty: re-run bench/hot_text.py")
        self.assertEqual(self.sections, sorted(set(self.sections)), "the list is sorted and names each section once")
        for section in self.sections:
            self.assertTrue(section.startswith(".text.") and "*" not in section and " " not in section, section)

    def test_the_binary_has_the_functions_listed(self):
        found = self.names & self.syms.keys()
        missing = sorted(self.names - found)
        self.assertGreaterEqual(len(found), MIN_FOUND * len(self.names),
                                f"{len(missing)} of the {len(self.names)} functions in {SCRIPT} are not in "
                                f"{SETUP_BIN} (e.g. {missing[:3]}): re-run bench/hot_text.py")

    def test_the_listed_functions_lie_in_text_boot(self):
        boot = section_range(SETUP_BIN, ".text.boot")
        if not LINKED_WITH_SCRIPT:
            if OPTION == "disabled":
                self.skipTest("-Dhot_text_order=disabled")
            self.fail(f"{SETUP_BIN} was linked without {SCRIPT}: the linker does not take it")
        self.assertIsNotNone(boot, f"{SETUP_BIN} has no .text.boot: the link did not use {SCRIPT}")
        found = [self.syms[name] for name in self.names if name in self.syms]
        inside = [(a, s) for a, s in found if boot[0] <= a and a + s <= boot[1]]
        self.assertGreaterEqual(len(inside), MIN_FOUND * len(self.names),
                                f"of the {len(self.names)} functions listed, {len(inside)} are in .text.boot")
        # .text.boot holds the listed functions and nothing else: the static constructors and main,
        # and alignment padding between functions.
        listed_bytes = sum(s for _, s in inside)
        self.assertLessEqual(boot[1] - boot[0], 1.25 * listed_bytes + 64 * 1024,
                             f".text.boot is {boot[1] - boot[0]} bytes for {listed_bytes} bytes of listed functions")


if __name__ == "__main__":
    main()
