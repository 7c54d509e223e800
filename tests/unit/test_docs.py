#!/usr/bin/env python3
"""The documents against the code (a read of every statement against the code found
documents that had drifted from it). Each check reads the sources and the documents only, so it runs in
every build variant:
- VGPU_LICENSE_RELOAD_INTERVAL is a duration (lib/core/config.cpp parses it as the configuration's
  durations), not a number of seconds, wherever it is described;
- the optional files' free-space reserve (lib/driver/optional_fit.cpp) is described with its bounds;
- the license reloader's outcome labels (outcome_name()) are listed in its man page, all and only those;
- the generator's man page lists every path it writes (its golden trees), and names every unit its
  code writes, enables or orders against;
- README's fleet lists are the shipped ones: the alerts of fleet/unbounded-nvidia.rules.yml and the
  node conditions of the node-problem-detector monitor, all and only those; each man page's METRICS
  names every metric its program writes; setup(8) names every state file under /run/unbounded-nvidia."""

import json

import os
import re
import unittest

from unbounded_tests import TESTS_DIR
from unbounded_tests.harness import main
from unbounded_tests.man_pages import man_page, section, terms

SOURCE_ROOT = os.path.dirname(TESTS_DIR)


def read(rel):
    with open(os.path.join(SOURCE_ROOT, rel), encoding="utf-8") as f:
        return f.read()


def source_files(tops, endings):
    for top in tops:
        path = os.path.join(SOURCE_ROOT, top)
        if os.path.isfile(path):
            yield top
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(endings):
                    yield os.path.relpath(os.path.join(dirpath, name), SOURCE_ROOT)


def paragraphs(text):
    """Blank-line separated paragraphs, each with the number of its first line."""
    out, start, lines = [], 1, []
    for n, line in enumerate(text.split("\n"), 1):
        if line.strip():
            if not lines:
                start = n
            lines.append(line)
        elif lines:
            out.append((start, "\n".join(lines)))
            lines = []
    if lines:
        out.append((start, "\n".join(lines)))
    return out


class TheReloadIntervalIsADuration(unittest.TestCase):
    """apply_license_environment() parses VGPU_LICENSE_RELOAD_INTERVAL with parse_duration(), as the
    configuration's durations: 2m and 1m30s are taken, and a bare number is seconds."""

    VARIABLE = "VGPU_LICENSE_RELOAD_INTERVAL"
    # What said otherwise: "(seconds)", "timer seconds", "in seconds", "not a number of seconds".
    SECONDS_ONLY = re.compile(r"\(seconds\b|timer seconds|backstop seconds|in seconds|number of seconds")

    def test_the_code_parses_it_as_a_duration(self):
        code = read("lib/core/config.cpp")
        m = re.search(r'env\("%s"\).*?\n(.*?)\n\t\}' % self.VARIABLE, code, re.S)
        self.assertIsNotNone(m, "apply_license_environment() no longer reads the variable as it did")
        self.assertIn("parse_duration(", m.group(1))

    def test_no_document_calls_it_seconds(self):
        bad = []
        tops = ("README.md", "doc", "man", "units", "tests/README.md")
        for rel in source_files(tops, (".md", ".scd", ".in", ".timer", ".service", ".path", ".catalog")):
            for start, para in paragraphs(read(rel)):
                if self.VARIABLE in para and self.SECONDS_ONLY.search(para):
                    bad.append(f"{rel}:{start}: {self.SECONDS_ONLY.search(para).group(0)!r}")
        # The code's own words: --help, comments and the warning, on the lines around each mention.
        for rel in source_files(("lib", "setup", "license-reload", "generator"), (".cpp", ".hpp")):
            lines = read(rel).split("\n")
            for i, line in enumerate(lines):
                if self.VARIABLE in line:
                    near = "\n".join(lines[max(0, i - 1):i + 3])
                    if self.SECONDS_ONLY.search(near):
                        bad.append(f"{rel}:{i + 1}: {self.SECONDS_ONLY.search(near).group(0)!r}")
        self.assertEqual(bad, [], "described as seconds, but it is a duration (30s, 2m, 1m30s; a bare number is seconds)")

    def test_the_license_reloader_man_page_says_duration(self):
        page = read("man/unbounded-nvidia-license-reload.8.scd")
        described = [p for _, p in paragraphs(page) if self.VARIABLE in p and "interval" in p]
        self.assertTrue(described, "unbounded-nvidia-license-reload(8) does not describe the variable")
        self.assertTrue(any("duration" in p for p in described), described)


