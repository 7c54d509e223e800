#!/usr/bin/env python3
"""Builds the Debian packages as a Debian buildd does: from a copy of the source tree, in a minimal
bookworm chroot (debootstrap --variant=buildd, cached) with only its Build-Depends installed by
`apt-get build-dep`, as an unprivileged user, its unit tier run (tests/package/chroot-build.sh): a
Build-Depends missing from debian/control fails the build here. Then checks each .deb's file list
(PACKAGE.files) and dependencies, runs lintian (failing on any error or warning), installs, removes
and purges the machine's package in the system tier's image, installs it on a host-shaped root
(nothing generated there), and the host's package alone."""

import os
import shlex
import shutil
import subprocess
import tempfile
import unittest

from unbounded_tests.harness import V1, MachineRoot, main, make_chardev
from unbounded_tests.image import PACKAGE_CACHE
from unbounded_tests.package_build import build_once

SOURCE = os.environ["SOURCE_ROOT"]
HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = ("unbounded-nvidia-setup", "unbounded-nvidia-host")
# The last build's whole output, for a failure whose cause is further up than the test shows.
BUILD_LOG = os.path.join(PACKAGE_CACHE, "build.log")


class TestPackage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="unbounded-deb-")
        # Taken from the build CI made ahead (unbounded_tests.package_build), or built here.
        result, work, taken = build_once(os.environ.get("UNBOUNDED_PACKAGE_AHEAD") or os.path.join(cls.tmp, "build"))
        cls.build = subprocess.CompletedProcess([], result["returncode"], result["log"], "")
        with open(BUILD_LOG, "w") as f:
            f.write(result["log"])
        print(f"# {result['message']}{', built ahead' if taken else ''}; log {BUILD_LOG}", flush=True)
        arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
        version = subprocess.run(["dpkg-parsechangelog", "-l", os.path.join(SOURCE, "debian/changelog"), "-S", "Version"],
                                 capture_output=True, text=True).stdout.strip()
        cls.debs = {p: os.path.join(work, f"{p}_{version}_{arch}.deb") for p in PACKAGES}
        cls.deb = cls.debs["unbounded-nvidia-setup"]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_builds(self):
        out = self.build.stdout + (self.build.stderr or "")
        # The first lines that say what went wrong (apt's, meson's, a failed test's with the comment
        # lines after it that give its reason), then the end.
        marks = ("E: ", "ERROR", "error:", "not ok ", "FAIL", "Unmet build dependencies", "chroot-build: ")
        first, reason = [], False
        for line in out.splitlines():
            reason = ("not ok " in line) or (reason and line.startswith("#"))
            if reason or any(m in line for m in marks):
                first.append(line)
        first = first[:40]
        self.assertEqual(self.build.returncode, 0, "\n".join(first) + "\n...\n" + out[-3000:])
        for deb in self.debs.values():
            self.assertTrue(os.path.exists(deb), deb)

    def test_file_lists(self):
        """Two packages: the machine's (generator, units, setup, reloader) and the host's tool."""
        self.assertEqual(self.build.returncode, 0, "package did not build")
        for package, deb in self.debs.items():
            r = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True)
            files = sorted(line.split()[5].lstrip(".") for line in r.stdout.splitlines() if not line.startswith("d"))
            with open(os.path.join(HERE, f"{package}.files")) as f:
                expected = sorted(l.strip() for l in f if l.strip())
            self.assertEqual(files, expected, package)

    def test_dependencies(self):
        self.assertEqual(self.build.returncode, 0, "package did not build")
        for package, libs in (("unbounded-nvidia-setup", ("libc6", "libmount1", "libsystemd0", "systemd")),
                              ("unbounded-nvidia-host", ("libc6", "libmount1"))):
            depends = subprocess.run(["dpkg-deb", "-f", self.debs[package], "Depends"], capture_output=True, text=True,
                                     check=True).stdout
            for lib in libs:
                self.assertIn(lib, depends, package)
        host = subprocess.run(["dpkg-deb", "-f", self.debs["unbounded-nvidia-host"], "Depends"], capture_output=True, text=True).stdout
        self.assertNotIn("unbounded-nvidia-setup", host)

    def test_lintian_reports_no_error_or_warning(self):
        self.assertEqual(self.build.returncode, 0, "package did not build")
        self.assertIsNotNone(shutil.which("lintian"), "lintian is required (Debian package lintian)")
        r = subprocess.run(["lintian", "--tag-display-limit", "0", *self.debs.values()], capture_output=True, text=True)
        bad = [l for l in (r.stdout + r.stderr).splitlines() if l.startswith(("E:", "W:"))]
        self.assertEqual(bad, [])

    def image(self, name):
        from unbounded_tests.image import base_image
        image = os.path.join(self.tmp, name)
        subprocess.run(["cp", "-a", "--reflink=auto", base_image(), image], check=True)
        self.addCleanup(shutil.rmtree, image, True)
        return image

    def test_the_machine_package_on_a_gpu_host_generates_nothing(self):
        """Installed on a host (a root shaped like a GPU host: /dev/nvidiactl, staging-like directories,
        no container signal), the generator writes nothing; the same root as PID 1 of an nspawn machine
        sees it gets the setup unit (so the first half can fail)."""
        self.assertEqual(self.build.returncode, 0, "package did not build")
        image = self.image("host-root")
        self.nspawn(image, "dpkg", "-i", "/run/pkg.deb", binds=[f"--bind-ro={self.deb}:/run/pkg.deb"])
        make_chardev(os.path.join(image, "dev/nvidiactl"), 195, 255)
        os.makedirs(os.path.join(image, "run/host-nvidia/0"), exist_ok=True)
        generator = "/lib/systemd/system-generators/unbounded-nvidia-generator"
        for env, generates in ((["SYSTEMD_VIRTUALIZATION=vm:kvm"], False), ([], False),
                               (["SYSTEMD_VIRTUALIZATION=container:systemd-nspawn"], True)):
            out = os.path.join(image, "tmp/gen")
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            r = subprocess.run(["chroot", image, "env", "-i", "PATH=/usr/bin:/bin", *env, generator, "/tmp/gen", "/tmp/gen", "/tmp/gen"],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual("unbounded-nvidia-setup.service" in os.listdir(out), generates, (env, os.listdir(out)))
            if not generates:
                self.assertEqual(os.listdir(out), [], env)

    def test_the_host_package_installs_alone(self):
        self.assertEqual(self.build.returncode, 0, "package did not build")
        image = self.image("host-tool")
        deb = self.debs["unbounded-nvidia-host"]
        self.nspawn(image, "dpkg", "-i", "/run/pkg.deb", binds=[f"--bind-ro={deb}:/run/pkg.deb"])
        r = self.nspawn(image, "unbounded-nvidia-host", "--version")
        self.assertRegex(r.stdout, r"^unbounded-nvidia-host \S+ \(commit \S+\)$")
        self.assertFalse(os.path.exists(os.path.join(image, "lib/systemd/system-generators/unbounded-nvidia-generator")))
        self.nspawn(image, "dpkg", "--purge", "unbounded-nvidia-host")
        self.assertFalse(os.path.exists(os.path.join(image, "usr/bin/unbounded-nvidia-host")))

    def nspawn(self, image, *args, binds=()):
        """Runs a command in the image (not booted), in a private mount namespace with a tmpfs /run."""
        cmd = ["systemd-nspawn", "--register=no", "--keep-unit", "--quiet", "--pipe", "-D", image, *binds, "--", *args]
        shell = "mount -t tmpfs tmpfs /run && exec " + " ".join(shlex.quote(a) for a in cmd)
        r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", shell],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, f"{' '.join(args)}:\n{r.stdout}{r.stderr}")
        return r

    def next_build(self):
        """The machine's package as the next release's would differ: another version, and binaries
        whose bytes differ (a marker appended; an ELF file runs as before)."""
        work = os.path.join(self.tmp, "next-build")
        subprocess.run(["dpkg-deb", "-R", self.deb, work], check=True)
        for binary in ("usr/bin/unbounded-nvidia-setup", "usr/libexec/unbounded-nvidia/unbounded-nvidia-license-reload"):
            with open(os.path.join(work, binary), "ab") as f:
                f.write(b"\0unbounded-nvidia next build\0")
        control = os.path.join(work, "DEBIAN/control")
        with open(control) as f:
            text = f.read()
        version = next(l.split(": ", 1)[1] for l in text.splitlines() if l.startswith("Version: "))
        with open(control, "w") as f:
            f.write(text.replace(f"Version: {version}\n", f"Version: {version}+next1\n"))
        os.remove(os.path.join(work, "DEBIAN/md5sums"))  # stale now; dpkg does not need it
        deb = os.path.join(self.tmp, "next.deb")
        subprocess.run(["dpkg-deb", "--root-owner-group", "-b", work, deb], check=True, capture_output=True)
        return deb, version + "+next1"

    def test_upgrade_downgrade_and_purge_on_a_booted_machine(self):
        """dpkg on a running GPU machine: containerd is never touched and setup never run again; the
        next refresh runs the binary just installed and is ready; the previous version installs back
        over it (a rollback) the same way; a purge removes our spec and state with containerd running."""
        self.assertEqual(self.build.returncode, 0, "package did not build")
        from unbounded_tests.machine import Machine
        newer, newer_version = self.next_build()
        m = Machine(self, "upgrade")
        self.nspawn(m.image, "dpkg", "-i", "/run/pkg.deb", binds=[f"--bind-ro={self.deb}:/run/pkg.deb"])
        staging = MachineRoot(tmp=m.host("staging"))
        staging.stage_all(V1)
        for n in range(3):
            m.bind(staging.p(f"/run/host-nvidia/{n}"), f"/run/host-nvidia/{n}", read_only=True)
        for dev, major, minor in (("nvidiactl", 195, 255), ("nvidia-uvm", 509, 0), ("nvidia-uvm-tools", 509, 1), ("nvidia0", 195, 0)):
            make_chardev(m.host(f"dev/{dev}"), major, minor)
            m.bind(m.host(f"dev/{dev}"), f"/dev/{dev}")
        m.bind(self.deb, "/run/pkgs/current.deb", read_only=True)
        m.bind(newer, "/run/pkgs/newer.deb", read_only=True)
        m.write("/etc/unbounded/nvidia.yaml", "refresh:\n  settle_time: 0s\n")
        m.boot(scenario="""
state() {
	echo "$(systemctl show -p MainPID --value containerd.service) $(systemctl show -p InvocationID --value unbounded-nvidia-setup.service)"
}
step() {  # step NAME COMMAND...: run it, then a refresh; record what each said
	name=$1; shift
	"$@" > $out/$name.log 2>&1; echo $? > $out/$name.rc
	dpkg-query -W -f='${Version}' unbounded-nvidia-setup > $out/$name.version 2>/dev/null
	sha256sum /usr/bin/unbounded-nvidia-setup > $out/$name.sha256 2>/dev/null
	systemctl start unbounded-nvidia-refresh.service; echo $? > $out/$name.refresh-rc
	/usr/bin/unbounded-nvidia-setup verify > $out/$name.verify 2>&1; echo $? > $out/$name.verify-rc
	state > $out/$name.state
}
state > $out/before.state
step upgrade dpkg -i /run/pkgs/newer.deb
step downgrade dpkg -i /run/pkgs/current.deb
dpkg --purge unbounded-nvidia-setup > $out/purge.log 2>&1; echo $? > $out/purge.rc
state > $out/purge.state
ls -A /etc/cdi /var/lib/unbounded-nvidia > $out/purge.left 2>&1
""")
        read = lambda name: m.read(f"/var/lib/standin/{name}").strip()  # noqa: E731
        before = read("before.state").split()
        self.assertEqual(len(before), 2, before)
        self.assertNotEqual(before[0], "0", "containerd was not running before the upgrade")
        sha = lambda deb: subprocess.run(  # noqa: E731
            f"dpkg-deb --fsys-tarfile {shlex.quote(deb)} | tar -xO ./usr/bin/unbounded-nvidia-setup | sha256sum",
            shell=True, capture_output=True, text=True, check=True).stdout.split()[0]
        for step, deb, version in (("upgrade", newer, newer_version), ("downgrade", self.deb, None)):
            self.assertEqual(read(f"{step}.rc"), "0", read(f"{step}.log"))
            if version:
                self.assertEqual(read(f"{step}.version"), version)
            self.assertEqual(read(f"{step}.sha256").split()[0], sha(deb), f"{step}: not the package's binary")
            self.assertEqual(read(f"{step}.refresh-rc"), "0", f"{step}: the refresh with the installed binary failed")
            self.assertEqual(read(f"{step}.verify-rc"), "0", f"{step}: not ready: " + read(f"{step}.verify"))
            self.assertEqual(read(f"{step}.state").split(), before, f"{step}: containerd restarted or setup run again")
        self.assertEqual(read("purge.rc"), "0", read("purge.log"))
        self.assertEqual(read("purge.state").split()[0], before[0], "the purge touched containerd")
        left = read("purge.left")
        self.assertNotIn("nvidia.yaml", left)
        self.assertFalse(os.path.exists(m.p("/var/lib/unbounded-nvidia")), left)

    def test_remove_and_purge_leave_nothing_of_ours(self):
        """Issue 19: install the package into a machine image, run setup and the license install,
        then remove and purge: our CDI spec and state go, a spec someone else wrote stays."""
        self.assertEqual(self.build.returncode, 0, "package did not build")
        image = self.image("image")
        self.nspawn(image, "dpkg", "-i", "/run/pkg.deb", binds=[f"--bind-ro={self.deb}:/run/pkg.deb"])

        # A GPU machine's setup: staging bound in, device nodes, the installed binary.
        staging = MachineRoot(tmp=os.path.join(self.tmp, "staging"))
        staging.stage_all(V1)
        binds = [f"--bind-ro={staging.p(f'/run/host-nvidia/{n}')}:/run/host-nvidia/{n}" for n in range(3)]
        for dev, major, minor in (("nvidiactl", 195, 255), ("nvidia-uvm", 509, 0), ("nvidia0", 195, 0)):
            node = os.path.join(self.tmp, "dev", dev)
            make_chardev(node, major, minor)
            binds.append(f"--bind={node}:/dev/{dev}")
        lic = os.path.join(self.tmp, "licensing")
        os.makedirs(lic)
        for name, text in (("gridd.conf", "FeatureType=1\n"), ("client_configuration_token.tok", "token")):
            with open(os.path.join(lic, name), "w") as f:
                f.write(text)
        binds.append(f"--bind-ro={lic}:/run/host-nvidia-licensing")
        self.nspawn(image, "sh", "-c", "unbounded-nvidia-setup setup && "
                    "/usr/libexec/unbounded-nvidia/unbounded-nvidia-license-reload --boot", binds=binds)
        spec = os.path.join(image, "etc/cdi/nvidia.yaml")
        self.assertTrue(open(spec).readline().startswith("# Written by unbounded-nvidia-setup "))
        self.assertTrue(os.path.isdir(os.path.join(image, "var/lib/unbounded-nvidia/license")))
        foreign = os.path.join(image, "etc/cdi/other-vendor.yaml")
        with open(foreign, "w") as f:
            f.write("---\ncdiVersion: 0.5.0\nkind: example.com/device\n")

        self.nspawn(image, "dpkg", "-r", "unbounded-nvidia-setup")
        self.assertFalse(os.path.exists(spec), "our CDI spec survived apt-get remove")
        self.assertTrue(os.path.exists(foreign), "a spec someone else wrote was removed")
        self.assertTrue(os.path.isdir(os.path.join(image, "var/lib/unbounded-nvidia")), "remove is not purge")

        self.nspawn(image, "dpkg", "--purge", "unbounded-nvidia-setup")
        leftovers = [os.path.relpath(os.path.join(d, n), image)
                     for d, dirs, files in os.walk(image) for n in dirs + files if "unbounded" in n]
        self.assertEqual(leftovers, [], "left behind after purge")
        self.assertTrue(os.path.exists(foreign))


if __name__ == "__main__":
    main()
