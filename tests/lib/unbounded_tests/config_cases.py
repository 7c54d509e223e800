"""Generated containerd configurations for the differential test (tests/oracle/test_oracle.py): a main
/etc/containerd/config.toml and a few files it imports, drawn where containerd's loading is easiest to
get wrong: `version` across files (absent, 0 to 4, negative, not a number), imports relative and
absolute, with '*' in the last or an inner component and dot-files it matches, an import that is not
there, import cycles, the CRI table under each name a version knows ("cri", the version-2 and the 2.x
runtime table), enable_cdi and cdi_spec_dirs set in one file and other keys in another, dotted keys and
inline tables (over several lines too, a trailing comma), a byte-order mark, a table or key written twice,
disabled_plugins a version refuses or the CRI plugin needs, default_runtime_name and the runtimes and registry
tables the CRI plugin checks as it loads, and forms of TOML 1.1 and beyond (TOML11 below) that toml++ built with
its unreleased features reads and one containerd or both refuse. An absolute path is written with ROOT in front, which the caller
replaces by the case's directory for containerd and by nothing for verify. Deterministic for a seed."""

import random

ROOT = "@ROOT@"
TABLES = ["io.containerd.grpc.v1.cri"] * 3 + ["cri", "io.containerd.cri.v1.runtime", "io.containerd.cri.v1.runtime",
                                               "io.containerd.cri.v1.images"]
DIRS = ["/etc/cdi", "/var/run/cdi", "/run/cdi", "/etc/cdi/"]
# \e and \x escapes, a local date-time without seconds and a trailing comma in an inline table:
# containerd 1.7 refuses them, 2.1 reads them; '+' in a bare key, a hex float and a non-ASCII bare
# key: both refuse them.
TOML11 = ['x_escape = "a\\e"', 'x_hex = "a\\x41"', 'x+y = 1', 'x_float = 0x1p3', 'x_inline = {a = 1,}',
          'x_date = 1979-05-27T07:32', 'x_time = 07:32', '\u00e9 = 1']
IMPORT_FILES = ["conf.d/10-cdi.toml", "conf.d/20-other.toml", "conf.d/.hidden.toml", "conf.d/sub/30.toml", "extra.toml",
                "conf.d/readme.txt"]
IMPORTS = ["conf.d/*.toml", "conf.d/*/*.toml", "conf.d/*", f"{ROOT}/etc/containerd/conf.d/*.toml", "extra.toml",
           f"{ROOT}/etc/containerd/extra.toml", "conf.d/../extra.toml", "missing.toml", "conf.d/1*.toml", "config.toml",
           "./conf.d/20-other.toml", "conf.d/[0-9]*.toml", "*/sub/*.toml"]


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, int):
        return str(v)
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cri_keys(rng):
    keys = {}
    if rng.random() < 0.6:
        keys["enable_cdi"] = rng.random() < 0.5
    if rng.random() < 0.3:
        keys["cdi_spec_dirs"] = rng.sample(DIRS, rng.choice([1, 2, 2, 3]))
    # The CRI plugin's own checks of its runtimes as it loads (containerd starts without it when
    # they fail): the default runtime named and defined, the deprecated tables 1.x moves into
    # runtimes, options that need another.
    if rng.random() < 0.15:
        keys["containerd.default_runtime_name"] = rng.choice(["nvidia", "nvidia", "runc", ""])
    if rng.random() < 0.15:
        keys["containerd.runtimes.nvidia.runtime_type"] = "io.containerd.runc.v2"
    if rng.random() < 0.04:
        keys[rng.choice(["containerd.default_runtime.runtime_type", "containerd.untrusted_workload_runtime.runtime_type",
                         "containerd.runtimes.untrusted.runtime_type"])] = "io.containerd.runc.v2"
    if rng.random() < 0.04:
        keys[rng.choice(["systemd_cgroup", "containerd.no_pivot", "containerd.runtimes.runc.privileged_without_host_devices_all_devices_allowed",
                         "containerd.runtimes.nvidia.privileged_without_host_devices_all_devices_allowed"])] = True
    if rng.random() < 0.03:
        keys[rng.choice(["containerd.runtimes.runc.io_type", "containerd.runtimes.nvidia.runtime_root"])] = rng.choice(["fifo", "streaming", "x"])
    if rng.random() < 0.06:  # hosts.toml files, or the deprecated mirrors: not both
        keys["registry.config_path"] = "/etc/containerd/certs.d"
    if rng.random() < 0.06:
        keys['registry.mirrors."docker.io".endpoint'] = ["https://mirror.example"]
    if rng.random() < 0.3 or not keys:
        keys["sandbox_image"] = "registry.k8s.io/pause:3.9"
    return keys


def render_table(rng, table, keys):
    style = rng.choices(["table", "dotted", "inline", "inline_multi"], weights=[6, 2, 1, 1])[0]
    name = f'"{table}"' if "." in table else table
    if style == "table":
        return f"[plugins.{name}]\n" + "".join(f"  {k} = {toml_value(v)}\n" for k, v in keys.items())
    if style == "dotted":
        return "".join(f"plugins.{name}.{k} = {toml_value(v)}\n" for k, v in keys.items())
    sep = ",\n    " if style == "inline_multi" else ", "
    trailing = "," if rng.random() < 0.1 else ""  # 1.x's go-toml refuses it, 2.x's takes it
    return f"[plugins]\n  {name} = {{" + sep.join(f"{k} = {toml_value(v)}" for k, v in keys.items()) + trailing + "}\n"


def render_file(rng, is_main):
    top = []
    r = rng.random()
    if r < 0.75:
        top.append(f"version = {rng.choices([2, 3, 1, 0, 4, -1], weights=[10, 6, 2, 1, 1, 1])[0]}")
    elif r < 0.77:
        top.append('version = "2"')
    if rng.random() < (0.7 if is_main else 0.2):
        top.append("imports = " + toml_value(rng.sample(IMPORTS, rng.choice([1, 1, 2]))))
    if rng.random() < 0.08:
        top.append(rng.choice(TOML11))
    if rng.random() < 0.05:
        top.append("disabled_plugins = " + toml_value([rng.choice(["cri", "io.containerd.grpc.v1.cri", "io.containerd.x", "io.containerd.cri.v1.images"])]))
    body = "".join(f"{t}\n" for t in top)
    tables = []
    for _ in range(rng.choice([0, 1, 1, 2])):
        table = rng.choice(TABLES)
        # One table named twice in a file is the "table written twice" case below, on purpose; a
        # header and then an inline table of one name is what toml++ 3.3 merges and containerd
        # refuses, a known difference (tests/README.md).
        if table in tables:
            continue
        tables.append(table)
        body += render_table(rng, table, cri_keys(rng))
    r = rng.random()
    if r < 0.03:
        body = "\ufeff" + body
    elif r < 0.05 and "[plugins." in body:
        first = body[body.index("[plugins."):].split("\n", 1)[0]
        body += first + "\n  enable_cdi = true\n"  # a table written twice
    elif r < 0.06:
        body += "[plugins\n"  # not TOML
    return body


def case(rng):
    """{path under the root: text} for /etc/containerd: the main file and some of the import files."""
    files = {"etc/containerd/config.toml": render_file(rng, True)}
    for name in rng.sample(IMPORT_FILES, rng.choice([0, 1, 2, 3])):
        files[f"etc/containerd/{name}"] = render_file(rng, False)
    return files
