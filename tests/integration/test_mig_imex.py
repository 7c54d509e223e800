#!/usr/bin/env python3
"""Issue 12: MIG compute instances and IMEX channels in the CDI specs, and `verify` of their nodes."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from unbounded_tests.cdi_case import SPEC, CdiCase
from unbounded_tests.harness import IS_ROOT, SETUP, MachineRoot, V1, V2, main, make_chardev, snapshot, write

IMEX_SPEC = "/etc/cdi/nvidia-imex-channel.yaml"
# What `nvidia-smi mig -cgi 1g.18gb -C` seven times makes on an H100/H200: GIs 7..13, one CI each.
SEVEN_1G = {gi: [0] for gi in range(7, 14)}


def names(spec_text):
    return [line.split("name: ", 1)[1].strip('"') for line in spec_text.splitlines() if line.startswith("  - name: ")]


class MigCase(CdiCase):
    def machine(self, gpus=8, mig=None, imex=()):
        m = MachineRoot(self).standard(gpus=gpus)
        for minor, instances in (mig or {}).items():
            m.add_mig(minor, instances)
        if imex:
            m.add_imex_channels(imex)
        return m



class TestMigGolden(MigCase):
    def test_eight_gpus_with_seven_instances_each_and_four_imex_channels(self):
        m = self.machine(mig={g: SEVEN_1G for g in range(8)}, imex=range(4))
        r = self.setup_ok(m)
        spec = self.generate(m)
        self.assertSchemaValid(spec)
        self.assertGolden("8x7-mig.yaml", spec)
        self.assertEqual(self.read(m, SPEC), spec, "setup and generate-cdi disagree")
        expected = [f"{g}:{j}" for g in range(8) for j in range(7)]
        self.assertEqual(names(spec), expected + ["all"])  # MIG-enabled GPUs offer no whole GPU
        self.assertNotIn("GPU-", spec)
        self.assertNotIn("nvidia-cap1\n", spec)  # config
        self.assertNotIn("nvidia-cap2\n", spec)  # monitor
        self.assertEqual(r.result["mig_devices"], 56)

        imex = self.read(m, IMEX_SPEC)
        self.assertSchemaValid(imex)
        self.assertGolden("imex-4.yaml", imex)
        self.assertEqual(names(imex), ["0", "1", "2", "3", "all"])
        self.assertIn("kind: nvidia.com/imex-channel", imex)
        self.assertEqual(r.result["imex_channels"], 4)

    def test_mig_index_counts_instances_in_gi_then_ci_order(self):
        # GPU 0: GI 1 with CIs 0 and 1, GI 2 with CI 0; GPU 1 without MIG keeps its whole-GPU devices.
        m = self.machine(gpus=2, mig={0: {2: [0], 1: [1, 0]}})
        self.setup_ok(m)
        spec = self.generate(m)
        self.assertSchemaValid(spec)
        self.assertEqual(names(spec), ["0:0", "0:1", "0:2", "1", "GPU-00000001-1111-2222-3333-444455556666", "all"])
        doc = json.loads(json.dumps(__import__("yaml").safe_load(spec)))
        devices = {d["name"]: [n["path"] for n in d["containerEdits"]["deviceNodes"]] for d in doc["devices"]}
        cap = MachineRoot.cap_minor
        self.assertEqual(devices["0:0"], ["/dev/nvidia0", f"/dev/nvidia-caps/nvidia-cap{cap(0, 1)}",
                                          f"/dev/nvidia-caps/nvidia-cap{cap(0, 1, 0)}"])
        self.assertEqual(devices["0:1"][2], f"/dev/nvidia-caps/nvidia-cap{cap(0, 1, 1)}")
        self.assertEqual(devices["0:2"][1:], [f"/dev/nvidia-caps/nvidia-cap{cap(0, 2)}",
                                              f"/dev/nvidia-caps/nvidia-cap{cap(0, 2, 0)}"])
        # "all": every node once, the parent included
        self.assertEqual(sorted(devices["all"]), sorted(set(devices["0:0"] + devices["0:1"] + devices["0:2"] + devices["1"])))

    def test_a_mig_enabled_gpu_without_compute_instances_offers_nothing_and_says_so(self):
        m = self.machine(gpus=2, mig={1: {3: []}})
        r = self.setup_ok(m)
        self.assertEqual(names(self.generate(m)), ["0", "GPU-00000000-1111-2222-3333-444455556666", "all"])
        self.assertIn("GPU 1 has MIG enabled but no compute instance", r.stderr)

    def test_no_gpu_with_a_device_is_not_ready_and_writes_no_spec(self):
        # Every GPU MIG-enabled without a compute instance: "all" would have no node, and the CDI
        # library refuses a device without edits, and with it the whole spec.
        m = self.machine(gpus=1, mig={0: {3: []}})
        r = m.run("setup")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("No GPU offers a CDI device: each of the 1 GPU(s) has MIG enabled but no compute instance", r.stderr)
        self.assertFalse(os.path.exists(m.p("/etc/cdi/nvidia.yaml")))

    def test_instances_are_keyed_by_the_device_minor_not_the_index(self):
        # PCI order puts minor 1 first: it is GPU index 0, and gpu1/ in the capabilities tree.
        m = MachineRoot(self).standard(gpus=0)
        m.add_gpu(1, "0000:18:00.0", "GPU-00000001-1111-2222-3333-444455556666")
        m.add_gpu(0, "0000:3b:00.0", "GPU-00000000-1111-2222-3333-444455556666")
        m.add_mig(1, {7: [0]})
        self.setup_ok(m)
        spec = self.generate(m)
        self.assertEqual(names(spec)[:2], ["0:0", "1"])
        self.assertIn(f"nvidia-cap{MachineRoot.cap_minor(1, 7, 0)}", spec)


    def test_a_machine_given_some_gpus_numbers_its_mig_devices_among_those(self):
        """Issue 24, item 3: GPUs 2 and 3 of 4 bound, MIG on the host's GPU 3 (this machine's GPU 1): its
        instances are 1:N, the instances of the host's other MIG GPU (0, not bound) are named nowhere."""
        m = self.machine(gpus=4, mig={3: {7: [0]}, 0: {7: [0]}})
        for minor in (0, 1):
            os.unlink(m.p(f"/dev/nvidia{minor}"))
        r = self.setup_ok(m)
        spec = self.generate(m)
        self.assertSchemaValid(spec)
        self.assertEqual(names(spec), ["0", "1:0", "GPU-00000002-1111-2222-3333-444455556666", "all"])
        self.assertNotIn(f"nvidia-cap{MachineRoot.cap_minor(0, 7, 0)}\n", spec)
        self.assertIn(f"nvidia-cap{MachineRoot.cap_minor(3, 7, 0)}\n", spec)
        self.assertEqual(r.result["mig_devices"], 1)