class TheSpaceReserveIsDescribed(unittest.TestCase):
    """space_reserve(): optional files are left out unless a fraction of the file system stays free,
    with a floor and a cap. unbounded-nvidia-setup(8) says all three, as the code has them."""

    FRACTIONS = {20: "a twentieth", 10: "a tenth", 50: "a fiftieth", 100: "a hundredth"}

    def bounds(self):
        code = read("lib/driver/optional_fit.cpp")
        m = re.search(r"space_reserve\(std::uint64_t total\)\s*\{\s*return std::clamp<std::uint64_t>\("
                      r"total / (\d+), (\d+)u << 20, (\d+)u << 20\);", code)
        self.assertIsNotNone(m, "space_reserve() is not written as it was: read its bounds afresh")
        return int(m.group(1)), int(m.group(2)), int(m.group(3))

    def test_the_setup_man_page_gives_the_fraction_the_floor_and_the_cap(self):
        divisor, floor_mib, cap_mib = self.bounds()
        page = read("man/unbounded-nvidia-setup.8.scd")
        described = [" ".join(p.split()) for _, p in paragraphs(page) if "Optional files" in p]
        self.assertTrue(described, "unbounded-nvidia-setup(8) no longer describes the optional files")
        text = described[0]
        for words in (self.FRACTIONS.get(divisor, f"1/{divisor}"), f"at least {floor_mib} MiB", f"at most {cap_mib} MiB"):
            self.assertIn(words, text)


class TheLicenseReloaderOutcomesAreListed(unittest.TestCase):
    """Every run of the license reloader ends in one outcome, whose label (outcome_name()) is in its
    STATUS= line and the metric unbounded_nvidia_license_reloads_total{outcome}. Its man page lists
    them all, and only those, each with its meaning."""

    def labels_in_code(self):
        header = read("lib/license/license_reload.hpp")
        m = re.search(r"enum class ReloadOutcome \{(.*?)\};", header, re.S)
        self.assertIsNotNone(m, "no enum class ReloadOutcome in license_reload.hpp")
        members = re.findall(r"^\s*(\w+),", m.group(1), re.M)
        names = dict(re.findall(r'case ReloadOutcome::(\w+): return "([^"]+)";', read("lib/license/license_reload.cpp")))
        self.assertEqual(sorted(names), sorted(members), "outcome_name() does not name every ReloadOutcome")
        metrics = re.search(r"ALL_OUTCOMES\[\] = \{(.*?)\};", read("lib/license/license_metrics.cpp"), re.S)
        self.assertIsNotNone(metrics, "no ALL_OUTCOMES in license_metrics.cpp")
        self.assertEqual(sorted(re.findall(r"ReloadOutcome::(\w+)", metrics.group(1))), sorted(members),
                         "the metrics do not count every ReloadOutcome")
        return set(names.values())

    def test_the_man_page_lists_exactly_the_labels_of_the_code(self):
        code = self.labels_in_code()
        self.assertGreaterEqual(len(code), 10, "fewer outcomes read from the code than there were: has its format changed?")
        outcomes = section(man_page("unbounded-nvidia-license-reload.8"), "OUTCOMES")
        self.assertIsNotNone(outcomes, "unbounded-nvidia-license-reload(8) has no OUTCOMES section")
        listed = []
        for term in terms(outcomes):
            listed += re.findall(r"\*([a-z][a-z-]*)\*", term)
        self.assertEqual(len(listed), len(set(listed)), f"listed twice: {listed}")
        self.assertEqual(sorted(set(listed) - code), [], "listed, but no outcome of the code")
        self.assertEqual(sorted(code - set(listed)), [], "outcomes of the code the man page does not list")
        for term in re.findall(r"^\*.*\n((?:\t.*\n?)+)", outcomes, re.M):
            self.assertGreater(len(term.split()), 5, f"an outcome without its meaning: {term!r}")


