#!/usr/bin/env python3
"""Issue 25, item 6: /dev/char/<major>:<minor> links for every node of every spec we write, which
runc's systemd cgroup driver needs to keep a container's device rules across a daemon-reload (the
system tier shows what the booted machine does with them)."""

import os
import stat

from unbounded_tests.cdi_case import CdiCase
from unbounded_tests.harness import MachineRoot, main, make_chardev, write

SEVEN_1G = {gi: [0] for gi in range(7, 14)}


def links(m):
    d = m.p("/dev/char")
    return {n: os.readlink(os.path.join(d, n)) for n in sorted(os.listdir(d)) if os.path.islink(os.path.join(d, n))}


class TestDevCharLinks(CdiCase):
    def machine(self):
        m = MachineRoot(self).standard(gpus=2)
        for i, bus in enumerate(("0000:18:00.0", "0000:19:00.0")):
            os.makedirs(m.p(f"/sys/bus/pci/devices/{bus}/drm/card{i + 1}"))
            make_chardev(m.p(f"/dev/dri/card{i + 1}"), 226, i + 1)
        m.add_mig(1, {7: [0]})
        m.add_imex_channels([0, 3])
        m.add_fabric(nvswitches=[0], gdrcopy=True)
        return m


    def test_every_node_of_every_spec_gets_its_link(self):
        m = self.machine()
        r = self.setup_ok(m)
        got = links(m)
        ci, gi = MachineRoot.cap_minor(1, 7, 0), MachineRoot.cap_minor(1, 7)
        expected = {
            "195:0": "../nvidia0", "195:1": "../nvidia1", "195:254": "../nvidia-modeset", "195:255": "../nvidiactl",
            "509:0": "../nvidia-uvm", "509:1": "../nvidia-uvm-tools", "226:1": "../dri/card1", "226:2": "../dri/card2",
            f"{MachineRoot.CAPS_MAJOR}:{gi}": f"../nvidia-caps/nvidia-cap{gi}",
            f"{MachineRoot.CAPS_MAJOR}:{ci}": f"../nvidia-caps/nvidia-cap{ci}",
            f"{MachineRoot.IMEX_MAJOR}:0": "../nvidia-caps-imex-channels/channel0",
            f"{MachineRoot.IMEX_MAJOR}:3": "../nvidia-caps-imex-channels/channel3",
            f"{MachineRoot.NVSWITCH_MAJOR}:0": "../nvidia-nvswitch0", f"{MachineRoot.NVSWITCH_MAJOR}:255": "../nvidia-nvswitchctl",
            f"{MachineRoot.GDRDRV_MAJOR}:0": "../gdrdrv",
        }
        self.assertEqual(got, expected)
        for name in expected:  # each leads to its node, by number
            st = os.stat(os.path.join(m.p("/dev/char"), name))
            self.assertTrue(stat.S_ISCHR(st.st_mode))
            self.assertEqual(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}", name)
        self.assertEqual(r.result["dev_char_links_created"], len(expected))
        # Idempotent: the next run makes none and finds them all.
        r = self.setup_ok(m)
        self.assertEqual((r.result["dev_char_links_created"], r.result["dev_char_links_present"]), (0, len(expected)))
        self.assertEqual(links(m), expected)

    def test_an_entry_it_did_not_create_is_never_replaced(self):
        m = MachineRoot(self).standard(gpus=2)
        write(m.p("/dev/char/195:0"), "not a link\n")
        os.symlink("../something-else", m.p("/dev/char/195:1"))
        os.symlink("../null", m.p("/dev/char/195:255"))
        r = self.setup_ok(m)
        self.assertEqual(open(m.p("/dev/char/195:0")).read(), "not a link\n")
        self.assertEqual(os.readlink(m.p("/dev/char/195:1")), "../something-else")
        self.assertEqual(os.readlink(m.p("/dev/char/195:255")), "../null")
        for name, node in (("195:0", "/dev/nvidia0"), ("195:1", "/dev/nvidia1"), ("195:255", "/dev/nvidiactl")):
            self.assertIn(f"Leaving /dev/char/{name} alone: it was not made for an NVIDIA node and does not lead to {node}", r.stderr)
        self.assertEqual(os.readlink(m.p("/dev/char/509:0")), "../nvidia-uvm")  # the others are made

    def test_a_link_of_ours_that_leads_elsewhere_is_corrected(self):
        """A GPU renumbered, or a link left by a machine with other GPUs: ours in form, leading to a
        node of another number or to none."""
        m = MachineRoot(self).standard(gpus=2)
        os.makedirs(m.p("/dev/char"))
        os.symlink("../nvidia1", m.p("/dev/char/195:0"))   # leads to 195:1
        os.symlink("../nvidia7", m.p("/dev/char/195:1"))   # leads nowhere
        r = self.setup_ok(m)
        self.assertEqual(os.readlink(m.p("/dev/char/195:0")), "../nvidia0")
        self.assertEqual(os.readlink(m.p("/dev/char/195:1")), "../nvidia1")
        self.assertNotIn("Leaving", r.stderr)
        self.assertEqual([n for n in os.listdir(m.p("/dev/char")) if n.startswith(".")], [])  # no temp left

    def test_a_dev_that_cannot_take_them_still_gets_its_specs(self):
        m = MachineRoot(self).standard(gpus=1)
        write(m.p("/dev/char"), "")  # a file where the directory should be
        r = self.setup_ok(m)
        self.assertIn("/dev/char", r.stderr)
        self.assertTrue(os.path.exists(m.p("/etc/cdi/nvidia.yaml")))
        os.unlink(m.p("/dev/char"))
        os.symlink("/tmp", m.p("/dev/char"))  # never followed
        r = self.setup_ok(m)
        self.assertIn("no /dev/char links made", r.stderr)
        self.assertFalse(any(n.startswith("195:") for n in os.listdir("/tmp")))


if __name__ == "__main__":
    main()