class TestMigErrors(MigCase):
    def assertFailsKeepingTheOldSpec(self, m, needle):
        before = self.read(m, SPEC)
        r = m.setup()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(needle, r.stderr)
        self.assertEqual(self.read(m, SPEC), before)
        return r

    def test_an_instance_node_the_host_did_not_bind_is_named(self):
        m = self.machine(gpus=1)
        self.setup_ok(m)
        m.add_mig(0, {7: [0]})
        os.unlink(m.p(f"/dev/nvidia-caps/nvidia-cap{MachineRoot.cap_minor(0, 7, 0)}"))
        self.assertFailsKeepingTheOldSpec(
            m, f"has no character device /dev/nvidia-caps/nvidia-cap{MachineRoot.cap_minor(0, 7, 0)}")

    def test_a_node_of_another_major_is_refused(self):
        m = self.machine(gpus=1)
        self.setup_ok(m)
        m.add_mig(0, {7: [0]})
        minor = MachineRoot.cap_minor(0, 7)
        make_chardev(m.p(f"/dev/nvidia-caps/nvidia-cap{minor}"), 195, minor, 0o444)
        self.assertFailsKeepingTheOldSpec(m, f"is 195:{minor}, expected nvidia-caps {MachineRoot.CAPS_MAJOR}:{minor}")

    def test_no_nvidia_caps_major(self):
        m = self.machine(gpus=1)
        self.setup_ok(m)
        m.add_mig(0, {7: [0]})
        write(m.p("/proc/devices"), "Character devices:\n195 nvidia-frontend\n\nBlock devices:\n508 nvidia-caps\n")
        self.assertFailsKeepingTheOldSpec(m, "/proc/devices names no 'nvidia-caps' major")

    def test_mig_minors_missing(self):
        m = self.machine(gpus=1)
        self.setup_ok(m)
        m.add_mig(0, {7: [0]})
        os.unlink(m.p("/proc/driver/nvidia-caps/mig-minors"))
        self.assertFailsKeepingTheOldSpec(m, "/proc/driver/nvidia-caps/mig-minors is unreadable")

    def test_bad_mig_minors_lines_are_skipped_with_a_warning(self):
        m = self.machine(gpus=1, mig={0: {7: [0]}})
        with open(m.p("/proc/driver/nvidia-caps/mig-minors"), "a") as f:
            f.write("gpu0/gi99x/access 12\nnot a line at all\n")
        r = self.setup_ok(m)
        self.assertIn("Skipped 2 line(s) of /proc/driver/nvidia-caps/mig-minors, first: /proc/driver/nvidia-caps/mig-minors:", r.stderr)
        self.assertIn("unknown capability 'gpu0/gi99x/access'", r.stderr)