class TheGeneratorManPageNamesWhatItWrites(unittest.TestCase):
    """The generator's golden trees (tests/generator/*/expected, which the integration tier holds its
    real output to byte for byte) are every path it writes. Its man page's OUTPUT section lists each
    of them, and nothing else."""

    def written(self):
        paths = set()
        cases = os.path.join(TESTS_DIR, "generator")
        for case in sorted(os.listdir(cases)):
            expected = os.path.join(cases, case, "expected")
            for dirpath, _, filenames in os.walk(expected):
                for name in filenames:
                    if name != ".empty":  # keeps an empty expected tree in git
                        paths.add(os.path.relpath(os.path.join(dirpath, name), expected))
        return paths

    def test_the_output_section_lists_every_path_written_and_only_those(self):
        written = self.written()
        self.assertGreaterEqual(len(written), 20, "fewer paths in the golden trees than there were")
        output = section(man_page("unbounded-nvidia-generator.8"), "OUTPUT")
        self.assertIsNotNone(output, "unbounded-nvidia-generator(8) has no OUTPUT section")
        listed = []
        for term in terms(output, "_"):
            listed += re.findall(r"_([\w.@/-]+?)_(?=,|$)", term)
        self.assertEqual(len(listed), len(set(listed)), f"listed twice: {listed}")
        self.assertEqual(sorted(set(listed) - written), [], "listed, but in no golden tree")
        self.assertEqual(sorted(written - set(listed)), [], "written (tests/generator/*/expected), but not listed")

    def test_the_units_it_names_in_its_code_are_in_the_man_page(self):
        code = read("generator/generator.cpp")
        units = set(re.findall(r'"([\w-]+\.(?:service|path|timer))"', code))
        self.assertGreaterEqual(len(units), 10)
        page = read("man/unbounded-nvidia-generator.8.scd")
        self.assertEqual(sorted(u for u in units if u not in page), [], "units the generator writes, enables or orders against")



def readme_bullet(title):
    """The README's bullet that starts with **title.**, up to the next bullet or blank line."""
    text = read("README.md")
    start = text.index(f"- **{title}.**")
    end = min(i for i in (text.find("\n- ", start + 1), text.find("\n\n", start + 1), len(text)) if i >= 0)
    return text[start:end]


def expand_braces(text):
    """Every name a man page abbreviates as last_run_{copied,reused}_{files,bytes}, spelled out."""
    def expand(token):
        m = re.search(r"\{([\w,]+)\}", token)
        if not m:
            return [token]
        return [w for alt in m.group(1).split(",") for w in expand(token[:m.start()] + alt + token[m.end():])]
    text = text.replace("\\_", "_")
    return re.sub(r"[\w{},]*\{[\w,]+\}[\w{},]*", lambda m: " ".join(expand(m.group(0))), text)


class TheFleetDocumentsListWhatIsShipped(unittest.TestCase):
    def test_readme_lists_the_alert_rules_all_and_only(self):
        shipped = set(re.findall(r"^\s*- alert: (\w+)$", read("fleet/unbounded-nvidia.rules.yml"), re.M))
        self.assertGreaterEqual(len(shipped), 10)
        listed = set(re.findall(r"`(Nvidia\w+)`", readme_bullet("Alerts")))
        self.assertEqual(sorted(shipped - listed), [], "alerts the rules file has and README's Alerts does not name")
        self.assertEqual(sorted(listed - shipped), [], "alerts README names that the rules file does not have")

    def test_readme_lists_the_node_conditions_all_and_only(self):
        monitor = json.loads(read("fleet/unbounded-nvidia-monitor.json"))
        shipped = {c["type"] for c in monitor["conditions"]}
        listed = set(re.findall(r"`(Nvidia\w+)`", readme_bullet("A node condition")))
        self.assertEqual(sorted(shipped ^ listed), [], "conditions of the monitor against README's list")

    def test_each_man_page_names_every_metric_its_program_writes(self):
        for code, page in (("setup/metrics_report.cpp", "unbounded-nvidia-setup.8"),
                           ("lib/license/license_metrics.cpp", "unbounded-nvidia-license-reload.8"),
                           ("consumers/follow.cpp", "unbounded-nvidia-consumers.8")):
            written = set(re.findall(r'"(unbounded_nvidia_\w+)"', read(code)))
            self.assertGreaterEqual(len(written), 3, code)
            metrics = section(man_page(page), "METRICS")
            self.assertIsNotNone(metrics, f"{page} has no METRICS section")
            metrics = expand_braces(metrics)
            self.assertEqual(sorted(m for m in written if m not in metrics), [], f"metrics {code} writes and {page} does not name")

    def test_setup_names_every_state_file_it_keeps(self):
        names = set(re.findall(r'constexpr const char \*\w+_FILE = "([\w.-]+\.json)"', read("setup/self_repair.hpp")))
        names |= set(re.findall(r'"(status\.json)"', read("setup/execute.cpp")))
        names |= set(re.findall(r'constexpr const char \*\w+_FILE = "([\w.-]+\.json)"', read("lib/consumer/driver_generation.hpp")))
        self.assertGreaterEqual(len(names), 2)
        page = read("man/unbounded-nvidia-setup.8.scd")
        self.assertEqual(sorted(n for n in names if n not in page), [], "state files setup(8) does not name")


if __name__ == "__main__":
    main()
