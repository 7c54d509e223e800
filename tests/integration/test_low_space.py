#!/usr/bin/env python3
"""Issue 34, item 12: optional data never fails a boot. nvoptix.bin (134 MB in Debian's 535) and the DLSS
DLLs are files a CUDA pod never reads; on a small /run they made setup fail with ENOSPC, so containerd did
not start for any pod. What does not fit is left out with a warning (out of the root, the manifest and the
spec), the rest is served, an unchanged re-run stays unchanged, and a file left out comes in once there is
room. A required file that does not fit still fails the run (test_setup's ENOSPC case). Each case with
openat2 and with it forced absent, in a private mount namespace holding a 16 MiB tmpfs at /run/nvidia."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

from unbounded_tests.harness import (ARCH, IS_ROOT, SETUP, V1, MachineRoot, fixture, main, pe_image,
                                     with_and_without_openat2, write)

MIB = 1024 * 1024
SPEC = "/etc/cdi/nvidia.yaml"
DLL = f"lib/{ARCH}/nvidia/wine/nvngx.dll"
SMALL_DLL = f"lib/{ARCH}/nvidia/wine/_nvngx.dll"
OPTIX = "usr/share/nvidia/nvoptix.bin"
RUNS = 6  # the DLL goes from staging after the third


@unittest.skipUnless(IS_ROOT and shutil.which("unshare"), "needs root and unshare for a private tmpfs")
class TestOptionalDataOnASmallRun(unittest.TestCase):
    def machine(self):
        m = MachineRoot(self).standard(gpus=1)
        lib = m.p("/run/host-nvidia/0")
        shutil.copy(fixture(f"libnvoptix.so.{V1}"), lib)
        os.symlink(f"libnvoptix.so.{V1}", os.path.join(lib, "libnvoptix.so.1"))
        write(os.path.join(lib, "nvidia/wine/nvngx.dll"), pe_image(b"\x01" * (9 * MIB)))
        write(os.path.join(lib, "nvidia/wine/_nvngx.dll"), pe_image(b" a small one"))
        write(m.p("/run/host-nvidia/3/nvoptix.bin"), b"\x7a\xda" * (9 * MIB // 2))  # Ubuntu's /usr/share/nvidia
        os.makedirs(m.p("/run/nvidia"))
        return m

    def runs(self, m, env):
        """Setup RUNS times on the 16 MiB tmpfs; per run: exit code, JSON, stderr, the root's files, the spec."""
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out, True)
        envs = " ".join(f"{k}='{v}'" for k, v in (env or {}).items())
        root = m.p("/run/nvidia/driver")
        steps = []
        for i in range(RUNS):
            if i == 3:
                steps.append(f'rm "{m.p("/run/host-nvidia/0/nvidia/wine/nvngx.dll")}"')
            steps.append(f"""
                env {envs} "{SETUP}" --root "{m.path}" --json setup >"{out}/{i}.json" 2>"{out}/{i}.err"
                echo $? >"{out}/{i}.rc"
                (cd "{root}" 2>/dev/null && find . -type f | sort) >"{out}/{i}.files"
                cp "{m.p(SPEC)}" "{out}/{i}.spec" 2>/dev/null
                env {envs} "{SETUP}" --root "{m.path}" verify >/dev/null 2>"{out}/{i}.verify"
                echo $? >"{out}/{i}.verify_rc"
                ls -a "{m.p('/run/nvidia')}" >"{out}/{i}.parent" """)
        script = f'set -u\nmount -t tmpfs -o size=16m tmpfs "{m.p("/run/nvidia")}" || exit 90\n' + "\n".join(steps)
        p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                           capture_output=True, text=True)
        self.assertEqual(p.returncode, 0, p.stderr)

        def read(name):
            with open(f"{out}/{name}") as f:
                return f.read()
        res = []
        for i in range(RUNS):
            r = {"rc": int(read(f"{i}.rc")), "err": read(f"{i}.err"), "files": read(f"{i}.files").split(),
                 "spec": read(f"{i}.spec") if os.path.exists(f"{out}/{i}.spec") else "",
                 "verify_rc": int(read(f"{i}.verify_rc")), "verify": read(f"{i}.verify"),
                 "parent": read(f"{i}.parent").split()}
            r["json"] = json.loads(read(f"{i}.json")) if read(f"{i}.json").strip() else {}
            res.append(r)
        return res

    def assertServed(self, r, path, i):
        self.assertIn(f"./{path}", r["files"], f"run {i + 1}: {path} is not in the root")
        self.assertIn(f"containerPath: /{path}\n", r["spec"], f"run {i + 1}: the spec does not mount {path}")

    def assertLeftOut(self, r, path, i):
        self.assertNotIn(f"./{path}", r["files"], f"run {i + 1}: {path} is in the root")
        self.assertNotIn(f"/{path}\n", r["spec"], f"run {i + 1}: the spec mounts {path}")
        self.assertTrue(any(os.path.basename(path) in w and "not enough space" in w for w in r["json"].get("warnings", [])),
                        f"run {i + 1}: no warning that {path} was left out: {r['json'].get('warnings')}")

    def test_optional_data_that_does_not_fit_is_left_out(self):
        def body(env):
            m = self.machine()
            res = self.runs(m, env)
            for i, r in enumerate(res):
                self.assertEqual(r["rc"], 0, f"run {i + 1}: {r['err']}")
                self.assertTrue(r["json"]["ready"], f"run {i + 1}: {r['err']}")
                self.assertEqual(r["verify_rc"], 0, f"run {i + 1}: verify: {r['verify']}")
                self.assertEqual([n for n in r["parent"] if n.startswith(".driver-")], [], f"run {i + 1}: a temp tree was left")
                # Everything a CUDA pod needs is served in every run.
                for lib in (f"lib/{ARCH}/libcuda.so.{V1}", f"lib/{ARCH}/libnvidia-ml.so.{V1}", f"lib/{ARCH}/libnvoptix.so.{V1}",
                            SMALL_DLL):
                    self.assertServed(r, lib, i)
            # 9 + 9 MiB do not fit 16 MiB: the first in the root's order is taken, the other left out.
            for i in range(3):
                self.assertServed(res[i], DLL, i)
                self.assertLeftOut(res[i], OPTIX, i)
            # The left-out file keeps an unchanged re-run unchanged: nothing rebuilt, nothing copied.
            for i in (1, 2):
                self.assertTrue(res[i]["json"]["unchanged"], f"run {i + 1} rebuilt the root: {res[i]['json']}")
                self.assertEqual(res[i]["json"]["bytes_copied"], 0)
            # The DLL went from staging; while the old root still holds it there is no room for nvoptix.bin;
            # the run after takes it, and the one after that is unchanged.
            self.assertNotIn(f"./{DLL}", res[3]["files"])
            self.assertLeftOut(res[3], OPTIX, 3)
            self.assertServed(res[4], OPTIX, 4)
            self.assertNotIn(f"/{DLL}\n", res[4]["spec"])
            self.assertFalse(any("not enough space" in w for w in res[4]["json"]["warnings"]), res[4]["json"]["warnings"])
            self.assertTrue(res[5]["json"]["unchanged"], res[5]["json"])
            self.assertServed(res[5], OPTIX, 5)
        with_and_without_openat2(body)


if __name__ == "__main__":
    main()