class TestImex(MigCase):
    def test_the_imex_spec_follows_the_channels(self):
        m = self.machine(gpus=1, imex=[0, 1])
        self.setup_ok(m)
        self.assertEqual(names(self.read(m, IMEX_SPEC)), ["0", "1", "all"])
        self.assertEqual(os.stat(m.p(IMEX_SPEC)).st_mode & 0o777, 0o644)
        m.add_imex_channels([5])
        self.setup_ok(m)
        self.assertEqual(names(self.read(m, IMEX_SPEC)), ["0", "1", "5", "all"])
        shutil.rmtree(m.p("/dev/nvidia-caps-imex-channels"))
        r = self.setup_ok(m)
        self.assertFalse(os.path.exists(m.p(IMEX_SPEC)))
        self.assertIn("no IMEX channels any more", r.stderr)

    def test_no_channels_no_spec(self):
        m = self.machine(gpus=1)
        r = self.setup_ok(m)
        self.assertFalse(os.path.exists(m.p(IMEX_SPEC)))
        self.assertEqual(r.result["imex_channels"], 0)

    def test_channels_of_an_unknown_major_are_left_out(self):
        """Issue 26, item 6: without an nvidia-caps-imex-channels line in /proc/devices no channel node can be
        checked: channel1 made as 1:1 (/dev/mem) must not be published with rwm. All are left out, once."""
        m = self.machine(gpus=1)
        m.add_imex_channels([0])
        write(m.p("/proc/devices"), "Character devices:\n  1 mem\n195 nvidia-frontend\n509 nvidia-uvm\n\nBlock devices:\n  7 loop\n")
        make_chardev(m.p("/dev/nvidia-caps-imex-channels/channel1"), 1, 1)
        r = self.setup_ok(m)
        self.assertFalse(os.path.exists(m.p(IMEX_SPEC)))
        self.assertEqual(r.result["imex_channels"], 0)
        said = [w for w in r.result["warnings"] if "IMEX channels are not offered" in w]
        self.assertEqual(len(said), 1, r.result["warnings"])
        self.assertIn("no nvidia-caps-imex-channels major", said[0])

    def test_our_own_spec_is_not_refused_by_the_cap_on_pods_specs(self):
        """Issue 26, item 3: 6,000 channels give a 2.1 MB IMEX spec that setup wrote and then refused as
        "larger than 2097152 bytes": containerd never started. Our own spec is believed byte for byte."""
        m = self.machine(gpus=1, imex=range(6000))
        self.setup_ok(m)
        self.assertGreater(os.path.getsize(m.p(IMEX_SPEC)), 2 << 20)
        v = m.run("--json", "verify")
        self.assertEqual(v.returncode, 0, v.stdout)
        # The same size from anyone else is refused, as before.
        with open(m.p(IMEX_SPEC), "a") as f:
            f.write("# changed\n")
        v = m.run("--json", "verify")
        self.assertEqual(v.returncode, 1)
        self.assertIn("larger than 2097152 bytes and not the spec generated for the current state", v.stdout)

    def test_more_channels_than_a_spec_is_written_for_fail_before_anything_is_written(self):
        m = self.machine(gpus=1, imex=[0])
        self.setup_ok(m)
        specs = {n: self.read(m, n) for n in (SPEC, IMEX_SPEC)}
        before = snapshot(m.driver_root())
        m.add_imex_channels(range(8193))
        r = m.setup()
        self.assertEqual(r.returncode, 1)
        self.assertIn("/dev/nvidia-caps-imex-channels holds more than 8192 channels, more than the 8192 IMEX channels a spec is "
                      "written for", r.stderr)
        self.assertEqual({n: self.read(m, n) for n in (SPEC, IMEX_SPEC)}, specs)
        self.assertEqual(snapshot(m.driver_root()), before)

    def test_peak_rss_at_eight_gpus_with_seven_instances_and_2048_channels(self):
        from unbounded_tests.harness import EMULATED, SANITIZED
        m = self.machine(mig={g: SEVEN_1G for g in range(8)}, imex=range(2048))
        r = self.setup_ok(m)
        v = m.run("--json", "verify")
        self.assertEqual(v.returncode, 0, v.stdout)
        if not EMULATED and not SANITIZED:
            self.assertLessEqual(r.result["peak_rss_kib"], 16 * 1024)
            self.assertLessEqual(json.loads(v.stdout)["peak_rss_kib"], 16 * 1024)

    def test_an_imex_spec_someone_else_wrote_is_left_alone(self):
        m = self.machine(gpus=1)
        foreign = "---\ncdiVersion: 0.5.0\nkind: nvidia.com/imex-channel\ndevices: []\n"
        write(m.p(IMEX_SPEC), foreign)
        self.setup_ok(m)
        self.assertEqual(self.read(m, IMEX_SPEC), foreign)

    def test_strange_entries_are_not_channels(self):
        m = self.machine(gpus=1, imex=[0])
        write(m.p("/dev/nvidia-caps-imex-channels/channel1"), "")                         # a file
        make_chardev(m.p("/dev/nvidia-caps-imex-channels/channel2"), MachineRoot.IMEX_MAJOR, 7)  # another minor
        make_chardev(m.p("/dev/nvidia-caps-imex-channels/channel3"), 195, 3)             # another major
        make_chardev(m.p("/dev/nvidia-caps-imex-channels/channel01"), MachineRoot.IMEX_MAJOR, 1)
        make_chardev(m.p(f"/dev/nvidia-caps-imex-channels/channel{1 << 20}"), MachineRoot.IMEX_MAJOR, 0)
        r = self.setup_ok(m)
        self.assertEqual(names(self.read(m, IMEX_SPEC)), ["0", "all"])
        for n in ("channel1: not a character device", "channel2: it is 237:7", "channel3: it is 195:3",
                  "channel01: not an IMEX channel name", "channel1048576: not an IMEX channel name"):
            self.assertIn(n, r.stderr)

    def test_cleanup_removes_the_imex_spec_too(self):
        m = self.machine(gpus=1, imex=[0])
        self.setup_ok(m)
        r = m.run("--json", "cleanup")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(json.loads(r.stdout)["imex_cdi_spec_removed"])
        self.assertFalse(os.path.exists(m.p(IMEX_SPEC)))


