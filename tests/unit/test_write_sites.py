#!/usr/bin/env python3
"""Where the setup program writes: one executor. A run reads the machine once (the
snapshot), discovers and plans without writing, and then the executor (setup/execute.cpp and
setup/execute_specs.cpp) makes every change. This check reads the C++ sources for the calls that
change the file system (the fs:: writers, the system calls that write, rename, remove, link or change
modes, with or without ::, opens for writing, stdio's and iostream's writers, std::filesystem, the driver
root's install, the /dev/char links, the memos' saves, the metrics, commit and rollback) and holds them to:
- setup/: the executor's two files only; license-reload/: the license reloader's own program;
- lib/: the primitives the executor calls, each in its named file; every file of the snapshot's reads,
  of discovery, of the plans and of the consumer checks writes nothing;
- in cdi_hook.cpp and discovery_cache.cpp, which mostly read, only their memo's save function writes.
A new write anywhere else is reported with its file and line."""

import os
import re
import tempfile
import unittest

from unbounded_tests import TESTS_DIR
from unbounded_tests.harness import main

SOURCE_ROOT = os.path.dirname(TESTS_DIR)

WRITES = re.compile(
    # the project's writers (each with its *_at form)
    r"\b(?:fs::)?(?:write_file_atomic|prepare_file_atomic|write_all|copy_fd|mkdir_p|open_private_dir|remove_matching"
    r"|remove_tree|remove_our_spec|install_driver_root|remove_stale_temp_trees|ensure_dev_char_links|save_hook_memo"
    r"|publish_metrics|write_metrics_file)(?:_at)?\s*\("
    # the system calls that change the file system, with or without ::
    r"|(?:^|[^\w.>:]|::)(?:unlink|unlinkat|rename|renameat2?|mkdir|mkdirat|rmdir|symlink|symlinkat|link|linkat"
    r"|chmod|fchmod|fchmodat|chown|fchown|fchownat|lchown|truncate|ftruncate|fallocate|mknod|mknodat|write|writev"
    r"|pwrite|pwritev|copy_file_range|sendfile|utimensat|futimens|setxattr|fsetxattr|ioctl)\s*\("
    # opens for writing, and the C and C++ libraries' writers
    r"|\bO_(?:CREAT|TMPFILE|WRONLY|RDWR|TRUNC|APPEND)\b|\bfopen\s*\(|\bofstream\b|\bfstream\b|std::filesystem::"
    # the executor's steps on prepared writes and on the old root
    r"|(?:\.|->)(?:save|commit|rollback)\s*\(")

# The files that may write, and why. Everything else under setup/, license-reload/ and lib/ must not.
WRITERS = {
    "setup/execute.cpp": "the executor",
    "setup/execute_specs.cpp": "the executor: the specs and their /dev/char links",
    "setup/self_repair.cpp": "self-repair's record (held-back.json), written and read in one place",
    "license-reload/main.cpp": "the license reloader's own program (its state directory)",
    "lib/core/fs.hpp": "the file system primitives",
    "lib/core/fs.cpp": "the file system primitives (and the private run directory)",
    "lib/core/lock.cpp": "the run lock's file",
    "lib/core/log.cpp": "the log line on stderr",
    "lib/core/metrics.cpp": "the textfile collector's file",
    "lib/core/run_probe.cpp": "a forked child's why it could not exec, into a pipe to its parent",
    "lib/core/metrics.hpp": "the textfile collector's file",
    "lib/core/spec_marker.cpp": "cleanup's removal of a spec of ours",
    "lib/core/spec_marker.hpp": "cleanup's removal of a spec of ours",
    "lib/driver/driver_root.hpp": "the driver root's install",
    "lib/driver/driver_root_install.cpp": "the driver root's install (a live file linked into the new tree, the copy pool, "
                                          "the old tree's removal or return)",
    "lib/driver/discovery_cache.cpp": "the discovery memo's save",
    "lib/cdi/cdi_hook.cpp": "the hook memo's save",
    "lib/cdi/cdi_hook.hpp": "the hook memo's save",
    "lib/cdi/dev_char.cpp": "the /dev/char links",
    "lib/cdi/dev_char.hpp": "the /dev/char links",
}
# Lines that match and change no file: output on standard output, a child's stderr sent to /dev/null.
NOT_WRITES = re.compile(r"\bSTDOUT_FILENO\b|\bSTDERR_FILENO\b|\"/dev/null\"")
# Files that mostly read: there, only these functions write.
ONLY_IN = {
    "lib/driver/discovery_cache.cpp": "DiscoveryCache::save",
    "lib/cdi/cdi_hook.cpp": "save_hook_memo",
}
# Other programs than setup, with their own files.
OTHER_PROGRAMS = ("lib/license/", "generator/")


