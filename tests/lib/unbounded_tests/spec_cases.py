"""Generated CDI spec directories for the differential test (test_oracle.py): each case is a few
files beside our own specs in /etc/cdi and /var/run/cdi, drawn to meet the CDI library's rules where
a reading of it is easiest to get wrong: dot-files and names the walk skips, field names in another
case (and the two Unicode runes that fold to ASCII), numeric and boolean device names in YAML,
duplicate keys and devices, unknown fields, empty and invalid edits, cdiVersions below what the fields
need, kinds the library refuses, null items of its lists of pointers and one-letter vendors (on which
it panics), JSON, block and flow YAML, a second document, line breaks only go-yaml reads (a lone CR, NEL, LS,
PS), and, rarely, what verify does not parse (anchors, tags, brackets in a comment, a file over its
size cap). Deterministic for a
seed."""

import json
import random

KELVIN, LONG_S = "\u212a", "\u017f"


class Plain(str):
    """A scalar written unquoted in YAML (a bare token in JSON where it is a JSON number)."""


class M(list):
    """A mapping as (key, value) pairs, in order, a key possibly twice."""


OUR_DEVICES = ["0", "all", "GPU-00000000-1111-2222-3333-444455556666"]
NAMES = ["0", "1", "all", "00", "0x0", "+0", "-0", "0.0", "0o0", "0b0", "0_0", "08", "1e3", ".5", "yes", "on", "no", "~",
         "null", "a.b", "x:y", "0:0", "-1", "1_000", "0x1", "2001-01-01", "True", "0.", "1.0e0", "+.inf", "GPU-0", "A"]
VERSIONS = ["0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0", "v0.5.0", "0.5", ""]
KINDS = ["nvidia.com/gpu"] * 8 + ["nvidia.com/GPU", "example.com/fpga", "nvidia.com/gpu.x", "nvidia.com", "nvidia.com/gpu/x",
                                  "Nvidia.com/gpu", "nvidia.com/gpu-", "n/gpu", "nvidia.com/g", "1/gpu", "/gpu"]
FILE_NAMES = ["x.json", "y.yaml", ".x.json", ".json", ".yaml", "a.yml", "b.JSON", "k8s.device-plugin.nvidia.com-gpu.json",
              "zz.yaml", "00.json", "nvidia.json", "nvidia.yaml", "k8s.gpu.nvidia.com-claim_1.json", "c.yaml.bak", "d.json"]


def edits(rng):
    choice = rng.choices(
        ["node", "host_path", "mount_type", "env", "bad_env", "empty", "gids", "bad_type", "hook", "bad_hook", "mount", "no_path",
         "null_node", "null_mount", "null_hook"],
        weights=[30, 6, 5, 6, 2, 4, 3, 2, 3, 2, 4, 2, 1, 1, 1])[0]
    node = M([("path", "/dev/nvidia0")])
    return {
        "node": M([("deviceNodes", [node])]),
        "host_path": M([("deviceNodes", [M([("path", "/dev/nvidia0"), ("hostPath", "/dev/nvidia0")])])]),
        "mount_type": M([("mounts", [M([("hostPath", "/x"), ("containerPath", "/x"), ("type", "bind")])])]),
        "mount": M([("mounts", [M([("hostPath", "/x"), ("containerPath", "/x")])])]),
        "env": M([("env", ["A=1"])]),
        "bad_env": M([("env", ["=1"])]),
        "empty": M(),
        "gids": M([("additionalGids", [Plain("5")]), ("deviceNodes", [node])]),
        "bad_type": M([("deviceNodes", [M([("path", "/dev/nvidia0"), ("type", "x")])])]),
        "hook": M([("hooks", [M([("hookName", "prestart"), ("path", "/bin/true")])])]),
        "bad_hook": M([("hooks", [M([("hookName", "preStart"), ("path", "/bin/true")])])]),
        "no_path": M([("deviceNodes", [M([("permissions", "rw")])])]),
        # a null item of a list of pointers: the library dereferences it
        "null_node": M([("deviceNodes", [None])]),
        "null_mount": M([("mounts", [None]), ("env", ["A=1"])]),
        "null_hook": M([("hooks", [None])]),
    }[choice]


def recase(rng, key):
    r = rng.random()
    if r < 0.08:
        return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in key)
    if r < 0.11:
        return key.upper()
    if r < 0.13 and ("k" in key or "s" in key):
        return key.replace("k", KELVIN, 1).replace("s", LONG_S, 1)
    return key


def device(rng):
    name = rng.choice(OUR_DEVICES) if rng.random() < 0.6 else rng.choice(NAMES)
    name = Plain(name) if rng.random() < 0.6 else name
    d = M([(recase(rng, "name"), name), (recase(rng, "containerEdits"), edits(rng))])
    if rng.random() < 0.03:
        d.append(("annotations", M([("a", "b")])))
    if rng.random() < 0.03:
        d.append(("extra", "1"))
    return d


