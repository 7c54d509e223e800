#!/usr/bin/env python3
"""Issue 33, item 2: `verify` checks what containerd will do with our spec, from files only: CDI off
(per version default, imports followed, an unreadable configuration a warning), cdi_spec_dirs without
our directory, a cdiVersion above what that containerd's CDI library accepts, specs that shadow ours,
and the DRA driver's per-claim specs going stale. Each case on a fake machine root through the real
binary; the containerd version comes from dpkg's database, as on a Debian node."""

import json
import os
import shutil
import stat
import subprocess
import time
import unittest

from unbounded_tests.harness import (ARCH, PLUGIN_SPEC, SANITIZED, SETUP, V1, V2, MachineRoot, main, make_chardev, place_host_file, plugin_spec,
                                     write)

SPEC = "/etc/cdi/nvidia.yaml"
CONFIG = "/etc/containerd/config.toml"
CRI_17 = '[plugins."io.containerd.grpc.v1.cri"]'
CLAIM_UID = "5d2c6b7e-0f3a-4b8e-9d1c-2a7e6f5b4c3d"


def dpkg_status(version, package="containerd", built_using=None, field="Built-Using"):
    """A dpkg database with containerd installed at `version` between two other packages; `built_using`,
    the CDI library's Debian version Debian built it against, in `field` among others as Debian's
    packages list them (trixie's containerd says Built-Using, sid's Static-Built-Using)."""
    extra = ""
    if built_using:
        extra = (f"{field}: continuity (= 0.3.0-1), golang-1.24 (= 1.24.4-1), golang-github-containerd-nri (= 0.6.1-2), "
                 f"golang-github-kubernetes-cri-api (= 0.32.3-1), golang-tags.cncf-container-device-interface (= {built_using}), "
                 f"golang-x-sys (= 0.30.0-1)\n")
    # The paragraphs around containerd's name the CDI library too: only containerd's own counts.
    return (f"Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n"
            f"Built-Using: golang-tags.cncf-container-device-interface (= 1.1.0-1)\n\n"
            f"Package: {package}\nStatus: install ok installed\nArchitecture: amd64\nVersion: {version}\n"
            f"{extra}Description: daemon to control runC\n\n"
            f"Package: runc\nStatus: install ok installed\nVersion: 1.1.5+ds1-1\n"
            f"Built-Using: golang-tags.cncf-container-device-interface (= 0.5.4-1)\n")


def dra_claim_spec(version, uid=CLAIM_UID):
    """A per-claim spec as the DRA driver's kubelet plugin writes it, its paths under the driver root."""
    lib = f"/run/nvidia/driver/lib/{ARCH}"
    return json.dumps({
        "cdiVersion": "0.5.0", "kind": "k8s.gpu.nvidia.com/claim",
        "devices": [{"name": f"{uid}-gpu-0",
                     "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}],
                                        "mounts": [{"hostPath": f"{lib}/libcuda.so.{version}",
                                                    "containerPath": f"/usr/lib/{ARCH}/libcuda.so.{version}",
                                                    "options": ["ro", "nosuid", "nodev", "bind"]}]}}]})


def gpu_spec(devices, kind="nvidia.com/gpu"):
    """Another writer's spec of `kind` defining `devices` (nvidia-cdi-refresh writes ours' kind)."""
    return json.dumps({"cdiVersion": "0.5.0", "kind": kind,
                       "devices": [{"name": d, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}} for d in devices]})


class ConsumerCase(unittest.TestCase):
    def assertMemoryBounded(self, result, base):
        # Held to the bound natively only, as the hostile tier's large parses are: ASan's quarantine
        # keeps the freed read buffers of each spec.
        if not SANITIZED:
            self.assertLess(result["peak_rss_kib"] - base, 16 * 1024)

    def machine(self, containerd=None, config=None, package="containerd", **kw):
        m = MachineRoot(self).standard(**kw)
        if containerd:
            write(m.p("/var/lib/dpkg/status"), dpkg_status(containerd, package))
            m.install_containerd(containerd)
        if config is not None:
            write(m.p(CONFIG), config)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        m.setup_result = r.result
        return m

    def verify(self, m):
        r = m.run("--json", "verify")
        r.result = json.loads(r.stdout)
        return r

    def assertReady(self, m):
        r = self.verify(m)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.result["problems"], [])
        return r

    def assertNotReady(self, m, path, *needles):
        r = self.verify(m)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.result["outcome"], "not-ready")
        mine = [p for p in r.result["problems"] if p["path"] == path]
        self.assertTrue(mine, f"no problem for {path}: {r.result['problems']}")
        for n in needles:
            self.assertIn(n, mine[0]["message"])
        self.assertIn(needles[0], r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), len(r.result["problems"]), r.stderr)
        return r