class TestImexBinaries(MigCase):
    """Issue 45, item 3: the DRA driver's ComputeDomain daemons run nvidia-imex and nvidia-imex-ctl from the
    driver root. Staged beside the other helpers, they are copied like them and mounted, and verify holds
    the copies to their sources."""

    def test_imex_daemon_and_its_control_are_copied_mounted_and_verified(self):
        m = self.machine(gpus=1, imex=range(2))
        staged = m.p("/run/host-nvidia/1")
        for name in ("nvidia-imex", "nvidia-imex-ctl"):
            shutil.copy(os.path.join(staged, "nvidia-smi"), os.path.join(staged, name))
        self.setup_ok(m)
        for name in ("nvidia-imex", "nvidia-imex-ctl"):
            copy = os.path.join(m.driver_root(), "bin", name)
            self.assertTrue(os.path.isfile(copy) and not os.path.islink(copy), name)
            self.assertEqual(os.stat(copy).st_mode & 0o7777, 0o755)
        with open(m.p(SPEC)) as f:
            spec = f.read()
        self.assertIn("containerPath: /bin/nvidia-imex\n", spec)
        self.assertIn("containerPath: /bin/nvidia-imex-ctl\n", spec)
        self.assertEqual(m.run("verify").returncode, 0)
        os.chmod(os.path.join(m.driver_root(), "bin", "nvidia-imex"), 0o4755)
        r = m.run("--json", "verify")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("bin/nvidia-imex", r.stdout)