def code_lines(path):
    """(line number, code) with // comments and string literals' contents dropped; a line of NOT_WRITES has none."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            code = "" if NOT_WRITES.search(line) else re.sub(r'"(?:[^"\\]|\\.)*"', '""', line).split("//")[0]
            yield n, line, code


def enclosing_function(lines, index):
    """The signature line of the function around lines[index]: the last line before it that starts a
    definition at column 0."""
    for i in range(index, -1, -1):
        text = lines[i][1]
        if text[:1] not in ("", " ", "\t", "{", "}", "#", "/", "\n") and "(" in text:
            return text
    return ""


def violations(top, rel_to):
    found = []
    for sub in ("setup", "license-reload", "lib"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(top, sub)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith((".cpp", ".hpp")):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, rel_to)
                if rel.startswith(OTHER_PROGRAMS):
                    continue
                lines = list(code_lines(path))
                for i, (n, text, code) in enumerate(lines):
                    if not WRITES.search(code):
                        continue
                    if rel not in WRITERS:
                        found.append(f"{rel}:{n}: writes ({text.strip()}); only the executor (setup/execute*.cpp) "
                                     "and the primitives it calls may")
                    elif rel in ONLY_IN and ONLY_IN[rel] not in enclosing_function(lines, i):
                        found.append(f"{rel}:{n}: writes outside {ONLY_IN[rel]} ({text.strip()})")
    return found


class TestTheRuleHolds(unittest.TestCase):
    def test_only_the_executor_and_its_primitives_write(self):
        self.assertEqual(violations(SOURCE_ROOT, SOURCE_ROOT), [])

    def test_every_named_writer_exists(self):
        # A file renamed or removed leaves its entry behind: the list says what writes today.
        self.assertEqual([f for f in WRITERS if not os.path.exists(os.path.join(SOURCE_ROOT, f))], [])

    def test_the_reads_and_plans_are_checked(self):
        # The files of the snapshot, discovery, the plans and the consumer check are among those read.
        for f in ("setup/snapshot.cpp", "setup/setup_command.cpp", "setup/staged_driver.cpp",
                  "lib/cdi/cdi_state.cpp", "lib/cdi/devices.cpp", "lib/driver/discovery.cpp",
                  "lib/consumer/consumer_check.cpp"):
            self.assertTrue(os.path.exists(os.path.join(SOURCE_ROOT, f)), f)
            self.assertNotIn(f, WRITERS)


class TestTheCheckFails(unittest.TestCase):
    """The check itself: a write where none may be is reported, with its file and line."""

    def check(self, rel, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, rel)
            os.makedirs(os.path.dirname(path))
            with open(path, "w") as f:
                f.write(text)
            return violations(d, d)

    def test_a_write_in_the_flow(self):
        found = self.check("setup/setup_command.cpp", "int f()\n{\n\tfs::write_file_atomic(p, t, {});\n}\n")
        self.assertEqual(len(found), 1)
        self.assertTrue(found[0].startswith("setup/setup_command.cpp:3: writes"), found)
        self.assertEqual(len(self.check("setup/snapshot.cpp", "\tint fd = ::openat(d, n, O_WRONLY | O_CREAT, 0644);\n")), 1)
        self.assertEqual(len(self.check("setup/setup_command.cpp", "\tcache.save(run_dir, display);\n")), 1)
        self.assertEqual(len(self.check("lib/cdi/devices.cpp", "\t::unlinkat(dirfd, name, 0);\n")), 1)
        for line in ("if (rename(a, b) < 0)", "fs::remove_tree_at(fd, name, dev);", "std::ofstream out(path);",
                     "FILE *f = fopen(path, \"w\");", "int fd = ::openat(d, n, O_WRONLY | O_CLOEXEC);",
                     "fs::prepare_file_atomic_at(fd, n, d, t, {});", "std::filesystem::remove(p);", "write(fd, buf, n);"):
            self.assertEqual(len(self.check("setup/verify_command.cpp", f"\t{line}\n")), 1, line)

    def test_a_write_in_a_reading_file_outside_its_save(self):
        text = ("void save_hook_memo(int fd)\n{\n\t(void)fs::write_file_atomic_at(fd, a, b, c, {});\n}\n\n"
                "HookCommands hook_commands()\n{\n\t::unlinkat(fd, n, 0);\n}\n")
        self.assertEqual(self.check("lib/cdi/cdi_hook.cpp", text),
                         ["lib/cdi/cdi_hook.cpp:8: writes outside save_hook_memo (::unlinkat(fd, n, 0);)"])

    def test_comments_and_strings_are_not_writes(self):
        self.assertEqual(self.check("setup/setup_command.cpp", "\t// fs::write_file_atomic(...) is the executor's\n"
                                                                 "\tlog::info(\"::unlinkat( failed\");\n"), [])


if __name__ == "__main__":
    main()