class TestContainerdConfig(ConsumerCase):
    def test_no_containerd_is_not_judged(self):
        m = self.machine()
        r = self.assertReady(m)
        self.assertEqual(r.result["containerd"], {"found": False})

    def test_containerd_1_7_defaults_to_cdi_off(self):
        m = self.machine("1.7.24~ds1-6+b2")
        r = self.assertNotReady(m, CONFIG, "CDI is off in containerd 1.7.24", "enable_cdi = true", CRI_17)
        c = r.result["containerd"]
        self.assertEqual((c["version"], c["cdi_enabled"], c["max_cdi_version"]), ("1.7.24", False, "0.7.0"))
        self.assertIn("default of containerd 1.7.24", c["cdi_enabled_from"])
        self.assertEqual(r.result["consumer_findings"]["cdi-disabled"], 1)

    def test_containerd_1_7_with_cdi_enabled_is_ready(self):
        m = self.machine("1.7.24~ds1-6", f'version = 2\n{CRI_17}\n  enable_cdi = true\n  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n')
        r = self.assertReady(m)
        self.assertTrue(r.result["containerd"]["cdi_enabled"])
        self.assertEqual(r.result["containerd"]["config_files"], [CONFIG])

    def test_explicit_enable_cdi_false_names_the_file(self):
        m = self.machine("1.7.24", f'version = 2\n\n# CDI\n{CRI_17}\n  enable_cdi = false\n')
        r = self.assertNotReady(m, CONFIG, "CDI is off", f"in {CONFIG}")
        self.assertEqual(r.result["containerd"]["cdi_enabled_from"],
                         f"/usr/bin/containerd --config {CONFIG} config dump, as the default of containerd 1.7.24")

    def test_an_import_that_replaces_the_cri_table_turns_cdi_off(self):
        # containerd's mergeConfig replaces a plugin's whole table with the imported file's: a drop-in
        # that only sets the sandbox image drops enable_cdi = true.
        m = self.machine("1.7.24", f'version = 2\nimports = ["conf.d/*.toml"]\n{CRI_17}\n  enable_cdi = true\n')
        write(m.p("/etc/containerd/conf.d/50-sandbox.toml"), f'version = 2\n{CRI_17}\n  sandbox_image = "pause:local"\n')
        # containerd's answer does not say which file's table stands: the advice names config.toml
        # and the files it imports.
        r = self.assertNotReady(m, CONFIG, "CDI is off", "or the file it imports that sets that table last")
        self.assertEqual(r.result["containerd"]["config_files"], ["/etc/containerd/conf.d/50-sandbox.toml", CONFIG])
        # ... and an import that sets it again makes it right.
        write(m.p("/etc/containerd/conf.d/60-cdi.toml"), f'version = 2\n[plugins]\n  [plugins."io.containerd.grpc.v1.cri"]\n    enable_cdi = true\n')
        self.assertReady(m)

    def test_a_versionless_drop_in_is_read_by_the_merged_version(self):
        # containerd 1.x merges `version` across the files (the last set wins) and reads every file's
        # plugins by it: a drop-in without `version` under a version-2 config.toml counts.
        m = self.machine("1.7.24", 'version = 2\nimports = ["/etc/containerd/conf.d/cdi.toml"]\n')
        write(m.p("/etc/containerd/conf.d/cdi.toml"), f'{CRI_17}\n  enable_cdi = true\n')
        self.assertReady(m)

    def test_containerd_2_merges_drop_ins_key_by_key(self):
        m = self.machine("2.1.4", "version = 3\nimports = ['/etc/containerd/conf.d/*.toml']\n"
                                  "[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n")
        write(m.p("/etc/containerd/conf.d/runtime.toml"),
              "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd]\n  default_runtime_name = 'runc'\n")
        self.assertNotReady(m, CONFIG, "CDI is off in containerd 2.1.4")

    def test_containerd_2_defaults_to_cdi_on(self):
        m = self.machine("2.1.4~ds1-1")
        r = self.assertReady(m)
        self.assertEqual((r.result["containerd"]["cdi_enabled"], r.result["containerd"]["max_cdi_version"]), (True, "1.0.0"))

    def test_containerd_2_version_3_config_with_cdi_off(self):
        m = self.machine("2.1.4", "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n")
        self.assertNotReady(m, CONFIG, "CDI is off in containerd 2.1.4", "[plugins.'io.containerd.cri.v1.runtime']")

    def test_containerd_1_6_has_no_cdi(self):
        m = self.machine("1.6.20~ds1-1+b1")
        self.assertNotReady(m, "/var/lib/dpkg/status (containerd 1.6.20~ds1-1+b1)", "containerd 1.6.20 has no CDI support")

    def test_docker_containerd_io_package(self):
        m = self.machine("1.7.27-1", package="containerd.io")
        r = self.assertNotReady(m, CONFIG, "CDI is off in containerd 1.7.27")
        self.assertIn("containerd.io 1.7.27-1", r.result["containerd"]["version_source"])

    def test_cdi_spec_dirs_without_ours(self):
        m = self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n  cdi_spec_dirs = ["/var/run/cdi"]\n')
        self.assertNotReady(m, CONFIG, "containerd reads CDI specs from /var/run/cdi", "not from /etc/cdi", "cdi_spec_dirs")

    def test_broken_config_is_refused_as_containerd_refuses_it(self):
        # containerd does not start on a file it cannot parse; verify says so in containerd's own
        # words (its config dump's error: the file, line and column), instead of a warning and "ready".
        m = self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n  cdi_spec_dirs = ["/etc/cdi"\n')
        r = self.assertNotReady(m, CONFIG, "containerd 1.7.24 refuses its configuration", f"{CONFIG}: (5, 1): unterminated array")
        self.assertIsNone(r.result["containerd"]["cdi_enabled"])
        self.assertEqual(r.result["consumer_findings"]["config-refused"], 1)

    def test_a_utf8_comment_containerd_reads_is_read(self):
        # A UTF-8 comment, which containerd reads, was past verify's own TOML reader (a warning, CDI
        # not known); containerd's answer reads it as containerd does.
        m = self.machine("1.7.24", f'version = 2\n# caf\u00e9\n{CRI_17}\n  enable_cdi = true\n')
        r = self.assertReady(m)
        self.assertTrue(r.result["containerd"]["cdi_enabled"])
        self.assertEqual(r.result["consumer_findings"]["containerd-config"], 0)

    def test_a_table_written_twice_is_refused(self):
        m = self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n{CRI_17}\n  enable_cdi = true\n')
        self.assertNotReady(m, CONFIG, "refuses its configuration", "duplicated tables")

    def test_what_the_daemon_refuses_and_its_dump_prints(self):
        # containerd's main checks these after loading the configuration, which config dump does not.
        for version, header, extra, needle in (("1.7.24", "version = 2", 'state = "/var/lib/containerd"\n', "root and state must be different"),
                                               ("2.1.9", "version = 3", '[debug]\n  level = "verbose"\n', "not a valid logrus Level"),
                                               ("2.1.9", "version = 3", '[debug]\n  format = "xml"\n', "unknown log format")):
            with self.subTest(needle=needle):
                m = self.machine(version, f"{header}\n{extra}")
                self.assertNotReady(m, CONFIG, "refuses its configuration", needle)

    def test_a_cri_plugin_that_does_not_load_is_not_ready(self):
        # The daemon starts, its CRI plugin checks its runtimes as it loads and is left out: kubelet
        # has no runtime. The dump prints the table all the same. A default runtime named "nvidia"
        # under the wrong table is the GPU node's common mistake.
        for version, header, table in (("1.7.24", "version = 2", CRI_17), ("2.1.9", "version = 3", "[plugins.'io.containerd.cri.v1.runtime']")):
            with self.subTest(version=version):
                m = self.machine(version, f'{header}\n{table}\n  enable_cdi = true\n  [{table[1:-1]}.containerd]\n    default_runtime_name = "nvidia"\n')
                r = self.assertNotReady(m, CONFIG, "CRI plugin does not load", 'default_runtime_name = "nvidia"')
                self.assertIn("no corresponding runtime", r.result["containerd"]["cri_fails"])
                write(m.p(CONFIG), open(m.p(CONFIG)).read() + f'  [{table[1:-1]}.containerd.runtimes.nvidia]\n    runtime_type = "io.containerd.runc.v2"\n')
                self.assertIsNone(self.assertReady(m).result["containerd"]["cri_fails"])
        # 1.x moves its deprecated default_runtime table into runtimes as "default" first.
        m = self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n'
                                   '[plugins."io.containerd.grpc.v1.cri".containerd.default_runtime]\n  runtime_type = "io.containerd.runc.v2"\n')
        self.assertReady(m)
        # 2.x's CRI service does not load without its image service.
        m = self.machine("2.1.9", 'version = 3\ndisabled_plugins = ["io.containerd.cri.v1.images"]\n')
        self.assertNotReady(m, CONFIG, "disables its CRI plugin io.containerd.cri.v1.images")

    def test_a_negative_version_is_refused_as_2x_daemon_panics_on_it(self):
        # The dump prints version 3 and exits 0; the daemon panics in MigrateConfigTo. Found by the
        # oracle once its daemon ran past "starting containerd".
        m = self.machine("2.1.9", 'imports = ["conf.d/*.toml"]\n')
        write(m.p("/etc/containerd/conf.d/10.toml"), "version = -1\n")
        write(m.p("/etc/containerd/conf.d/20.toml"), "version = 0\n")  # a zero does not override
        self.assertNotReady(m, "/etc/containerd/conf.d/10.toml", "refuses its configuration", "panics", "version = -1")
        write(m.p("/etc/containerd/conf.d/20.toml"), "version = 2\n")  # the last one that is not zero
        self.assertReady(m)

    def test_a_version_1_after_a_negative_one_is_not_known(self):
        # Merged version 1 (a version-1 file is migrated up to the version so far, never down): 2.x's
        # daemon migrates the configuration, its dump does not. An adversarial review's case.
        m = self.machine("2.1.9", "version = -1\nimports = ['b.toml']\n")
        write(m.p("/etc/containerd/b.toml"), 'version = 1\n[plugins.cri]\n  enable_cdi = false\n')
        self.assertNotReady(m, "/etc/containerd/b.toml", "stands last after a negative version", "not known")
        # Past the walk's limit, the merged version is not known: no refusal on a guess.
        m = self.machine("2.1.9", "version = -1\nimports = ['conf.d/*.toml']\n")
        for i in range(40):
            write(m.p(f"/etc/containerd/conf.d/{i:02}.toml"), "version = 2\n" if i == 39 else "")
        r = self.verify(m)
        self.assertNotIn("panics", r.stderr)
        self.assertIn("not followed through its imports", r.stderr)

    def test_registry_mirrors_beside_config_path_leave_containerd_without_its_cri(self):
        for version, cfg in (("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n[plugins."io.containerd.grpc.v1.cri".registry]\n'),
                             ("2.1.9", "version = 3\n[plugins.'io.containerd.cri.v1.images'.registry]\n")):
            with self.subTest(version=version):
                m = self.machine(version, cfg + '  config_path = "/etc/containerd/certs.d"\n  [plugins."x".registry.mirrors."docker.io"]\n    endpoint = ["https://mirror.example"]\n'
                                 .replace('plugins."x"', 'plugins."io.containerd.grpc.v1.cri"' if version.startswith("1.") else "plugins.'io.containerd.cri.v1.images'"))
                self.assertNotReady(m, CONFIG, "CRI plugin does not load", "`mirrors` cannot be set when `config_path` is provided")

    def test_version_3_on_1_7_is_refused(self):
        m = self.machine("1.7.24", "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n")
        self.assertNotReady(m, CONFIG, "refuses its configuration", "unsupported config version `3`")

    def test_version_2_with_a_plugin_that_is_no_uri_is_refused_by_1_7(self):
        m = self.machine("1.7.24", 'version = 2\n[plugins.cri]\n  enable_cdi = true\n')
        self.assertNotReady(m, CONFIG, "refuses its configuration", 'invalid plugin key URI "cri"')

    def test_a_missing_import_is_refused(self):
        m = self.machine("1.7.24", f'version = 2\nimports = ["/etc/containerd/gone.toml"]\n{CRI_17}\n  enable_cdi = true\n')
        self.assertNotReady(m, "/etc/containerd/gone.toml", "refuses its configuration", "no such file or directory")
        # containerd 2.x's dump passes over it; its daemon does not start: verify says the daemon's.
        m = self.machine("2.1.9", f'version = 3\nimports = ["conf.d/*.toml"]\n')
        write(m.p("/etc/containerd/conf.d/10.toml"), 'version = 3\nimports = ["gone.toml"]\n')
        r = self.assertNotReady(m, "/etc/containerd/conf.d/gone.toml", "refuses its configuration", "which does not exist")
        self.assertEqual(r.result["containerd"]["config_files"], ["/etc/containerd/conf.d/10.toml", CONFIG])

    def test_imports_are_globbed_as_containerd_globs_them(self):
        # Issue 44, item 6: '*' in a directory component, and a leading dot matched by '*'.
        m = self.machine("1.7.24", f'version = 2\nimports = ["conf.d/*/*.toml"]\n{CRI_17}\n  enable_cdi = true\n')
        write(m.p("/etc/containerd/conf.d/a/.off.toml"), f"version = 2\n{CRI_17}\n  enable_cdi = false\n")
        r = self.assertNotReady(m, CONFIG, "CDI is off")
        self.assertEqual(r.result["containerd"]["config_files"], ["/etc/containerd/conf.d/a/.off.toml", CONFIG])

    def test_2x_merges_versions_and_migrates_only_below_3(self):
        # Issue 44, item 8: the last version wins across files; version-2 CRI keys reach the
        # runtime table only when the merged version is below 3, and never over a key there.
        v2 = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  enable_cdi = false\n"
        m = self.machine("2.1.9", 'imports = ["conf.d/*.toml"]\n' + v2)
        write(m.p("/etc/containerd/conf.d/10.toml"), "version = 3\n")
        r = self.assertReady(m)  # merged version 3: the version-2 key is not migrated, CDI stays on
        self.assertTrue(r.result["containerd"]["cdi_enabled"])
        m2 = self.machine("2.1.9", v2)
        self.assertNotReady(m2, CONFIG, "CDI is off")  # version 2 alone: migrated, CDI off
        m3 = self.machine("2.1.9", v2 + "[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = true\n")
        self.assertReady(m3)  # the runtime table's own key stands

    def test_2x_deep_merges_plugin_tables(self):
        # A later file's other CRI key does not drop enable_cdi = false set before (1.x would).
        m = self.machine("2.1.9", "version = 3\nimports = ['b.toml']\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n")
        write(m.p("/etc/containerd/b.toml"), "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  cdi_spec_dirs = ['/etc/cdi']\n")
        self.assertNotReady(m, CONFIG, "CDI is off")

    def test_a_byte_order_mark_and_a_multiline_inline_table_are_read(self):
        # Issue 44, item 9.
        m = self.machine("1.7.24", '\ufeffversion = 2\n[plugins]\n  "io.containerd.grpc.v1.cri" = {\n    enable_cdi = false\n  }\n')
        self.assertNotReady(m, CONFIG, "CDI is off")

    def test_containerd_2_3_deprecates_enable_cdi(self):
        m = self.machine("2.3.0", "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\n  enable_cdi = false\n")
        self.assertNotReady(m, CONFIG, "enable_cdi = false", "deprecates the key and fails every pod")

    def test_config_that_is_a_fifo_does_not_hang(self):
        m = self.machine("1.7.24")
        os.makedirs(m.p("/etc/containerd"), exist_ok=True)
        os.mkfifo(m.p(CONFIG))
        start = time.monotonic()
        # containerd would block on it at start: no runtime, said without blocking verify.
        self.assertNotReady(m, CONFIG, "refuses its configuration", "it is a FIFO")
        self.assertLess(time.monotonic() - start, 20)

    def test_config_symlink_resolves_inside_the_root(self):
        m = self.machine("1.7.24")
        write(m.p("/opt/config/containerd.toml"), f'version = 2\n{CRI_17}\n  enable_cdi = true\n')
        os.makedirs(m.p("/etc/containerd"), exist_ok=True)
        os.symlink("/opt/config/containerd.toml", m.p(CONFIG))
        self.assertReady(m)

    def test_setup_never_fails_on_it_and_counts_it_in_the_metrics(self):
        m = MachineRoot(self).standard()
        os.makedirs(m.p("/var/lib/prometheus/node-exporter"))
        write(m.p("/var/lib/dpkg/status"), dpkg_status("1.7.24"))
        m.install_containerd("1.7.24")
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        m.setup_result = r.result
        self.assertIn("CDI is off in containerd 1.7.24", r.stderr)
        self.assertEqual(m.setup_result["consumer_findings"]["cdi-disabled"], 1)
        with open(m.p("/var/lib/prometheus/node-exporter/unbounded-nvidia-setup.prom")) as f:
            metrics = f.read()
        self.assertIn('unbounded_nvidia_consumer_findings{check="cdi-disabled"} 1\n', metrics)
        self.assertIn('unbounded_nvidia_consumer_findings{check="shadowed"} 0\n', metrics)


class TestContainerdWithoutPackage(ConsumerCase):
    """containerd from a release tarball or an RPM: no dpkg entry, so its version (and with it CDI's
    default and the newest cdiVersion it reads) came from nowhere, and verify stayed ready with a
    warning whatever the configuration said. The binary says its version."""

    def tarball_machine(self, says, config, major="1"):
        # The real containerd of that major version behind a wrapper that says `says` as its version.
        m = self.machine(config=config).install_containerd(major, "/usr/lib/containerd-real")
        place_host_file("/bin/sh", m.p("/bin/sh"))
        write(m.p("/usr/local/bin/containerd"),
              f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo '{says}'; exit 0; }}\nexec /usr/lib/containerd-real \"$@\"\n")
        os.chmod(m.p("/usr/local/bin/containerd"), 0o755)
        return m

    def test_containerd_1_7_from_a_tarball_with_cdi_off_by_default(self):
        m = self.tarball_machine("containerd github.com/containerd/containerd v1.7.24 88bf19b2105c8b17560993bee28a01ddc2f97182",
                                 f"version = 2\n{CRI_17}\n")
        r = self.assertNotReady(m, CONFIG, "enable_cdi")
        c = r.result["containerd"]
        self.assertEqual((c["version"], c["cdi_enabled"]), ("1.7.24", False), c)
        self.assertEqual(c["version_source"], "/usr/local/bin/containerd --version (v1.7.24)")

    def test_containerd_2_from_a_tarball_and_dockers_containerd_io(self):
        for says, version in (("containerd github.com/containerd/containerd/v2 v2.1.9 0ab1b2c", "2.1.9"),
                              ("containerd containerd.io 1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", "1.7.27")):
            with self.subTest(says=says):
                m = self.tarball_machine(says, f"version = 2\n{CRI_17}\n  enable_cdi = true\n", version)
                r = self.assertReady(m)
                self.assertEqual(r.result["containerd"]["version"], version)

    def test_a_binary_that_says_nothing_leaves_the_version_unknown(self):
        # Which cdiVersion it accepts is not known (a warning); whether CDI is on, containerd says.
        m = self.tarball_machine("no version here", f"version = 2\n{CRI_17}\n")
        r = self.verify(m)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual([p["path"] for p in r.result["problems"]], [CONFIG])
        self.assertIn("CDI is off in containerd (version unknown)", r.result["problems"][0]["message"])
        self.assertTrue(any("containerd's version is unknown" in w for w in r.result["warnings"]), r.result["warnings"])
        write(m.p(CONFIG), f"version = 2\n{CRI_17}\n  enable_cdi = true\n")
        self.assertReady(m)


