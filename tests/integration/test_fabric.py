#!/usr/bin/env python3
"""Issue 25, item 5: the fabric and peer devices (NVSwitch, GDRCopy, GPUDirect Storage), each in a spec
of its own as nvidia-ctk's gated modes write them, written only while its nodes exist, removed like the
IMEX spec, checked by `verify`."""

import json
import os
import shutil

from unbounded_tests.cdi_case import SPEC, CdiCase
from unbounded_tests.harness import MachineRoot, main, make_chardev, write

NVSWITCH_SPEC = "/etc/cdi/nvidia-nvswitch.yaml"
GDRCOPY_SPEC = "/etc/cdi/nvidia-gdrcopy.yaml"
GDS_SPEC = "/etc/cdi/nvidia-gds.yaml"
FABRIC_SPECS = (NVSWITCH_SPEC, GDRCOPY_SPEC, GDS_SPEC)


class FabricCase(CdiCase):
    def hgx(self):
        """An HGX node: 8 GPUs, 4 NVSwitches, GDRCopy, GDS with its config and udev's database."""
        m = MachineRoot(self).standard(gpus=8)
        m.add_fabric(nvswitches=range(4), gdrcopy=True, gds=range(2))
        write(m.p("/etc/cufile.json"), '{ "logging": { "level": "ERROR" } }\n')
        os.makedirs(m.p("/run/udev/data"))
        return m


    def verify(self, m):
        r = m.run("--json", "verify")
        r.result = json.loads(r.stdout)
        return r


class TestFabricSpecs(FabricCase):
    def test_each_class_gets_the_spec_nvidia_ctk_writes_for_its_mode(self):
        m = self.hgx()
        r = self.setup_ok(m)
        for path, golden, kind in ((NVSWITCH_SPEC, "nvswitch-4.yaml", "nvidia.com/nvswitch"),
                                   (GDRCOPY_SPEC, "gdrcopy.yaml", "nvidia.com/gdrcopy"),
                                   (GDS_SPEC, "gds-2.yaml", "nvidia.com/gds")):
            spec = self.read(m, path)
            self.assertSchemaValid(spec)
            self.assertGolden(golden, spec)
            self.assertIn(f"kind: {kind}\n", spec)
            self.assertIn("  - name: all\n", spec)
            self.assertEqual(spec.count("  - name: "), 1, spec)  # one device, "all", as the gated modes
            self.assertIn("cdiVersion: 0.3.0\n", spec)         # nothing in it needs more
            self.assertEqual(os.stat(m.p(path)).st_mode & 0o777, 0o644)
            self.assertTrue(r.result[os.path.basename(path).replace("nvidia-", "").replace(".yaml", "") + "_cdi_spec_written"])
        gds = self.read(m, GDS_SPEC)
        for p in ("/etc/cufile.json", "/run/udev"):
            self.assertIn(f"hostPath: {p}\n", gds)
        # The GPU spec does not change: fabric nodes are asked for by their own names.
        main_spec = self.read(m, SPEC)
        for n in ("nvswitch", "gdrdrv", "nvidia-fs", "cufile"):
            self.assertNotIn(n, main_spec)
        self.assertIn("(and nvidia.com/nvswitch, nvidia.com/gdrcopy, nvidia.com/gds)", r.stderr)
        v = self.verify(m)
        self.assertEqual(v.returncode, 0, v.stdout)

    def test_a_spec_exists_exactly_while_its_nodes_do(self):
        m = MachineRoot(self).standard(gpus=1)
        self.setup_ok(m)
        for p in FABRIC_SPECS:
            self.assertFalse(os.path.exists(m.p(p)), p)
        m.add_fabric(gdrcopy=True)
        self.setup_ok(m)
        self.assertTrue(os.path.exists(m.p(GDRCOPY_SPEC)))
        self.assertFalse(os.path.exists(m.p(NVSWITCH_SPEC)))
        m.add_fabric(nvswitches=[0])
        self.setup_ok(m)
        self.assertIn("/dev/nvidia-nvswitchctl", self.read(m, NVSWITCH_SPEC))
        os.unlink(m.p("/dev/gdrdrv"))
        r = self.setup_ok(m)
        self.assertFalse(os.path.exists(m.p(GDRCOPY_SPEC)))
        self.assertIn(f"Removed {GDRCOPY_SPEC}: the machine has no GDRCopy node any more", r.stderr)
        self.assertTrue(os.path.exists(m.p(NVSWITCH_SPEC)))

    def test_gds_mounts_only_what_is_there_and_is_what_it_should_be(self):
        m = MachineRoot(self).standard(gpus=1)
        m.add_fabric(gds=[0])
        self.setup_ok(m)
        spec = self.read(m, GDS_SPEC)
        self.assertNotIn("mounts:", spec)  # neither file is there
        os.symlink("/somewhere/cufile.json", m.p("/etc/cufile.json"))
        write(m.p("/run/udev"), "")
        r = self.setup_ok(m)
        self.assertNotIn("mounts:", self.read(m, GDS_SPEC))
        self.assertIn("Not mounting /etc/cufile.json for GPUDirect Storage: it is a symlink, not a regular file", r.stderr)
        self.assertIn("Not mounting /run/udev for GPUDirect Storage", r.stderr)

    def test_nodes_that_are_not_what_their_name_says_are_left_out(self):
        m = MachineRoot(self).standard(gpus=1)
        m.add_fabric(nvswitches=[0], gds=[0])
        make_chardev(m.p("/dev/gdrdrv"), 1, 1)                                   # /dev/mem by another name
        make_chardev(m.p("/dev/nvidia-nvswitch1"), MachineRoot.NVSWITCH_MAJOR, 2)  # another minor
        make_chardev(m.p("/dev/nvidia-fs01"), MachineRoot.NVIDIA_FS_MAJOR, 1)      # not the driver's name
        write(m.p("/dev/nvidia-fs1"), "")                                         # a file
        make_chardev(m.p("/dev/nvidia-nvswitch255"), MachineRoot.NVSWITCH_MAJOR, 255)  # ctl's minor, not a switch
        r = self.setup_ok(m)
        self.assertFalse(os.path.exists(m.p(GDRCOPY_SPEC)))
        self.assertIn("Ignoring /dev/gdrdrv: it is 1:1, expected 235:0", r.stderr)
        self.assertIn("Ignoring /dev/nvidia-nvswitch1: it is 236:2, expected 236:1", r.stderr)
        self.assertIn("Ignoring /dev/nvidia-fs1: not a character device", r.stderr)
        nvswitch = self.read(m, NVSWITCH_SPEC)
        self.assertIn("path: /dev/nvidia-nvswitch0\n", nvswitch)
        self.assertNotIn("nvidia-nvswitch1", nvswitch)
        self.assertNotIn("nvidia-nvswitch255", nvswitch)
        self.assertNotIn("nvidia-fs01", self.read(m, GDS_SPEC))

    def test_without_the_drivers_major_nothing_is_offered(self):
        m = MachineRoot(self).standard(gpus=1)
        m.add_fabric(gdrcopy=True)
        m.write_proc_devices(fabric=False)
        r = self.setup_ok(m)
        self.assertFalse(os.path.exists(m.p(GDRCOPY_SPEC)))
        self.assertIn("GDRCopy devices are not offered: /proc/devices has no gdrdrv major", r.stderr)

    def test_a_spec_someone_else_wrote_is_left_alone(self):
        m = MachineRoot(self).standard(gpus=1)
        foreign = "---\ncdiVersion: 0.3.0\nkind: nvidia.com/gds\ndevices: []\n"
        write(m.p(GDS_SPEC), foreign)
        self.setup_ok(m)
        self.assertEqual(self.read(m, GDS_SPEC), foreign)
        self.assertEqual(self.verify(m).returncode, 0)

    def test_cleanup_removes_them(self):
        m = self.hgx()
        self.setup_ok(m)
        r = m.run("--json", "cleanup")
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout)
        for key in ("nvswitch_cdi_spec_removed", "gdrcopy_cdi_spec_removed", "gds_cdi_spec_removed"):
            self.assertTrue(result[key], key)
        for p in FABRIC_SPECS:
            self.assertFalse(os.path.exists(m.p(p)), p)

    def test_two_keys_naming_one_file_are_refused(self):
        m = MachineRoot(self).standard(gpus=1)
        m.config("gds_cdi_spec: /etc/cdi/nvidia-imex-channel.yaml\n")
        r = m.setup()
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("imex_cdi_spec and gds_cdi_spec name the same file", r.stderr)

    def test_the_specs_can_be_moved(self):
        m = MachineRoot(self).standard(gpus=1)
        m.add_fabric(gdrcopy=True)
        m.config("gdrcopy_cdi_spec: /var/run/cdi/gdrcopy.yaml\n")
        self.setup_ok(m)
        self.assertIn("kind: nvidia.com/gdrcopy", self.read(m, "/var/run/cdi/gdrcopy.yaml"))
        self.assertFalse(os.path.exists(m.p(GDRCOPY_SPEC)))