class TestVerifyMigImex(MigCase):
    def verify(self, m):
        r = m.run("--json", "verify")
        r.result = json.loads(r.stdout)
        return r

    def assertNotReady(self, m, needle):
        r = self.verify(m)
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(needle, "\n".join(p["message"] for p in r.result["problems"]))

    def ready(self):
        m = self.machine(gpus=2, mig={0: {7: [0], 8: [0]}}, imex=[0, 1])
        self.setup_ok(m)
        r = self.verify(m)
        self.assertEqual(r.returncode, 0, r.stdout)
        return m

    def test_a_mig_access_node_with_another_minor(self):
        m = self.ready()
        minor = MachineRoot.cap_minor(0, 8, 0)
        make_chardev(m.p(f"/dev/nvidia-caps/nvidia-cap{minor}"), MachineRoot.CAPS_MAJOR, minor + 1, 0o444)
        self.assertNotReady(m, f"device node /dev/nvidia-caps/nvidia-cap{minor} is {MachineRoot.CAPS_MAJOR}:{minor + 1}, "
                               f"the spec says {MachineRoot.CAPS_MAJOR}:{minor}")

    def test_a_mig_access_node_gone(self):
        m = self.ready()
        minor = MachineRoot.cap_minor(0, 7)
        os.unlink(m.p(f"/dev/nvidia-caps/nvidia-cap{minor}"))
        self.assertNotReady(m, f"has no character device /dev/nvidia-caps/nvidia-cap{minor}")

    def test_an_imex_channel_with_another_minor(self):
        m = self.ready()
        make_chardev(m.p("/dev/nvidia-caps-imex-channels/channel1"), MachineRoot.IMEX_MAJOR, 0)
        self.assertNotReady(m, f"{IMEX_SPEC} is stale")

    def test_the_imex_spec_missing(self):
        m = self.ready()
        os.unlink(m.p(IMEX_SPEC))
        self.assertNotReady(m, f"CDI spec {IMEX_SPEC} is unreadable")

    def test_the_imex_spec_edited(self):
        m = self.ready()
        text = self.read(m, IMEX_SPEC).replace("channel1", "channel9")
        write(m.p(IMEX_SPEC), text)
        r = self.verify(m)
        self.assertEqual(r.returncode, 1)
        messages = "\n".join(p["message"] for p in r.result["problems"])
        self.assertIn("device node /dev/nvidia-caps-imex-channels/channel9 does not exist", messages)
        self.assertIn(f"{IMEX_SPEC} is stale", messages)

    def test_channels_gone_but_the_spec_still_offers_them(self):
        m = self.ready()
        shutil.rmtree(m.p("/dev/nvidia-caps-imex-channels"))
        self.assertNotReady(m, f"{IMEX_SPEC} is stale: it offers IMEX channels but the machine has none")


@unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare for a private mount")
class TestSpecsChangeTogether(MigCase):
    """Issue 26, item 1: a refresh from V1 to V2 whose IMEX spec cannot be written (or removed) must not
    leave /etc/cdi/nvidia.yaml naming V2 while the driver root went back to V1. Invariant: after any
    failed run, every hostPath of every spec we wrote exists."""

    def stage_v2(self, m):
        b = MachineRoot(self)
        b.stage_all(V2)
        shutil.move(b.p("/run/host-nvidia"), m.p("/run/host-nvidia-b"))
        write(m.p("/etc/unbounded/b.yaml"), "staging: /run/host-nvidia-b\n")
        m.set_proc_version(V2)

    def run_private(self, m, prepare):
        """Runs a setup of V2 in a private mount namespace after `prepare` (shell) changed /etc/cdi there;
        returns (exit status, stderr, {spec name: text after the run})."""
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, True)
        spec_dir = m.p("/etc/cdi")
        script = f"""
            set -u
            mkdir "{out}/saved" && cp -a "{spec_dir}/." "{out}/saved/"
            {prepare.format(spec_dir=spec_dir, saved=out + "/saved")}
            "{SETUP}" --root "{m.path}" --config "{m.p('/etc/unbounded/b.yaml')}" setup 2>"{out}/err"
            echo $? > "{out}/rc"
            mkdir "{out}/after" && cp -a "{spec_dir}/." "{out}/after/"
        """
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script], capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)
        after = {n: open(os.path.join(out, "after", n)).read() for n in os.listdir(os.path.join(out, "after"))
                 if n.endswith(".yaml")}
        return int(open(f"{out}/rc").read()), open(f"{out}/err").read(), after

    def assertHostPathsExist(self, m, specs):
        import yaml
        for name, text in specs.items():
            doc = yaml.safe_load(text)
            edits = [doc.get("containerEdits") or {}] + [d.get("containerEdits") or {} for d in doc.get("devices") or []]
            for e in edits:
                for mount in e.get("mounts") or []:
                    self.assertTrue(os.path.lexists(m.p(mount["hostPath"])), f"{name}: {mount['hostPath']} is gone")

    def test_an_imex_spec_that_does_not_fit_leaves_both_specs_and_the_root_as_they_were(self):
        m = self.machine(gpus=1, imex=[0, 1])
        self.setup_ok(m)
        before_specs = {n: self.read(m, "/etc/cdi/" + n) for n in ("nvidia.yaml", "nvidia-imex-channel.yaml")}
        self.stage_v2(m)
        m.add_imex_channels(range(2048))
        before = snapshot(m.driver_root())
        # Room for the new nvidia.yaml beside the old files, not for a 2,048-channel IMEX spec.
        room = sum(len(t) for t in before_specs.values()) + 2 * len(before_specs["nvidia.yaml"]) + 32768
        rc, err, after = self.run_private(m, f"""
            mount -t tmpfs -o size={room} tmpfs "{{spec_dir}}" || exit 90
            cp -a "{{saved}}/." "{{spec_dir}}/"
        """)
        self.assertEqual(rc, 1, err)
        self.assertIn("No space left on device", err)
        self.assertIn("previous driver root was put back", err)
        self.assertEqual(after, before_specs)
        self.assertEqual(snapshot(m.driver_root()), before)
        self.assertHostPathsExist(m, after)

    def test_an_imex_spec_that_cannot_be_removed_leaves_both_specs_and_the_root_as_they_were(self):
        m = self.machine(gpus=1, imex=[0])
        self.setup_ok(m)
        before_specs = {n: self.read(m, "/etc/cdi/" + n) for n in ("nvidia.yaml", "nvidia-imex-channel.yaml")}
        self.stage_v2(m)
        shutil.rmtree(m.p("/dev/nvidia-caps-imex-channels"))
        before = snapshot(m.driver_root())
        # A file that is a mount point cannot be unlinked (EBUSY).
        rc, err, after = self.run_private(m, """
            mount --bind "{spec_dir}/nvidia-imex-channel.yaml" "{spec_dir}/nvidia-imex-channel.yaml" || exit 90
        """)
        self.assertEqual(rc, 1, err)
        self.assertIn("Device or resource busy", err)
        self.assertIn("previous driver root was put back", err)
        self.assertEqual(after, before_specs)
        self.assertEqual(snapshot(m.driver_root()), before)
        self.assertHostPathsExist(m, after)