class TestSpecVersion(ConsumerCase):
    def additional_gids_machine(self, containerd):
        # A GPU node of group video (44), not world-writable: nvidia-ctk's rule gives the spec
        # additionalGids, which need cdiVersion 0.7.0.
        m = MachineRoot(self).standard()
        os.chown(m.p("/dev/nvidia0"), 0, 44)
        os.chmod(m.p("/dev/nvidia0"), 0o660)
        write(m.p("/var/lib/dpkg/status"), dpkg_status(containerd))
        m.install_containerd(containerd)
        write(m.p(CONFIG), f'version = 2\n{CRI_17}\n  enable_cdi = true\n')
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(m.p(SPEC)) as f:
            self.assertIn("cdiVersion: 0.7.0", f.read())  # the premise
        return m

    def test_a_spec_newer_than_containerd_accepts(self):
        m = self.additional_gids_machine("1.7.12~ds1-1")
        r = self.assertNotReady(m, SPEC, "cdiVersion 0.7.0", "containerd 1.7.12", "accepts at most 0.6.0", "needs containerd 1.7.16")
        self.assertEqual(r.result["consumer_findings"]["cdi-version"], 1)

    def test_the_same_spec_on_a_containerd_that_accepts_it(self):
        self.assertReady(self.additional_gids_machine("1.7.16~ds1-1"))

    def test_debian_builds_containerd_against_its_own_cdi_library(self):
        # Debian's containerd is built against the packaged CDI library, not the one upstream's go.mod
        # names: the library decides. 1.7.12's upstream table says 0.6.0 at most; built against 0.7.0
        # it serves the 0.7.0 spec, and against 0.6.0 it refuses it, whatever the table says.
        m = self.additional_gids_machine("1.7.12~ds1-1")
        write(m.p("/var/lib/dpkg/status"), dpkg_status("1.7.12~ds1-1", built_using="0.7.0-1"))
        r = self.assertReady(m)
        c = r.result["containerd"]
        self.assertEqual(c["max_cdi_version"], "0.7.0", c)
        self.assertIn("golang-tags.cncf-container-device-interface 0.7.0-1", c["max_cdi_version_from"])
        write(m.p("/var/lib/dpkg/status"), dpkg_status("1.7.16~ds1-1", built_using="0.6.0-2"))
        self.assertNotReady(m, SPEC, "cdiVersion 0.7.0", "containerd 1.7.16", "accepts at most 0.6.0 (built with CDI library 0.6.0-2)",
                            "needs a containerd built with CDI library 0.7 or later")


