#!/usr/bin/env python3
"""The code's shape: no function of the programs (lib/, setup/, license-reload/, consumers/, generator/,
host/, fuzz/) is over 80 lines, counted from the first line of its signature to its closing brace, as the
commits that cut the long ones counted them; no comment points at an issue number, which a reader
of the code does not have (a comment says why in its own words); and the includes follow the
structure doc/how-it-works.md draws: a layer of lib/ includes only its own headers and those of the
layers below it, no program includes another's, and each program includes the layers its table says.

A function is found as .clang-format writes one (tests/unit/check_format.sh holds every file to it):
its opening brace alone on a line (BraceWrapping AfterFunction; control statements, classes,
namespaces and lambdas keep theirs on the line they open), at the indentation of its signature's
first line, with continuation lines indented deeper; it ends at the first '}' alone at that
indentation. A member function defined in its class is found the same way, one tab in. Lambdas and
local classes count in the function that holds them."""

import os
import re
import unittest

from unbounded_tests import TESTS_DIR
from unbounded_tests.harness import main

SOURCE_ROOT = os.path.dirname(TESTS_DIR)
TOPS = ("lib", "setup", "license-reload", "consumers", "generator", "host", "fuzz")
MAX_LINES = 80


def functions(text):
    """[(first line, last line, signature's first line)] of the functions in a C++ file's text."""
    lines = text.split("\n")
    found = []
    i = 1
    while i < len(lines):
        m = re.fullmatch(r"(\t*)\{", lines[i])
        if not m:
            i += 1
            continue
        indent = m.group(1)
        head = i - 1
        while head > 0 and lines[head].startswith(indent + "\t"):  # the signature's continuation lines
            head -= 1
        signature = lines[head]
        rest = signature[len(indent):]
        if (not signature.startswith(indent) or rest[:1] in ("", "\t", "/", "#", "}")
                or signature.rstrip().endswith((";", "{", "}"))):
            i += 1  # a block of some other kind
            continue
        end = i + 1
        while end < len(lines) and lines[end] != indent + "}":
            end += 1
        found.append((head + 1, end + 1, signature.strip()))
        i = end + 1
    return found


def source_files():
    for top in TOPS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(SOURCE_ROOT, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith((".cpp", ".hpp", ".h", ".c")):
                    yield os.path.join(dirpath, name)


LAYERS = ("core", "driver", "cdi", "consumer", "units", "license")  # lowest first
PROGRAMS = ("generator", "setup", "consumers", "host", "license-reload")


def includes_by_folder():
    """{folder ("lib/cdi", "setup"): {folder of each of our headers its files include}}."""
    folders = [f"lib/{layer}" for layer in LAYERS] + list(PROGRAMS)
    home = {}
    for folder in folders:
        for name in os.listdir(os.path.join(SOURCE_ROOT, folder)):
            if name.endswith((".hpp", ".h.in")):
                home.setdefault(name.removesuffix(".in"), set()).add(folder)
    uses = {folder: set() for folder in folders}
    for folder in folders:
        for name in os.listdir(os.path.join(SOURCE_ROOT, folder)):
            if name.endswith((".cpp", ".hpp")):
                with open(os.path.join(SOURCE_ROOT, folder, name), encoding="utf-8") as f:
                    for header in re.findall(r'^#include "([^"]+)"', f.read(), re.M):
                        uses[folder] |= home.get(header, set()) - {folder}
    return home, uses


def drawn_table():
    """{program: {layers}} from doc/how-it-works.md's table of what each program includes."""
    with open(os.path.join(SOURCE_ROOT, "doc", "how-it-works.md"), encoding="utf-8") as f:
        text = f.read()
    table = text[text.index("| program | the layers it includes |"):]
    out = {}
    for m in re.finditer(r"^\| `([\w-]+)/` \| ([^|]+) \|$", table.split("\n\n")[0], re.M):
        out[m.group(1)] = {word for word in re.findall(r"[a-z]+", m.group(2)) if word in LAYERS}
    return out


class TestCodeShape(unittest.TestCase):
    def test_the_finder_finds_functions_as_clang_format_writes_them(self):
        text = ("namespace x {\n"
                "\n"
                "// a comment\n"
                "int short_one() { return 1; }\n"
                "Result<void> two_lines(int a,\n"
                "\t\t       int b)\n"
                "{\n"
                "\tif (a) {\n"
                "\t\treturn {};\n"
                "\t}\n"
                "\t{\n"
                "\t\tint scoped = 0;\n"
                "\t}\n"
                "\tauto f = [&] {\n"
                "\t\treturn b;\n"
                "\t};\n"
                "}\n"
                "class C {\n"
                "public:\n"
                "\tint member() const\n"
                "\t{\n"
                "\t\treturn 2;\n"
                "\t}\n"
                "};\n"
                "}  // namespace x\n")
        self.assertEqual(functions(text), [(5, 17, "Result<void> two_lines(int a,"), (20, 23, "int member() const")])

    def test_no_function_is_over_80_lines(self):
        count, long_ones = 0, []
        for path in source_files():
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for first, last, signature in functions(text):
                count += 1
                if last - first + 1 > MAX_LINES:
                    long_ones.append(f"{os.path.relpath(path, SOURCE_ROOT)}:{first}: {last - first + 1} lines: {signature}")
        self.assertGreater(count, 500, "fewer functions found than the programs have: has the layout changed?")
        self.assertEqual(long_ones, [], f"functions over {MAX_LINES} lines: cut them along the steps they have")

    def test_no_comment_names_an_issue(self):
        found = []
        for path in source_files():
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    # Another project's issue is a reference a reader can follow ("NVIDIA/nvidia-docker issue 1787").
                    if re.search(r"\bissue #?\d+", line) and not re.search(r"[\w.-]+/[\w.-]+ issue \d+", line):
                        found.append(f"{os.path.relpath(path, SOURCE_ROOT)}:{n}: {line.strip()}")
        self.assertEqual(found, [])


    def test_includes_follow_the_layers_and_the_drawing(self):
        home, uses = includes_by_folder()
        self.assertEqual([h for h, folders in home.items() if len(folders) > 1], [],
                         "a header name in two folders: an include could not say which")
        wrong = []
        for i, layer in enumerate(LAYERS):
            for used in sorted(uses[f"lib/{layer}"]):
                if not used.startswith("lib/") or LAYERS.index(used[4:]) > i:
                    wrong.append(f"lib/{layer} includes {used}: a layer uses only those below it")
        for program in PROGRAMS:
            for used in sorted(uses[program]):
                if not used.startswith("lib/"):
                    wrong.append(f"{program}/ includes {used}/: no program uses another")
        self.assertEqual(wrong, [])
        drawn = drawn_table()
        self.assertEqual(sorted(drawn), sorted(PROGRAMS), "doc/how-it-works.md's table names every program once")
        for program in PROGRAMS:
            self.assertEqual({u[4:] for u in uses[program]}, drawn[program],
                             f"{program}/'s includes against doc/how-it-works.md's table")


if __name__ == "__main__":
    main()
