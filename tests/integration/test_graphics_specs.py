#!/usr/bin/env python3
"""Issue 34, items 3, 4 and 11, and three of its "also look at": graphics configs judged as their loaders
read them (a repeated key), taken only when the library they name is where a pod's loader looks, a config
that is a link out of the staging mounts said; the DLSS DLLs checked for the PE signature; spec keys that
name another writer's spec refused; a device plugin spec that is not JSON said in our words. Each case with
openat2 and with it forced absent (no_openat2_shim.so), as the units' sandbox runs the binary."""

import json
import os

from unbounded_tests.cdi_case import CdiCase
from unbounded_tests.harness import ARCH, PLUGIN_SPEC, MachineRoot, main, pe_image, plugin_spec, with_and_without_openat2, write

SPEC = "/etc/cdi/nvidia.yaml"
SHARE = "/run/host-nvidia/3"  # the host's /usr/share, bound as a staging tree
CONFIG = "/etc/unbounded/nvidia.yaml"


def icd(library):
    return json.dumps({"file_format_version": "1.0.0", "ICD": {"library_path": library}})


class Both(CdiCase):
    def each(self, body):
        with_and_without_openat2(body)

    def machine(self, files):
        """A standard machine and a staged /usr/share holding `files` (relative path -> text)."""
        m = MachineRoot(self).standard(gpus=1)
        for rel, text in files.items():
            write(os.path.join(m.p(SHARE), rel), text)
        return m

    def setup_warnings(self, m, env):
        r = m.setup(env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r, [w for w in r.result["warnings"] if "expected tmpfs" not in w]

    def assertTaken(self, m, rel):
        self.assertTrue(os.path.isfile(os.path.join(m.driver_root(), rel)), f"{rel} is not in the root")
        self.assertIn(f"containerPath: /{rel}\n", self.read(m, SPEC))

    def assertLeftOut(self, m, rel):
        self.assertFalse(os.path.exists(os.path.join(m.driver_root(), rel)), f"{rel} is in the root")
        self.assertNotIn(f"/{rel}\n", self.read(m, SPEC))

    def assertWarned(self, warnings, *needles):
        self.assertTrue(any(all(n in w for n in needles) for w in warnings), f"no warning with {needles}: {warnings}")


class TestRepeatedKeys(Both):
    """Item 3: a repeated key is judged by its last value (nlohmann's), loaded by its first (cJSON's, in glvnd
    and the Vulkan loader, which also match keys without regard to case): Mesa's ICD passed as NVIDIA's."""

    FILES = {
        # The loader reads libvulkan_radeon.so; the check read libGLX_nvidia.so.0.
        "vulkan/icd.d/nvidia_icd.json":
            '{"file_format_version": "1.0.0", "ICD": {"library_path": "libvulkan_radeon.so", '
            '"library_path": "libGLX_nvidia.so.0"}}\n',
        # cJSON finds "icd" for "ICD": the first object, Mesa's.
        "glvnd/egl_vendor.d/10_nvidia.json":
            '{"icd": {"library_path": "libEGL_mesa.so.0"}, "ICD": {"library_path": "libEGL_nvidia.so.0"}}\n',
        # The same key spelled with an escape is the same key to both parsers.
        "egl/egl_external_platform.d/15_nvidia_gbm.json":
            '{"ICD": {"library_path": "libEGL_mesa.so.0", "library_pat\\u0068": "libnvidia-egl-gbm.so.1"}}\n',
        # An ICD file is read by "ICD" only; a "layer" in it is not what its loader loads.
        "vulkan/icd.d/nvidia_icd.x86_64.json":
            '{"ICD": {"library_path": "libvulkan_intel.so"}, "layer": {"library_path": "libGLX_nvidia.so.0"}}\n',
        # NVIDIA's own layer file, as it is: taken.
        "vulkan/implicit_layer.d/nvidia_layers.json":
            '{"file_format_version": "1.0.0", "layer": {"name": "VK_LAYER_NV_optimus", "type": "INSTANCE", '
            '"library_path": "libGLX_nvidia.so.0", "api_version": "1.3.242", "implementation_version": "1"}}\n',
    }

    def test_a_repeated_key_is_refused(self):
        def body(env):
            m = self.machine(self.FILES)
            r, w = self.setup_warnings(m, env)
            self.assertWarned(w, "vulkan/icd.d/nvidia_icd.json", 'repeats the key "library_path"')
            self.assertWarned(w, "10_nvidia.json", 'repeats the key "ICD"')
            self.assertWarned(w, "15_nvidia_gbm.json", 'repeats the key "library_path"')
            self.assertWarned(w, "nvidia_icd.x86_64.json", "libvulkan_intel.so, not an NVIDIA library")
            for rel in ("usr/share/vulkan/icd.d/nvidia_icd.json", "usr/share/glvnd/egl_vendor.d/10_nvidia.json",
                        "usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
                        "usr/share/vulkan/icd.d/nvidia_icd.x86_64.json"):
                self.assertLeftOut(m, rel)
            self.assertTaken(m, "usr/share/vulkan/implicit_layer.d/nvidia_layers.json")
            self.assertNotIn("mesa", self.read(m, SPEC))
            self.assertEqual(m.run("verify", env=env).returncode, 0)
        self.each(body)


class TestLoadable(Both):
    """Item 4: a config naming a library the pod cannot load was mounted without a word."""

    FILES = {
        # Red Hat's path: the spec mounts nothing at /usr/lib64 once update-ldcache is installed.
        "vulkan/icd.d/nvidia_icd.json": icd("/usr/lib64/libGLX_nvidia.so.0"),
        # Where the spec mounts the driver's libraries: taken.
        "vulkan/icd.d/nvidia_icd.x86_64.json": icd(f"/lib/{ARCH}/libGLX_nvidia.so.0"),
        # A companion this host's staging does not have (only libnvidia-egl-wayland.so.1 is staged).
        "egl/egl_external_platform.d/09_nvidia_wayland2.json": icd("libnvidia-egl-wayland2.so.1"),
        "egl/egl_external_platform.d/10_nvidia_wayland.json": icd("libnvidia-egl-wayland.so.1"),
        # A relative path: each loader reads it from another directory.
        "glvnd/egl_vendor.d/10_nvidia.json": icd("nvidia/libEGL_nvidia.so.0"),
        "egl/egl_external_platform.d/15_nvidia_gbm.json": icd("libnvidia-egl-gbm.so.1"),
    }

    def test_only_configs_whose_library_the_pod_finds(self):
        def body(env):
            m = self.machine(self.FILES)
            r, w = self.setup_warnings(m, env)
            self.assertWarned(w, f"{SHARE}/vulkan/icd.d/nvidia_icd.json", "/usr/lib64/libGLX_nvidia.so.0",
                              "where the CDI spec mounts nothing", f"/lib/{ARCH}/")
            self.assertWarned(w, f"{SHARE}/egl/egl_external_platform.d/09_nvidia_wayland2.json", "libnvidia-egl-wayland2.so.1",
                              "the driver root does not hold")
            self.assertWarned(w, "10_nvidia.json", "nvidia/libEGL_nvidia.so.0", "a relative path")
            for rel in ("usr/share/vulkan/icd.d/nvidia_icd.json", "usr/share/egl/egl_external_platform.d/09_nvidia_wayland2.json",
                        "usr/share/glvnd/egl_vendor.d/10_nvidia.json"):
                self.assertLeftOut(m, rel)
            for rel in ("usr/share/vulkan/icd.d/nvidia_icd.x86_64.json", "usr/share/egl/egl_external_platform.d/10_nvidia_wayland.json",
                        "usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json"):
                self.assertTaken(m, rel)
            self.assertEqual(m.run("verify", env=env).returncode, 0)
        self.each(body)


class TestLinkOutOfStaging(Both):
    """Also: a config that is an absolute symlink out of the staging mounts was skipped without a word."""

    def test_a_link_out_of_staging_is_said(self):
        def body(env):
            m = self.machine({"vulkan/icd.d/nvidia_icd.json": icd("libGLX_nvidia.so.0")})
            os.makedirs(m.p(f"{SHARE}/glvnd/egl_vendor.d"))
            # A host's file elsewhere, by another name: no staging tree holds any suffix of its path.
            os.symlink("/opt/nvidia/egl/vendor-nvidia.json", m.p(f"{SHARE}/glvnd/egl_vendor.d/10_nvidia.json"))
            write(m.p("/opt/nvidia/egl/vendor-nvidia.json"), icd("libEGL_nvidia.so.0"))  # in the machine, not staged
            r, w = self.setup_warnings(m, env)
            self.assertWarned(w, f"{SHARE}/glvnd/egl_vendor.d/10_nvidia.json", "/opt/nvidia/egl/vendor-nvidia.json",
                              "outside the staging mounts", "skipping this graphics configuration file")
            self.assertLeftOut(m, "usr/share/glvnd/egl_vendor.d/10_nvidia.json")
            self.assertTaken(m, "usr/share/vulkan/icd.d/nvidia_icd.json")
        self.each(body)


class TestPeSignature(Both):
    """Also: a DLSS DLL was taken on its first two bytes, "MZ"; a PE file has "PE\\0\\0" at e_lfanew."""

    def test_mz_alone_is_not_a_pe_file(self):
        def body(env):
            m = MachineRoot(self).standard(gpus=1)
            wine = m.p("/run/host-nvidia/0/nvidia/wine")
            write(os.path.join(wine, "_nvngx.dll"), pe_image(b"a PE file"))
            write(os.path.join(wine, "nvngx.dll"), b"MZ" + b"\0" * 58 + (64).to_bytes(4, "little") + b"NE\0\0 a 16-bit one")
            r = m.setup(env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("Skipping /run/host-nvidia/0/nvidia/wine/nvngx.dll: not a Windows PE file", r.stderr)
            self.assertLeftOut(m, f"lib/{ARCH}/nvidia/wine/nvngx.dll")
            self.assertTaken(m, f"lib/{ARCH}/nvidia/wine/_nvngx.dll")
            # e_lfanew past the end of the file: never read, not a PE file either.
            write(os.path.join(wine, "nvngx.dll"), b"MZ" + b"\0" * 58 + (1 << 30).to_bytes(4, "little") + b"PE\0\0")
            r = m.setup(env=env)
            self.assertIn("Skipping /run/host-nvidia/0/nvidia/wine/nvngx.dll: not a Windows PE file", r.stderr)
            self.assertLeftOut(m, f"lib/{ARCH}/nvidia/wine/nvngx.dll")
        self.each(body)


class TestSpecKeys(Both):
    """Item 11: a spec key naming the device plugin's spec was accepted; setup overwrote it and removed it as ours."""

    CASES = [
        ("gds_cdi_spec: /var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json\n", 1, "gds_cdi_spec", "device plugin's spec"),
        ("staging_timeout: 1s\ngdrcopy_cdi_spec: /run/cdi/k8s.device-plugin.nvidia.com-gpu.json\n", 2, "gdrcopy_cdi_spec",
         "device plugin's spec"),
        ("nvswitch_cdi_spec: /var/run/cdi/k8s.device-plugin.nvidia.com-gds.json\n", 1, "nvswitch_cdi_spec",
         "k8s.device-plugin.nvidia.com-*.json"),
        ("imex_cdi_spec: /var/run/cdi/k8s.gpu.nvidia.com-claim_0f1e.yaml\n", 1, "imex_cdi_spec", "DRA driver"),
        ("cdi_spec: /run/cdi/nvidia.yaml\n", 1, "cdi_spec", "nvidia-ctk"),
        ("device_plugin_spec: /etc/cdi/nvidia.yaml\n", 1, "device_plugin_spec", "device plugin's spec"),
        ("cdi_spec: /run/cdi/ours.yaml\ngds_cdi_spec: /var/run/cdi/ours.yaml\n", 2, "gds_cdi_spec", "name the same file"),
    ]

    def test_a_spec_key_naming_another_writer_s_spec_is_a_config_error(self):
        def body(env):
            for text, line, key, why in self.CASES:
                m = MachineRoot(self).standard(gpus=1)
                plugin = plugin_spec(m, "535.104.05")
                write(m.p(PLUGIN_SPEC), plugin)
                m.config(text)
                for command in ("setup", "verify"):
                    r = m.run(command, env=env)
                    self.assertEqual(r.returncode, 2, f"{text!r} {command}: {r.stderr}")
                    self.assertIn(f"{CONFIG}:{line}: ", r.stderr, text)
                    self.assertIn(why, r.stderr, text)
                    self.assertIn(f"'{key}'", r.stderr, text)
                    self.assertEqual(len([x for x in r.stderr.splitlines() if x.strip()]), 1, r.stderr)
                with open(m.p(PLUGIN_SPEC)) as f:
                    self.assertEqual(f.read(), plugin, text)
                self.assertFalse(os.path.exists(m.p(SPEC)), text)
        self.each(body)


class TestPluginSpecNotJson(Both):
    """Also: a device plugin spec that is not JSON got the JSON library's lexer text in our message."""

    CASES = [
        ('{"devices": x}', "line 1, column 13: expected a value (an object, array, string, number, true, false or null), found 'x'"),
        ('{\n  "cdiVersion": "0.5.0",\n  kind: 1\n}\n', "line 3, column 3: expected a key in double quotes, found 'k'"),
        ('{"cdiVersion" "0.5.0"}', "line 1, column 15: expected ':' after the key, found '\"'"),
        ('{"devices": [1 2]}', "line 1, column 16: expected ',' or ']' after an element of the array, found '2'"),
        ('{"devices": [', "expected a value (an object, array, string, number, true, false or null), found the end of the file"),
        ('{} {}', "line 1, column 4: expected the end of the file after the value, found '{'"),
    ]

    def test_where_and_what_in_our_words(self):
        def body(env):
            m = self.ready_machine()
            for text, needle in self.CASES:
                write(m.p(PLUGIN_SPEC), text)
                r = m.run("verify", env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(f"Device plugin CDI spec {PLUGIN_SPEC} is not valid JSON (byte ", r.stderr)
                self.assertIn(needle, r.stderr, text)
                for lexer in ("last read", "invalid literal", "syntax error", "parsing"):
                    self.assertNotIn(lexer, r.stderr, text)
        self.each(body)


if __name__ == "__main__":
    main()