class TestShadowing(ConsumerCase):
    def cdi_machine(self):
        return self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n')

    def test_nvidia_cdi_refresh_spec_in_var_run_cdi_wins(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/nvidia.yaml"), gpu_spec(["all", "0"]))
        r = self.assertNotReady(m, "/var/run/cdi/nvidia.yaml", "is a CDI spec of kind nvidia.com/gpu, as /etc/cdi/nvidia.yaml is, in a later CDI directory, and wins")
        self.assertEqual(r.result["cdi_shadowing"], [{"file": "/var/run/cdi/nvidia.yaml", "ours": "/etc/cdi/nvidia.yaml",
                                                      "kind": "nvidia.com/gpu", "directory": "later"}])
        self.assertEqual(r.result["consumer_findings"]["shadowed"], 1)

    def test_same_directory_makes_both_unusable(self):
        m = self.cdi_machine()
        write(m.p("/etc/cdi/zz-other.json"), gpu_spec(["0"]))
        r = self.assertNotReady(m, "/etc/cdi/zz-other.json", "two specs of one directory conflict", "drops both")
        self.assertEqual(r.result["cdi_shadowing"][0]["directory"], "same")

    def test_an_earlier_directorys_spec_of_our_kind_is_named(self):
        # Ours wins where names meet, but its other devices pass as ours, and one change of
        # cdi_spec_dirs hands pods all of them.
        m = self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n  cdi_spec_dirs = ["/opt/cdi", "/etc/cdi"]\n')
        write(m.p("/opt/cdi/old.yaml"), gpu_spec(["0"]))
        r = self.assertNotReady(m, "/opt/cdi/old.yaml", "ours wins where their device names meet", "a change of cdi_spec_dirs")
        self.assertEqual(r.result["cdi_shadowing"][0]["directory"], "earlier")

    def test_a_spec_of_our_kind_is_a_conflict_whatever_its_device_names_or_version(self):
        """One-sided: verify never models which devices the CDI library would take from a file not
        ours. No name of `gpu-extra` meets ours, `yes` is `true` to go-yaml, and containerd 1.7.24's
        library (0.7.0 at most) refuses a 1.0.0 spec; each names our kind, each is not ready (a
        device under our kind that is not ours is a conflict, and the next containerd may read it)."""
        for name, text in (("extra.yaml", gpu_spec(["gpu-extra"])),
                           ("yes.yaml", "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: yes\n"
                                        "  containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}\n"),
                           ("new.yaml", gpu_spec(["all"]).replace('"0.5.0"', '"1.0.0"'))):
            with self.subTest(name=name):
                m = self.cdi_machine()
                write(m.p(f"/var/run/cdi/{name}"), text)
                r = self.assertNotReady(m, f"/var/run/cdi/{name}", "is a CDI spec of kind nvidia.com/gpu", "and wins")
                self.assertEqual(r.result["consumer_findings"]["shadowed"], 1)

    def test_an_entry_that_would_hang_or_exhaust_the_library_is_a_problem_naming_it(self):
        """The CDI library reads every *.json and *.yaml entry with a blocking read under its lock: a
        FIFO a pod made there hangs every GPU pod's creation, a link to /dev/zero grows containerd until
        it is killed. verify read past them and said ready."""
        for name, make in (("fifo.json", lambda p: os.mkfifo(p)),
                           ("zero.yaml", lambda p: os.symlink("/dev/zero", p)),
                           ("node.json", lambda p: os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 5)))):
            with self.subTest(name=name):
                m = self.cdi_machine()
                make_chardev(m.p("/dev/zero"), 1, 5)  # the machine's own, where the link leads
                path = m.p(f"/var/run/cdi/{name}")
                os.makedirs(os.path.dirname(path), exist_ok=True)
                make(path)
                self.assertNotReady(m, f"/var/run/cdi/{name}", "the CDI library")

    def test_a_spec_debians_containerd_accepts_shadows_ours(self):
        # trixie's containerd 1.7.24 is built against CDI library 0.8.0 (Built-Using), where upstream's
        # 1.7.24 vendors 0.7.0: it reads a leftover 0.8.0 spec, whose `all` then wins over ours.
        m = self.cdi_machine()
        write(m.p("/var/lib/dpkg/status"), dpkg_status("1.7.24~ds1-6+deb13u1", built_using="0.8.0-5"))
        write(m.p("/var/run/cdi/nvidia.yaml"), gpu_spec(["all"]).replace('"0.5.0"', '"0.8.0"'))
        r = self.assertNotReady(m, "/var/run/cdi/nvidia.yaml", "is a CDI spec of kind nvidia.com/gpu, as /etc/cdi/nvidia.yaml is, in a later CDI directory, and wins")
        c = r.result["containerd"]
        self.assertEqual((c["version"], c["max_cdi_version"]), ("1.7.24", "0.8.0"), c)
        self.assertIn("Built-Using", c["max_cdi_version_from"])
        # Without the field the upstream table stands (0.7.0 at most), and says so; the leftover
        # names our kind either way.
        write(m.p("/var/lib/dpkg/status"), dpkg_status("1.7.24~ds1-6+deb13u1"))
        r = self.assertNotReady(m, "/var/run/cdi/nvidia.yaml", "is a CDI spec of kind nvidia.com/gpu, as /etc/cdi/nvidia.yaml is, in a later CDI directory, and wins")
        self.assertEqual(r.result["containerd"]["max_cdi_version"], "0.7.0")
        self.assertIn("go.mod", r.result["containerd"]["max_cdi_version_from"])

    def test_sids_static_built_using_field(self):
        # sid's containerd 2.1.9 names the library in Static-Built-Using: 1.0.1 accepts up to 1.0.0.
        m = self.cdi_machine()
        write(m.p("/var/lib/dpkg/status"), dpkg_status("2.1.9+ds1-5", built_using="1.0.1-2", field="Static-Built-Using"))
        m.install_containerd("2.1.9")
        r = self.assertReady(m)
        c = r.result["containerd"]
        self.assertEqual((c["version"], c["max_cdi_version"]), ("2.1.9", "1.0.0"), c)
        self.assertIn("Static-Built-Using", c["max_cdi_version_from"])

    def test_a_symlink_in_var_run_cdi_resolves_inside_the_machine_root(self):
        m = self.cdi_machine()
        write(m.p("/opt/leftover/nvidia.yaml"), "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: 0\n"
              "  containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}\n")
        os.makedirs(m.p("/var/run/cdi"), exist_ok=True)
        os.symlink("/opt/leftover/nvidia.yaml", m.p("/var/run/cdi/nvidia.yaml"))
        self.assertNotReady(m, "/var/run/cdi/nvidia.yaml", "is a CDI spec of kind nvidia.com/gpu, as /etc/cdi/nvidia.yaml is, in a later CDI directory, and wins")

    def test_hostile_yaml_nesting_behind_an_apostrophe_is_bounded(self):
        m = self.cdi_machine()
        base = self.verify(m).result["peak_rss_kib"]
        write(m.p("/var/run/cdi/nest.yaml"), "note: don't\nb: " + "[" * 2_000_000 + "\n")
        write(m.p("/var/run/cdi/deep.json"), '{"kind": ' + "[" * 2_000_000)
        write(m.p("/var/run/cdi/deep-list.json"), "[" * 2_000_000)  # a list: no spec to the library
        write(m.p("/var/run/cdi/wide.json"), "[" + ",".join(["{}"] * 300000) + "]")  # a list: no spec to the library
        write(m.p("/var/run/cdi/wide-object.json"), '{"devices": [' + ",".join(["{}"] * 300000) + "]}")
        r = self.verify(m)
        # Issue 44, item 4: what verify cannot parse within its bounds may shadow ours as far as it
        # knows: not ready, each named, never a silent pass.
        self.assertEqual(r.returncode, 1, r.stderr)
        unjudged = sorted(p["path"] for p in r.result["problems"] if p["message"].startswith("Cannot tell whether"))
        self.assertEqual(unjudged, ["/var/run/cdi/deep.json", "/var/run/cdi/nest.yaml", "/var/run/cdi/wide-object.json"], r.stderr)
        self.assertMemoryBounded(r.result, base)

    def test_many_names_in_var_run_cdi_are_listed_within_bounds(self):
        m = self.cdi_machine()
        base = self.verify(m).result["peak_rss_kib"]
        os.makedirs(m.p("/var/run/cdi"), exist_ok=True)
        for i in range(5000):
            open(m.p(f"/var/run/cdi/{'x' * 200}-{i:05}.yaml"), "w").close()
        write(m.p("/var/run/cdi/aaa-nvidia.yaml"), gpu_spec(["all"]))  # sorts first: read, and found
        r = self.verify(m)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("/var/run/cdi/aaa-nvidia.yaml", [p["path"] for p in r.result["problems"]])
        self.assertMemoryBounded(r.result, base)
        # One that sorts after the first 256 is not read: verify cannot tell, and says so (it said
        # ready with a warning, while the library served pods that spec's devices).
        os.unlink(m.p("/var/run/cdi/aaa-nvidia.yaml"))
        write(m.p("/var/run/cdi/zzz-nvidia.yaml"), gpu_spec(["all"]))
        self.assertNotReady(m, "/var/run/cdi", "holds 5001 CDI specs: verify read only the first 256 by name",
                            "cannot tell whether the others shadow ours")

    def test_without_containerd_the_cdi_library_defaults_apply(self):
        m = self.machine()
        write(m.p("/var/run/cdi/nvidia.yaml"), gpu_spec(["all"]))
        self.assertNotReady(m, "/var/run/cdi/nvidia.yaml", "and wins")

    def test_other_kinds_and_the_device_plugin_do_not_shadow(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/vendor.yaml"), gpu_spec(["0", "all"], kind="example.com/fpga"))
        write(m.p("/var/run/cdi/notes.txt"), gpu_spec(["0"]))  # not .json/.yaml: the CDI library ignores it
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V1))
        r = self.assertReady(m)
        self.assertEqual(r.result["cdi_shadowing"], [])

    def test_hostile_entries_in_var_run_cdi(self):
        m = self.cdi_machine()
        os.makedirs(m.p("/var/run/cdi"), exist_ok=True)
        os.mkfifo(m.p("/var/run/cdi/fifo.yaml"))
        make_chardev(m.p("/dev/zero"), 1, 5)
        os.symlink("/dev/zero", m.p("/var/run/cdi/zero.yaml"))
        os.symlink("/../../../../etc/passwd", m.p("/var/run/cdi/passwd.yaml"))
        write(m.p("/var/run/cdi/bomb.yaml"), "a: &a [" + ",".join(["*a"] * 50) + "]\n")
        write(m.p("/var/run/cdi/big.json"), "[" * 3_000_000)
        for i in range(300):
            write(m.p(f"/var/run/cdi/vendor-{i:03}.json"), gpu_spec([str(i)], kind="example.com/dev"))
        start = time.monotonic()
        r = self.verify(m)
        self.assertLess(time.monotonic() - start, 20)
        # The alias bomb and the file over the size cap may be specs to the library, and the FIFO and
        # the link to a device hang or exhaust it: each named, not ready, none of them read; the link
        # out of the root is not followed out of it.
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(sorted(p["path"] for p in r.result["problems"]),
                         ["/var/run/cdi", "/var/run/cdi/big.json", "/var/run/cdi/bomb.yaml", "/var/run/cdi/fifo.yaml", "/var/run/cdi/zero.yaml"],
                         r.stderr)
        self.assertTrue(any("holds 305 CDI specs: verify read only the first 256 by name" in p["message"] for p in r.result["problems"]),
                        r.result["problems"])