class TestVerifyFabric(FabricCase):
    def ready(self):
        m = self.hgx()
        self.setup_ok(m)
        self.assertEqual(self.verify(m).returncode, 0)
        return m

    def problems(self, m):
        r = self.verify(m)
        self.assertEqual(r.returncode, 1, r.stdout)
        return "\n".join(p["message"] for p in r.result["problems"])

    def test_nodes_gone_but_the_spec_still_offers_them(self):
        m = self.ready()
        os.unlink(m.p("/dev/gdrdrv"))
        self.assertIn(f"{GDRCOPY_SPEC} is stale: it offers GDRCopy node but the machine has none", self.problems(m))

    def test_a_switch_gone(self):
        m = self.ready()
        os.unlink(m.p("/dev/nvidia-nvswitch3"))
        self.assertIn(f"{NVSWITCH_SPEC} is stale", self.problems(m))

    def test_the_spec_edited(self):
        m = self.ready()
        with open(m.p(GDS_SPEC), "a") as f:
            f.write("# edited\n")
        self.assertIn(f"{GDS_SPEC} is stale", self.problems(m))

    def test_the_spec_removed(self):
        m = self.ready()
        os.unlink(m.p(NVSWITCH_SPEC))
        self.assertIn(f"CDI spec {NVSWITCH_SPEC} is unreadable", self.problems(m))

    def test_a_gds_mount_gone(self):
        m = self.ready()
        shutil.rmtree(m.p("/run/udev"))
        self.assertIn(f"{GDS_SPEC} is stale", self.problems(m))


if __name__ == "__main__":
    main()