def spec(rng):
    version = rng.choice(VERSIONS) if rng.random() < 0.5 else "0.5.0"
    s = M([(recase(rng, "cdiVersion"), Plain(version) if version and rng.random() < 0.3 else version),
           (recase(rng, "kind"), rng.choice(KINDS))])
    devices = [device(rng) for _ in range(rng.choice([1, 1, 2, 3]))]
    if rng.random() < 0.05:
        devices.append(devices[0])  # a device twice
    s.append((recase(rng, "devices"), devices))
    if rng.random() < 0.1:
        s.append(("containerEdits", edits(rng)))
    if rng.random() < 0.04:
        s.append(("extra", Plain("1")))
    if rng.random() < 0.04:
        s.append((rng.choice(["kind", "cdiVersion"]), s[rng.choice([0, 1])][1]))  # a key twice
    rng.shuffle(s)
    return s


def plain_yaml(v):
    return v if isinstance(v, Plain) else json.dumps(v)


def flow(v):
    if isinstance(v, M):
        return "{" + ", ".join(f"{k}: {flow(x)}" for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return plain_yaml(v)


def block(v, indent=0):
    sp = " " * indent
    out = []
    for k, x in v:
        if isinstance(x, (M, list)) and x and not (isinstance(x, list) and not isinstance(x, M) and not isinstance(x[0], M)):
            if isinstance(x, M):
                out.append(f"{sp}{k}:")
                out.extend(block(x, indent + 2))
            else:
                out.append(f"{sp}{k}:")
                for item in x:
                    lines = block(item, indent + 4)
                    out.append(f"{sp}  - " + lines[0].lstrip())
                    out.extend(lines[1:])
        else:
            out.append(f"{sp}{k}: {flow(x)}")
    return out


def to_json(v):
    if isinstance(v, M):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {to_json(x)}" for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(to_json(x) for x in v) + "]"
    if isinstance(v, Plain):
        try:
            float(v) if not v.lower().startswith(("0x", "0o", "0b", "+", ".", "inf", "nan")) and "_" not in v else None.x
            json.loads(v)
            return v  # a JSON number token
        except (ValueError, AttributeError, json.JSONDecodeError):
            return json.dumps(str(v))
    return json.dumps(v)


def render(rng, s):
    """The spec as text, and whether it holds what verify does not parse (a limit)."""
    fmt = rng.choices(["json", "block", "flow"], weights=[4, 4, 2])[0]
    text = to_json(s) if fmt == "json" else ("\n".join(block(s)) + "\n" if fmt == "block" else flow(s) + "\n")
    limit = False
    r = rng.random()
    if r < 0.01 and fmt != "json":
        text = text.replace(": 0", ": &a 0", 1) if ": 0" in text else "x: &a 1\n" + text
        limit = "&a" in text
    elif r < 0.02:
        text = "# " + "[" * 40 + "\n" + text if fmt != "json" else text
        limit = fmt != "json"
    elif r < 0.025 and fmt == "block":
        text = text.replace("kind: ", "kind: !!str ", 1)
        limit = "!!str" in text
    elif r < 0.03:
        text = text + "\n" + " " * (2 << 20) if fmt != "json" else text + " " * (2 << 20)
        limit = True
    elif r < 0.05 and fmt != "json":
        text = text + "---\nkind: example.com/other\n"
    elif r < 0.06:
        text = text[: rng.randrange(1, max(2, len(text)))]  # cut short: most often no document at all
    elif r < 0.075:
        # A line break go-yaml reads and yaml-cpp and JSON do not (a lone CR, NEL, LS, PS): after a
        # comment in YAML, the next line is the comment's to them and a key to go-yaml.
        brk = rng.choice(["\r", "\u0085", "\u2028", "\u2029"])
        lines = text.split("\n")
        at = rng.randrange(len(lines))
        lines[at] = (lines[at] + brk) if fmt == "json" else ("# c" + brk + lines[at])
        text = "\n".join(lines)
    return text.encode(), limit


def case(rng):
    """[(directory, name, bytes, limit)]: a few files, none of them where ours are."""
    files = {}
    for _ in range(rng.choice([1, 1, 2, 2, 3, 4])):
        d = "etc/cdi" if rng.random() < 0.3 else "var/run/cdi"
        name = rng.choice(FILE_NAMES)
        if d == "etc/cdi" and name.startswith("nvidia") and name.endswith(".yaml"):
            name = "other-" + name
        data, limit = render(rng, spec(rng))
        files[(d, name)] = (data, limit)
    return [(d, n, data, limit) for (d, n), (data, limit) in sorted(files.items())]