class TestCdiLibraryRules(ConsumerCase):
    """The CDI library's own rules for which files it reads and which keys it takes as the kind, each
    once a way verify called a shadowing spec harmless (found against Debian's CDI library 0.8.0 and
    1.0.1; tests/oracle/ holds verify, one-sidedly, to the real library on generated cases)."""

    EDITS = {"deviceNodes": [{"path": "/dev/nvidia0"}]}

    def cdi_machine(self):
        return self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n')

    def assertServedFrom(self, m, path):
        r = self.assertNotReady(m, path, "and wins")
        self.assertEqual([s["file"] for s in r.result["cdi_shadowing"]], [path], r.result["cdi_shadowing"])
        return r

    def test_dot_files_are_read_by_the_library(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/.x.json"), gpu_spec(["0"]))
        self.assertServedFrom(m, "/var/run/cdi/.x.json")

    def test_a_file_named_only_dot_json_is_read_too(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/.json"), gpu_spec(["0"]))
        self.assertServedFrom(m, "/var/run/cdi/.json")

    def test_field_names_in_another_case(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/upper.json"), json.dumps({
            "CDIVERSION": "0.5.0", "Kind": "nvidia.com/gpu",
            "Devices": [{"Name": "0", "ContainerEdits": {"DeviceNodes": [{"Path": "/dev/nvidia0"}]}}]}))
        self.assertServedFrom(m, "/var/run/cdi/upper.json")

    def test_a_kelvin_sign_folds_to_k(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/kelvin.json"), json.dumps({
            "cdiVersion": "0.5.0", "\u212aind": "nvidia.com/gpu",
            "devices": [{"name": "0", "containerEdits": self.EDITS}]}, ensure_ascii=False))
        self.assertServedFrom(m, "/var/run/cdi/kelvin.json")

    def test_numeric_device_names_are_text_to_the_library(self):
        for i, name in enumerate(["0x0", "00", "+0", "0.0", "0o0", "0_0", "-0"]):
            m = self.cdi_machine()
            write(m.p(f"/var/run/cdi/n{i}.yaml"),
                  f"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: {name}\n  containerEdits:\n"
                  f"    deviceNodes:\n    - path: /dev/nvidia0\n")
            self.assertServedFrom(m, f"/var/run/cdi/n{i}.yaml")

    def test_a_file_the_library_refuses_that_names_no_kind_of_ours_is_harmless(self):
        # Refused by the library as a whole or not: of another kind, a list, empty, a scalar.
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/unknown.json"), json.dumps({"cdiVersion": "0.5.0", "kind": "example.com/fpga", "extra": 1,
                                                             "devices": [{"name": "0", "containerEdits": self.EDITS}]}))
        write(m.p("/var/run/cdi/list.yaml"), "- kind: nvidia.com/gpu\n")
        write(m.p("/var/run/cdi/empty.json"), "")
        write(m.p("/var/run/cdi/scalar.yaml"), "nvidia.com/gpu\n")
        r = self.assertReady(m)
        self.assertEqual(r.result["cdi_shadowing"], [])

    def test_what_may_crash_the_library_is_named_whatever_its_kind(self):
        for name, text, why in (
                ("null-mount.yaml", "cdiVersion: 0.5.0\nkind: example.com/fpga\ndevices:\n- name: a\n"
                                    "  containerEdits: {mounts: [null]}\n", "a null mount"),
                ("one-letter.json", json.dumps({"cdiVersion": "0.5.0", "kind": "x/fpga",
                                                "devices": [{"name": "a", "containerEdits": self.EDITS}]}),
                 "a one-letter vendor or class in kind 'x/fpga'")):
            with self.subTest(name=name):
                m = self.cdi_machine()
                write(m.p(f"/var/run/cdi/{name}"), text)
                r = self.assertNotReady(m, f"/var/run/cdi/{name}", "can crash the CDI library", why)
                self.assertEqual(r.result["consumer_findings"]["cdi-crash"], 1)

    def test_the_device_plugins_path_is_no_exemption(self):
        m = self.cdi_machine()
        write(m.p(PLUGIN_SPEC), gpu_spec(["0"]))
        r = self.verify(m)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual([s["file"] for s in r.result["cdi_shadowing"]], [PLUGIN_SPEC])
        self.assertTrue(any(p["path"] == PLUGIN_SPEC and "and wins" in p["message"] for p in r.result["problems"]), r.stderr)

    def test_an_alias_a_tag_or_a_merge_key_is_named_not_passed(self):
        # go-yaml expands the alias, decodes !!binary as base64 and merges what << names: the kind
        # they hide is not what verify reads.
        for name, text in (("alias.yaml", "x: &k nvidia.com/gpu\nkind: *k\n"),
                           ("tag.yaml", "kind: !!binary bnZpZGlhLmNvbS9ncHU=\n"),
                           ("merge.yaml", "<<: {kind: nvidia.com/gpu}\ncdiVersion: 0.5.0\n")):
            with self.subTest(name=name):
                m = self.cdi_machine()
                write(m.p(f"/var/run/cdi/{name}"), text)
                self.assertNotReady(m, f"/var/run/cdi/{name}", f"Cannot tell whether /var/run/cdi/{name} shadows our CDI devices")

    def test_brackets_in_a_comment_count_and_are_named(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/comment.yaml"), "# " + "[" * 40 + "\n" + "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: 0\n"
              "  containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}\n")
        self.assertNotReady(m, "/var/run/cdi/comment.yaml", "Cannot tell whether")

    def test_a_spec_file_verify_cannot_open_is_named(self):
        """The library follows a link through /proc's magic links (/proc/self/root/...); verify's
        confined open refuses one, and it then skipped the file and said ready while the library
        served pods its devices. A loop too: a file verify did not read is never a silent pass."""
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/x.txt"), gpu_spec(["0"]))
        os.makedirs(m.p("/hostproc"), exist_ok=True)
        os.symlink("/hostproc/self/root/var/run/cdi/x.txt", m.p("/var/run/cdi/zz.yaml"))
        os.symlink("loop-b.json", m.p("/var/run/cdi/loop-a.json"))
        os.symlink("loop-a.json", m.p("/var/run/cdi/loop-b.json"))
        # A procfs in the root, where the machine's own is (the fake /proc's files stay): verify in
        # a mount namespace of its own.
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", 'mount -t proc proc "$0/hostproc" && exec "$@"',
                            m.path, SETUP, "--root", m.path, "--json", "verify"], capture_output=True, text=True, env=m.run_env(None), timeout=60)
        self.assertEqual(r.returncode, 1, r.stderr)
        named = {p["path"]: p["message"] for p in json.loads(r.stdout)["problems"]}
        for path in ("/var/run/cdi/loop-a.json", "/var/run/cdi/loop-b.json"):
            self.assertIn(f"Cannot tell whether {path} shadows our CDI devices", named.get(path, ""), named)
        # Refused as a magic link; under qemu-user, which resolves paths itself, followed to the
        # spec of our kind behind it: named either way.
        self.assertTrue(named.get("/var/run/cdi/zz.yaml", "").startswith(
            ("Cannot tell whether /var/run/cdi/zz.yaml shadows our CDI devices", "/var/run/cdi/zz.yaml is a CDI spec of kind nvidia.com/gpu")), named)
        self.assertNotIn("/etc/cdi/nvidia.yaml", named)

    def test_a_symlinked_spec_directory_is_not_walked(self):
        m = self.cdi_machine()
        write(m.p("/opt/specs/nvidia.json"), gpu_spec(["0"]))
        os.makedirs(m.p("/var/run"), exist_ok=True)
        shutil.rmtree(m.p("/var/run/cdi"), ignore_errors=True)
        os.symlink("/opt/specs", m.p("/var/run/cdi"))
        r = self.assertReady(m)
        self.assertEqual(r.result["cdi_shadowing"], [])


