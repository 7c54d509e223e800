#!/usr/bin/env python3
"""setup's hot-text order (oneshot/hot-text.order, written by bench/hot_text.py): the list names
functions the binary has, and the build put them together at the front of the text, as
oneshot/meson.build asks the linker to. Both can silently stop holding: a rename on the boot path
leaves a name the linker no longer finds (the function then lies with the cold code again), and a
build without gold links in source order. Either way setup still works and only its peak RSS grows
(bench/README.md), so only this check would notice."""

import os
import subprocess
import unittest

from unbounded_tests.harness import main

ORDER_FILE = os.environ["HOT_TEXT_ORDER_FILE"]
SETUP_BIN = os.environ["SETUP_BIN"]
LINKED_IN_ORDER = os.environ["HOT_TEXT"] == "true"
OPTION = os.environ["HOT_TEXT_OPTION"]  # allowed or disabled

ALWAYS_FIRST = [".text.startup", ".text.startup.*"]
# Of the listed functions, how many the binary must still have. Not all: a missing one only costs
# RSS. The build the list was recorded from keeps all but the few that share a local name; other
# compiles (arm64, ASan, the package's hardening flags) inline differently and keep 80-90 %.
AS_RECORDED = os.environ["HOT_TEXT_AS_RECORDED"] == "true"
MIN_FOUND = 0.9 if AS_RECORDED else 0.6
# The listed functions' span over their sizes: alignment padding between them, nothing else.
MAX_SPREAD = 1.25


def listed_functions(lines, syms):
    names = set()
    for section in lines[len(ALWAYS_FIRST):]:
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
    # A local name several objects define (__tcf_0, a .constprop clone) names none of them; the C
    # runtime's entry point is in crt1.o's one .text, which no order can move.
    for name in seen_twice | {"_start"}:
        syms.pop(name, None)
    return syms


class HotTextOrder(unittest.TestCase):
    def setUp(self):
        with open(ORDER_FILE) as f:
            self.lines = f.read().splitlines()
        self.syms = function_symbols(SETUP_BIN)
        self.names = listed_functions(self.lines, self.syms)

    def test_the_list_is_sections_of_functions(self):
        self.assertEqual(self.lines[:len(ALWAYS_FIRST)], ALWAYS_FIRST)
        rest = self.lines[len(ALWAYS_FIRST):]
        self.assertGreater(len(rest), 100, "the list is nearly empty: re-run bench/hot_text.py")
        self.assertEqual(rest, sorted(set(rest)), "the list is sorted and names each section once")
        for section in rest:
            self.assertTrue(section.startswith(".text.") and "*" not in section and " " not in section, section)

    def test_the_binary_has_the_functions_listed(self):
        found = self.names & self.syms.keys()
        missing = sorted(self.names - found)
        self.assertGreaterEqual(len(found), MIN_FOUND * len(self.names),
                                f"{len(missing)} of the {len(self.names)} functions in {ORDER_FILE} are not in "
                                f"{SETUP_BIN} (e.g. {missing[:3]}): re-run bench/hot_text.py")

    def test_the_listed_functions_lie_together(self):
        if not LINKED_IN_ORDER:
            if OPTION == "disabled":
                self.skipTest("-Dhot_text_order=disabled")
            self.fail(f"{SETUP_BIN} was linked without {ORDER_FILE}: the gold linker (binutils) is missing, "
                      "or says it cannot take --section-ordering-file")
        placed = [self.syms[name] for name in self.names if name in self.syms]
        span = max(a + s for a, s in placed) - min(a for a, _ in placed)
        total = sum(s for _, s in placed)
        self.assertLessEqual(span, MAX_SPREAD * total,
                             f"the {len(placed)} listed functions ({total} bytes) spread over {span} bytes")


if __name__ == "__main__":
    main()