class TestKillBeforeEverySyscallOfATwoSpecRefresh(MigCase):
    """Issue 26: SIGKILL before every state-changing system call of a refresh from V1 (2 IMEX channels)
    to V2 (4 channels), which replaces the root and writes both specs. After each kill the root is one
    whole version, each spec one whole file of either run, and the next run converges. Under qemu-user
    (make check-arm64) the calls stopped are the emulator's host calls for the binary's: the same
    guarantee, one level down."""

    CALLS = ("renameat", "renameat2", "unlinkat", "mkdirat", "symlinkat", "linkat", "fchmod", "fchown")

    def test_sigkill_before_each_call(self):
        self.assertIsNotNone(shutil.which("strace"), "strace is required (Debian package strace): make check installs it")
        m = MachineRoot(self)
        for name, version in (("a", V1), ("b", V2)):
            t = MachineRoot(self)
            t.stage_all(version)
            shutil.move(t.p("/run/host-nvidia"), m.p(f"/run/host-nvidia-{name}"))
            write(m.p(f"/etc/unbounded/{name}.yaml"), f"staging: /run/host-nvidia-{name}\nrefresh:\n  settle_time: 0s\n")
        m.add_control_nodes()
        m.add_gpu(0, "0000:18:00.0", "GPU-00000000-1111-2222-3333-444455556666")

        def start_v1():
            shutil.rmtree(m.p("/dev/nvidia-caps-imex-channels"), ignore_errors=True)
            m.add_imex_channels([0, 1])
            m.set_proc_version(V1)
            r = m.run("--config", m.p("/etc/unbounded/a.yaml"), "setup")
            self.assertEqual(r.returncode, 0, r.stderr)

        def to_v2():
            m.add_imex_channels([2, 3])
            m.set_proc_version(V2)
            return [SETUP, "--root", m.path, "--config", m.p("/etc/unbounded/b.yaml"), "refresh"]

        def state():
            return (snapshot(m.driver_root()), self.read(m, SPEC), self.read(m, IMEX_SPEC))

        start_v1()
        a = state()
        r = subprocess.run(to_v2(), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        b = state()
        self.assertTrue(all(x != y for x, y in zip(a, b)), "V1 and V2 must differ in the root and both specs")

        # LeakSanitizer cannot run under ptrace (the sanitizer tier): the runs strace follows go without it.
        traced_env = dict(os.environ)
        if "ASAN_OPTIONS" in traced_env:
            traced_env["ASAN_OPTIONS"] = traced_env["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")

        # How often the refresh makes each call: one trial per call.
        start_v1()
        counts_file = os.path.join(m.path, "strace-counts")
        subprocess.run(["strace", "-f", "-c", "-U", "name,calls", "-o", counts_file, "-e", "trace=" + ",".join(self.CALLS)] + to_v2(),
                       capture_output=True, text=True, check=True, env=traced_env)
        counts = {}
        for line in open(counts_file).read().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in self.CALLS and parts[1].isdigit():
                counts[parts[0]] = int(parts[1])
        self.assertGreater(sum(counts.values()), 5, open(counts_file).read())

        trials = 0
        for call, n in counts.items():
            for when in range(1, n + 1):
                start_v1()
                p = subprocess.run(["strace", "-f", "-o", "/dev/null", "-e", "trace=" + call,
                                    "-e", f"inject={call}:signal=SIGKILL:when={when}"] + to_v2(), capture_output=True, text=True,
                                   env=traced_env)
                what = f"SIGKILL before {call} #{when}"
                if p.returncode == 0:  # fewer calls this time (sweeps depend on what earlier kills left): done
                    self.assertEqual(state(), b, f"{what}: the run that was not stopped did not finish the change")
                    break
                self.assertIn(p.returncode, (-9, 137), f"{what}: {p.returncode} {p.stderr[-300:]}")
                root, spec, imex = state()
                self.assertIn(root, (a[0], b[0]), f"{what}: the driver root is neither whole version")
                self.assertIn(spec, (a[1], b[1]), f"{what}: {SPEC} is neither whole spec")
                self.assertIn(imex, (a[2], b[2]), f"{what}: {IMEX_SPEC} is neither whole spec")
                r = subprocess.run(to_v2(), capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, f"{what}: the next run failed: {r.stderr}")
                self.assertEqual(state(), b, f"{what}: the next run did not converge")
                trials += 1
        self.assertEqual(sorted(os.listdir(m.p("/etc/cdi"))), ["nvidia-imex-channel.yaml", "nvidia.yaml"])
        self.assertEqual(sorted(os.listdir(m.p("/run/nvidia"))), ["driver"])
        print(f"# {trials} kills, before each of {counts}")


if __name__ == "__main__":
    main()