class TestNewerConsumers(ConsumerCase):
    """Issue 44, item 3: CRI-O as the runtime (CDI always on, its spec directories from crio.conf and
    its drop-ins, its CDI library's newest cdiVersion), and the CDI schema override file."""

    def crio_machine(self, version="1.34.2-1", conf=None, drop_ins=None):
        m = MachineRoot(self).standard()
        write(m.p("/var/lib/dpkg/status"), dpkg_status(version, package="cri-o"))
        if conf is not None:
            write(m.p("/etc/crio/crio.conf"), conf)
        for name, text in (drop_ins or {}).items():
            write(m.p(f"/etc/crio/crio.conf.d/{name}"), text)
        r = m.setup()
        self.assertEqual(r.returncode, 0, r.stderr)
        return m

    def test_crio_has_cdi_always_on(self):
        m = self.crio_machine()
        r = self.assertReady(m)
        c = r.result["containerd"]
        self.assertEqual((c["runtime"], c["cdi_enabled"], c["max_cdi_version"]), ("cri-o", True, "1.0.0"), c)

    def test_a_crio_drop_in_without_our_directory(self):
        m = self.crio_machine(conf='[crio.runtime]\ncdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n',
                              drop_ins={"10-cdi.conf": '[crio.runtime]\ncdi_spec_dirs = ["/var/run/cdi"]\n'})
        # The runtime the message names is CRI-O, and the setting is its cdi_spec_dirs.
        self.assertNotReady(m, "/etc/crio/crio.conf.d/10-cdi.conf", "CRI-O reads CDI specs from /var/run/cdi",
                            "(cdi_spec_dirs in /etc/crio/crio.conf.d/10-cdi.conf)", "[crio.runtime]")

    def test_every_crio_drop_in_whatever_its_name_and_in_subdirectories(self):
        """CRI-O applies every file under crio.conf.d by a recursive walk, whatever its name: each of
        these, without /etc/cdi, breaks every GPU pod, and verify read only the top-level *.conf."""
        for name in ("01-my-overwrite", "10-cdi.conf.dpkg-old", "gpu/10-cdi.conf"):
            with self.subTest(name=name):
                m = self.crio_machine(conf='[crio.runtime]\ncdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n',
                                      drop_ins={name: '[crio.runtime]\ncdi_spec_dirs = ["/var/run/cdi"]\n'})
                self.assertNotReady(m, f"/etc/crio/crio.conf.d/{name}", "CRI-O reads CDI specs from /var/run/cdi")

    def test_crio_drop_ins_in_its_order(self):
        # filepath.Walk: lexical, a subdirectory's files where its name sorts; the last word wins.
        m = self.crio_machine(drop_ins={"10-a.conf": '[crio.runtime]\ncdi_spec_dirs = ["/var/run/cdi"]\n',
                                        "20-dir/x": '[crio.runtime]\ncdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]\n'})
        self.assertReady(m)

    def test_a_crio_config_it_cannot_parse(self):
        m = self.crio_machine(drop_ins={"10-cdi.conf": "[crio.runtime\n"})
        self.assertNotReady(m, "/etc/crio/crio.conf.d/10-cdi.conf", "CRI-O 1.34.2 refuses its configuration")

    def test_crio_1_35_reads_cdi_1_1(self):
        m = self.crio_machine("1.35.0-1")
        r = self.assertReady(m)
        self.assertEqual(r.result["containerd"]["max_cdi_version"], "1.1.0")

    def test_the_schema_override_file_is_a_problem(self):
        m = self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n')
        write(m.p("/etc/cdi/schema/schema.json"), "{}")
        self.assertNotReady(m, "/etc/cdi/schema/schema.json", "validates every spec against it")


