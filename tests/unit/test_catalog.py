#!/usr/bin/env python3
"""The journal message catalog (units/unbounded-nvidia-setup.catalog) against the MESSAGE_IDs the code
logs (lib/core/message_ids.hpp), both ways, and against systemd's own reader: `journalctl
--update-catalog` run on a temporary root must take every entry, as the package's install does.
TAP on stdout."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE = os.environ.get("SOURCE_ROOT", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
CATALOG = os.path.join(SOURCE, "units", "unbounded-nvidia-setup.catalog")
IDS = os.path.join(SOURCE, "lib", "core", "message_ids.hpp")
REQUIRED_HEADERS = ("Subject", "Defined-By", "Documentation")


def message_ids(path=IDS):
    """{id: name} from message_ids.hpp, failing on a duplicate value."""
    ids = {}
    for name, value in re.findall(r'inline constexpr const char \*(\w+) = "([^"]*)";', open(path).read()):
        assert re.fullmatch(r"[0-9a-f]{32}", value), f"{name}: {value!r} is not 32 lower-case hex digits"
        assert value not in ids, f"{name} and {ids[value]} share {value}"
        ids[value] = name
    return ids


def parse_catalog(path=CATALOG):
    """[(id, headers, body lines, line number)] as systemd's catalog.c reads the file: a line starting
    with '#' or ';' is a comment anywhere, `-- <id>` starts an entry, its header lines run to the
    first empty line."""
    entries = []
    current = None
    for n, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        if line[:1] in ("#", ";"):
            continue
        m = re.fullmatch(r"-- ([0-9a-fA-F]{32})(?: (\S+))?", line)
        if m:
            assert m.group(2) is None, f"line {n}: a translation ({m.group(2)}) belongs in its own file"
            current = {"id": m.group(1), "headers": {}, "body": [], "line": n, "in_headers": True, "dup": []}
            entries.append(current)
            continue
        assert current is not None or not line.strip(), f"line {n}: text before the first entry: {line!r}"
        if current is None:
            continue
        if current["in_headers"]:
            if not line.strip():
                current["in_headers"] = False
                continue
            hm = re.fullmatch(r"([A-Za-z-]+): (\S.*)", line)
            assert hm, f"line {n}: not a 'Header: value' line in the header of {current['id']}: {line!r}"
            if hm.group(1) in current["headers"]:
                current["dup"].append(hm.group(1))
            current["headers"][hm.group(1)] = hm.group(2)
        else:
            current["body"].append(line)
    return entries


def entry_fields(entry):
    text = "\n".join([entry["headers"].get("Subject", "")] + entry["body"])
    return set(re.findall(r"@([A-Z_]+)@", text))


def function_around(code, pos):
    """The top-level function (or class) `pos` is in: from the closing brace before it to the next."""
    start, end = code.rfind("\n}\n", 0, pos), code.find("\n}\n", pos)
    return code[max(start, 0):end if end >= 0 else len(code)]


def sources(*tops):
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(SOURCE, top)):
            for f in sorted(files):
                if f.endswith(".cpp"):
                    path = os.path.join(dirpath, f)
                    yield os.path.relpath(path, SOURCE), open(path, encoding="utf-8").read()


def sites_missing_fields(ids, entries):
    """[(file:line, ID name, fields missing)] for each log call with a MESSAGE_ID: the fields of its
    statement (of its function, where the fields are pushed one by one) against its entry's @FIELD@s.
    A MESSAGE_ID taken from a variable or call stands for every ID that could be in it: those of its
    function, of the function it calls, or (a consumer finding's) every ID of lib/consumer/."""
    by_name = {name: i for i, name in ids.items()}
    fields_of = {e["id"]: entry_fields(e) for e in entries}
    consumer = set(re.findall(r"message_id::(\w+)", "".join(code for _, code in sources("lib/consumer"))))
    out = []
    for path, code in sources("lib", "setup", "license-reload", "generator", "consumers"):
        for m in re.finditer(r'"MESSAGE_ID",\s*([^}]+?)\}', code):
            start = max(code.rfind(";", 0, m.start()), code.rfind("{\n", 0, m.start()))
            statement = code[start:code.find(";", m.end())]
            pushed = re.search(r'\w+\.push_back\(\{"MESSAGE_ID"', statement)
            logged = set(re.findall(r'\{"([A-Z_]+)",', function_around(code, m.start()) if pushed else statement))
            expr = m.group(1).strip()
            if expr.startswith("message_id::"):
                names = {expr[len("message_id::"):]}
            elif expr.endswith(".message_id"):
                names = consumer
            elif call := re.match(r"(\w+)\(", expr):
                body = code.find(f"{call.group(1)}(")  # its definition comes first
                names = set(re.findall(r"message_id::(\w+)", function_around(code, body)))
            else:
                names = set(re.findall(r"message_id::(\w+)", function_around(code, m.start())))
            assert names, f"{path}: a MESSAGE_ID from {expr!r} that stands for no ID this test can find"
            for name in sorted(names):
                missing = fields_of.get(by_name.get(name), set()) - logged
                if missing:
                    out.append((f"{path}:{code.count(chr(10), 0, m.start()) + 1}", name, missing))
    return out


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def check(self, name, fn):
        self.n += 1
        try:
            fn()
            print(f"ok {self.n} - {name}")
        except AssertionError as e:
            self.failed += 1
            print(f"not ok {self.n} - {name}")
            for line in str(e).splitlines():
                print(f"# {line}")

    def done(self):
        print(f"1..{self.n}")
        return 1 if self.failed else 0


def main():
    tap = Tap()
    ids = message_ids()
    entries = parse_catalog()

    def ids_found():
        assert len(ids) >= 20, f"only {len(ids)} MESSAGE_IDs read from {IDS}: has its format changed?"

    def every_id_has_one_entry():
        counts = {}
        for e in entries:
            counts[e["id"]] = counts.get(e["id"], 0) + 1
        missing = [f"{ids[i]} {i}" for i in ids if i not in counts]
        twice = [f"{i} ({c} entries)" for i, c in counts.items() if c > 1]
        assert not missing, "MESSAGE_IDs without a catalog entry: " + ", ".join(missing)
        assert not twice, "MESSAGE_IDs with more than one entry: " + ", ".join(twice)

    def no_entry_without_an_id():
        stray = [f"{e['id']} (line {e['line']})" for e in entries if e["id"] not in ids]
        assert not stray, "catalog entries for no MESSAGE_ID of message_ids.hpp: " + ", ".join(stray)

    def headers_and_bodies():
        bad = []
        man_pages = {f[:-len(".scd")] for f in os.listdir(os.path.join(SOURCE, "man")) if f.endswith(".scd")}
        for e in entries:
            where = f"{e['id']} (line {e['line']})"
            for h in REQUIRED_HEADERS:
                if h not in e["headers"]:
                    bad.append(f"{where}: no {h}:")
            if e["dup"]:
                bad.append(f"{where}: header(s) given twice: {', '.join(e['dup'])}")
            if e["headers"].get("Defined-By") not in ("unbounded-nvidia-setup", "unbounded-nvidia-license-reload",
                                                      "unbounded-nvidia-consumers"):
                bad.append(f"{where}: Defined-By: {e['headers'].get('Defined-By')!r} is not one of our programs")
            for doc in e["headers"].get("Documentation", "").split():
                m = re.fullmatch(r"man:([\w.-]+)\((\d)\)", doc)
                if not m:
                    bad.append(f"{where}: Documentation {doc!r} is not man:page(section)")
                elif f"{m.group(1)}.{m.group(2)}" not in man_pages:
                    bad.append(f"{where}: Documentation {doc}: no man/{m.group(1)}.{m.group(2)}.scd")
            body = [line for line in e["body"] if line.strip()]
            if not body:
                bad.append(f"{where}: empty body")
            if sum(len(line.split()) for line in body) < 20:
                bad.append(f"{where}: a body of under 20 words cannot say what happened and what to do")
            if any(len(line) > 80 for line in e["body"]):
                bad.append(f"{where}: a body line over 80 characters (journalctl -x does not wrap)")
        assert not bad, "\n".join(bad)

    def substitutions_are_fields_the_code_sets():
        # @FIELD@ shows as FIELD when the entry lacks it: each must be a field the code logs.
        code = ""
        for top in ("lib", "setup", "license-reload", "consumers"):
            for dirpath, _, files in os.walk(os.path.join(SOURCE, top)):
                for f in files:
                    if f.endswith((".cpp", ".hpp")):
                        code += open(os.path.join(dirpath, f), encoding="utf-8").read()
        logged = set(re.findall(r'\{"([A-Z_]+)",', code))
        bad = []
        for e in entries:
            text = "\n".join([e["headers"].get("Subject", "")] + e["body"])
            for field in re.findall(r"@([^@\s]+)@", text):
                if field not in logged:
                    bad.append(f"{e['id']}: @{field}@ is no journal field the code logs")
            if re.search(r"@[A-Z_]+(?![A-Z_@])", text):
                bad.append(f"{e['id']}: an unterminated @FIELD")
        assert not bad, "\n".join(bad)

    def every_site_logs_what_its_entry_names():
        # journalctl -x fills @FIELD@ from the message's own fields: one site of an ID that lacks a
        # field its entry names shows the bare name ("driver UNBOUNDED_NVIDIA_DRIVER_VERSION is kept").
        bad = [f"{site}: {name} logs no {', '.join(sorted(missing))}, which its catalog entry names"
               for site, name, missing in sites_missing_fields(ids, entries)]
        assert not bad, "\n".join(bad)

    def journalctl_reads_it():
        journalctl = shutil.which("journalctl")
        assert journalctl, "journalctl is missing (systemd; make deps installs it)"
        with tempfile.TemporaryDirectory(prefix="unbounded-catalog-") as root:
            d = os.path.join(root, "usr", "lib", "systemd", "catalog")
            os.makedirs(d)
            shutil.copy(CATALOG, d)
            r = subprocess.run([journalctl, f"--root={root}", "--update-catalog"], capture_output=True, text=True)
            assert r.returncode == 0 and not r.stderr.strip(), f"journalctl --update-catalog: {r.returncode}\n{r.stderr}"
            database = os.path.join(root, "var", "lib", "systemd", "catalog", "database")
            assert os.path.isfile(database), f"no {database} after --update-catalog"
            r = subprocess.run([journalctl, f"--root={root}", "--list-catalog"], capture_output=True, text=True)
            assert r.returncode == 0, f"journalctl --list-catalog: {r.returncode}\n{r.stderr}"
            listed = {}
            for line in r.stdout.splitlines():
                parts = line.split(" ", 1)
                listed[parts[0]] = parts[1] if len(parts) > 1 else ""
            subjects = {e["id"]: e["headers"].get("Subject", "") for e in entries}
            bad = [f"{ids[i]} {i}: not listed" for i in ids if i not in listed]
            bad += [f"{i}: listed as {listed[i]!r}, the file says {subjects[i]!r}" for i in ids
                    if i in listed and i in subjects and not listed[i].endswith(subjects[i])]
            bad += [f"{i}: listed, but no MESSAGE_ID of ours" for i in listed if i not in ids]
            assert not bad, "\n".join(bad)
            # --dump-catalog prints an entry's whole text: the body reached the database too.
            first = entries[0]
            r = subprocess.run([journalctl, f"--root={root}", "--dump-catalog", first["id"]], capture_output=True, text=True)
            assert r.returncode == 0 and first["body"][0] in r.stdout, f"--dump-catalog {first['id']}:\n{r.stdout}{r.stderr}"

    tap.check("message_ids.hpp yields the MESSAGE_IDs", ids_found)
    tap.check("every MESSAGE_ID has exactly one catalog entry", every_id_has_one_entry)
    tap.check("no catalog entry without a MESSAGE_ID", no_entry_without_an_id)
    tap.check("each entry has Subject, Defined-By, Documentation (our man pages) and a body", headers_and_bodies)
    tap.check("each @FIELD@ substitution is a field the code logs", substitutions_are_fields_the_code_sets)
    tap.check("journalctl --update-catalog on a temporary root takes and lists every entry", journalctl_reads_it)
    tap.check("every site that logs a MESSAGE_ID logs each field its catalog entry names", every_site_logs_what_its_entry_names)

    def header_names_files_that_exist():
        # Issue 46: the header once named a checker that did not exist.
        named = re.findall(r"\b((?:lib|tests|units|setup|license-reload|generator|man|doc)/[\w./-]+\.\w+)", open(CATALOG).read().split("\n-- ")[0])
        assert named, "the header names no file"
        missing = [p for p in named if not os.path.exists(os.path.join(SOURCE, p))]
        assert not missing, f"the catalog's header names files that do not exist: {missing}"

    tap.check("the files the catalog's header names exist", header_names_files_that_exist)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