class TestDraClaims(ConsumerCase):
    def cdi_machine(self):
        return self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n')

    def claim(self, m, version, uid=CLAIM_UID):
        path = f"/var/run/cdi/k8s.gpu.nvidia.com-claim_{uid}.yaml"
        write(m.p(path), dra_claim_spec(version, uid))
        return path

    def test_a_current_claim_spec(self):
        m = self.cdi_machine()
        self.claim(m, V1)
        r = self.assertReady(m)
        self.assertEqual(r.result["dra_claims"], {"claim_specs": 1, "checked": 1, "stale": []})
        self.assertFalse([w for w in r.result["warnings"] if "stale" in w or "claim" in w], r.result["warnings"])

    def test_a_stale_claim_spec_is_a_warning_naming_the_claim(self):
        m = self.cdi_machine()
        path = self.claim(m, V2)  # written for the driver before a refresh swapped the root
        r = self.assertReady(m)  # claims come and go: never not ready for them
        stale = r.result["dra_claims"]["stale"]
        self.assertEqual([(s["claim"], s["file"]) for s in stale], [(CLAIM_UID, path)])
        self.assertTrue(any(f"the DRA claim {CLAIM_UID} is stale" in w and f"libcuda.so.{V2}" in w for w in r.result["warnings"]),
                        r.result["warnings"])
        self.assertIn(f"the DRA claim {CLAIM_UID} is stale", r.stderr)
        self.assertEqual(r.result["consumer_findings"]["dra-stale"], 1)

    def test_any_spec_into_the_driver_root_is_checked(self):
        m = self.cdi_machine()
        write(m.p("/var/run/cdi/someone-else.json"), dra_claim_spec(V2).replace("k8s.gpu.nvidia.com/claim", "example.com/gpu"))
        r = self.assertReady(m)
        self.assertTrue(any("/var/run/cdi/someone-else.json is stale" in w for w in r.result["warnings"]), r.result["warnings"])


NVIDIA_RUNTIME = "/etc/nvidia-container-runtime/config.toml"


class TestKubernetesWiring(ConsumerCase):
    """Issue 45, item 5: what verify finds on the machine that shows the NVIDIA device plugin, the container
    runtime or nvidia-container-runtime wired to another driver root or spec directory names the setting to
    change (unbounded-nvidia-setup(8), KUBERNETES, says where each was read upstream)."""

    def plugin(self, m, edit):
        spec = json.loads(plugin_spec(m, V1))
        edit(spec)
        write(m.p(PLUGIN_SPEC), json.dumps(spec))

    def test_a_device_plugin_spec_generated_from_another_driver_root(self):
        # nvidiaDriverRoot left at "/" on a machine with a driver of its own in /usr/lib: every hostPath
        # exists and names the driver's version, and pods would get that driver, not the root setup keeps.
        m = self.machine()
        for lib in ("libcuda.so", "libnvidia-ml.so"):
            write(m.p(f"/usr/lib/{ARCH}/{lib}.{V1}"), "not ours")

        def from_slash(spec):
            for mount in spec["containerEdits"]["mounts"]:
                mount["hostPath"] = mount["containerPath"] = mount["hostPath"].replace("/run/nvidia/driver/lib", "/usr/lib")

        self.plugin(m, from_slash)
        r = self.assertNotReady(m, PLUGIN_SPEC, f"/usr/lib/{ARCH}/libcuda.so.{V1}", "generated from the driver root /,",
                                "to /run/nvidia/driver", "nvidiaDriverRoot", "NVIDIA_DRIVER_ROOT", "hostPaths.driverInstallDir")
        self.assertNotIn("so it writes a current spec", r.result["problems"][0]["message"])
        # setup warns the same (it never fails on the plugin's spec)
        s = m.setup()
        self.assertEqual(s.returncode, 0, s.stderr)
        self.assertTrue(any("nvidiaDriverRoot" in w for w in s.result["warnings"]), s.result["warnings"])

    def test_device_plugin_device_nodes_under_the_driver_root(self):
        # Helm's nvidiaDriverRoot=/run/nvidia/driver without nvidiaDevRoot: the plugin's device root follows
        # its driver root, and its nodes are /run/nvidia/driver/dev/..., which our root never has.
        m = self.machine()

        def dev_under_root(spec):
            for edits in [spec["containerEdits"]] + [d["containerEdits"] for d in spec["devices"]]:
                for node in edits["deviceNodes"]:
                    node["hostPath"] = "/run/nvidia/driver" + node["path"]

        self.plugin(m, dev_under_root)
        r = self.assertNotReady(m, PLUGIN_SPEC, "/run/nvidia/driver/dev/nvidia", "nvidiaDevRoot", "NVIDIA_DEV_ROOT", "device root to /")
        self.assertNotIn("so it writes a current spec", r.result["problems"][0]["message"])

    def test_a_device_plugin_spec_of_our_root_is_not_judged_wired_wrong(self):
        m = self.machine()
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V1))
        self.assertReady(m)
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V2))  # stale: the advice stays a restart
        self.assertNotReady(m, PLUGIN_SPEC, "does not match driver", "so it writes a current spec")

    def test_a_dra_claim_spec_generated_from_another_driver_root(self):
        # The DRA driver's nvidiaDriverRoot defaults to "/": its claim's spec mounts the machine's /usr/lib.
        m = self.machine()
        write(m.p(f"/usr/lib/{ARCH}/libcuda.so.{V1}"), "not ours")
        path = f"/var/run/cdi/k8s.gpu.nvidia.com-claim_{CLAIM_UID}.yaml"
        write(m.p(path), dra_claim_spec(V1).replace("/run/nvidia/driver/lib", "/usr/lib"))
        r = self.assertReady(m)  # claims come and go: a warning, as a stale claim's
        found = [w for w in r.result["warnings"] if CLAIM_UID in w]
        self.assertEqual(len(found), 1, r.result["warnings"])
        self.assertIn("generated from another driver root", found[0])
        self.assertIn("nvidiaDriverRoot", found[0])
        self.assertEqual([s["claim"] for s in r.result["dra_claims"]["stale"]], [CLAIM_UID])

    def test_containerd_that_does_not_read_the_device_plugins_directory(self):
        m = self.machine("1.7.24", f'version = 2\n{CRI_17}\n  enable_cdi = true\n  cdi_spec_dirs = ["/etc/cdi"]\n')
        self.assertReady(m)  # no spec of the device plugin: nothing needs /var/run/cdi
        write(m.p(PLUGIN_SPEC), plugin_spec(m, V1))
        r = self.assertNotReady(m, CONFIG, "containerd reads CDI specs from /etc/cdi", "not from /var/run/cdi",
                                "k8s.device-plugin.nvidia.com-gpu.json", "add it to cdi_spec_dirs", CRI_17)
        self.assertEqual(r.result["consumer_findings"]["cdi-spec-dirs"], 1)

    def runtime_config(self, m, text):
        write(m.p(NVIDIA_RUNTIME), text)
        r = self.assertReady(m)  # warnings: pods of the device plugin's cdi strategies never pass it
        return [w for w in r.result["warnings"] if NVIDIA_RUNTIME in w], r

    def test_nvidia_container_runtime_in_cdi_mode_reading_our_spec(self):
        m = self.machine()
        found, r = self.runtime_config(m, '[nvidia-container-runtime]\nmode = "cdi"\n\n[nvidia-container-cli]\nroot = "/"\n')
        self.assertEqual(found, [])
        self.assertEqual(r.result["consumer_findings"]["nvidia-runtime"], 0)

    def test_nvidia_container_runtime_not_in_cdi_mode(self):
        m = self.machine()
        # nvidia-ctk's own default file says "auto", which the runtime resolves to jit-cdi; none at all is "auto" too.
        for text in ('[nvidia-container-runtime]\nmode = "auto"\n', '[nvidia-container-cli]\nroot = "/run/nvidia/driver"\n',
                     'nvidia-container-runtime.mode = "legacy"\n'):
            found, r = self.runtime_config(m, text)
            self.assertEqual(len(found), 1, (text, r.result["warnings"]))
            self.assertIn('set mode = "cdi" under [nvidia-container-runtime]', found[0])
            self.assertEqual(r.result["consumer_findings"]["nvidia-runtime"], 1)

    def test_nvidia_container_runtime_spec_dirs_without_ours(self):
        m = self.machine()
        found, _ = self.runtime_config(m, '[nvidia-container-runtime]\nmode = "cdi"\n'
                                          '[nvidia-container-runtime.modes.cdi]\nspec-dirs = ["/var/run/cdi"]\n')
        self.assertEqual(len(found), 1, found)
        self.assertIn("nvidia-container-runtime.modes.cdi.spec-dirs", found[0])
        self.assertIn("/etc/cdi", found[0])

    def test_nvidia_container_runtime_default_kind_of_another_vendor(self):
        m = self.machine()
        found, _ = self.runtime_config(m, '[nvidia-container-runtime]\nmode = "cdi"\n'
                                          '[nvidia-container-runtime.modes.cdi]\ndefault-kind = "k8s.device-plugin.nvidia.com/gpu"\n')
        self.assertEqual(len(found), 1, found)
        self.assertIn("nvidia-container-runtime.modes.cdi.default-kind", found[0])

    def test_nvidia_container_runtime_config_hostile(self):
        m = self.machine()
        # A link resolves inside the machine root, as the runtime in the machine reads it.
        write(m.p("/opt/nvidia/config.toml"), '[nvidia-container-runtime]\nmode = "legacy"\n')
        os.makedirs(m.p("/etc/nvidia-container-runtime"), exist_ok=True)
        os.symlink("/opt/nvidia/config.toml", m.p(NVIDIA_RUNTIME))
        r = self.assertReady(m)
        self.assertTrue(any('mode = "cdi"' in w for w in r.result["warnings"]), r.result["warnings"])
        # A FIFO does not hang verify, and a file that is no TOML is said, not guessed at.
        os.unlink(m.p(NVIDIA_RUNTIME))
        os.mkfifo(m.p(NVIDIA_RUNTIME))
        start = time.monotonic()
        r = self.assertReady(m)
        self.assertLess(time.monotonic() - start, 20)
        self.assertEqual(r.result["consumer_findings"]["nvidia-runtime"], 1)
        os.unlink(m.p(NVIDIA_RUNTIME))
        found, _ = self.runtime_config(m, "[nvidia-container-runtime\n")
        self.assertEqual(len(found), 1, found)
        self.assertIn("cannot be read", found[0])


if __name__ == "__main__":
    main()
