"""The real consumers the differential test holds verify to, from Debian's packages only: the image
of each release (tests/oracle/<release>/mkosi.conf.d, cached like the booted tiers' images) holds
Debian's Go, the CDI library's packaged sources and containerd. The CDI oracle (cdi_oracle.go) is
built from them with that Go, offline, in GOPATH mode as Debian builds its Go packages; it is a
static binary, as is the Go toolchain, so both run here without a chroot."""

import glob
import os
import re
import subprocess

from .image import IMAGES, base_image

from . import TESTS_DIR

HERE = os.path.join(TESTS_DIR, "oracle")


def image(release):
    return base_image(*IMAGES[f"oracle-{release}"])


def package_paragraph(img, package):
    """The installed package's paragraph of the image's dpkg database, as text."""
    text = open(os.path.join(img, "var/lib/dpkg/status"), encoding="utf-8").read()
    for para in text.split("\n\n"):
        if re.search(rf"^Package: {re.escape(package)}$", para, re.M):
            return para.strip() + "\n"
    raise RuntimeError(f"{package} is not installed in {img}")


def version_of(img, package):
    return re.search(r"^Version: (.*)$", package_paragraph(img, package), re.M).group(1)


def build_cdi_oracle(img, out_dir):
    """Builds cdi_oracle.go with the image's Go against the image's CDI library; returns its path."""
    goroots = sorted(glob.glob(os.path.join(img, "usr/lib/go-1.*")))
    if not goroots:
        raise RuntimeError(f"no Go toolchain in {img}")
    goroot = goroots[-1]
    src = os.path.join(out_dir, "gopath", "src", "cdioracle")
    os.makedirs(src, exist_ok=True)
    with open(os.path.join(HERE, "cdi_oracle.go")) as f, open(os.path.join(src, "main.go"), "w") as g:
        g.write(f.read())
    binary = os.path.join(out_dir, "cdi-oracle")
    env = {"PATH": f"{goroot}/bin:/usr/bin:/bin", "HOME": out_dir, "GOROOT": goroot,
           "GOPATH": f"{out_dir}/gopath:{img}/usr/share/gocode", "GO111MODULE": "off", "GOPROXY": "off",
           "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOCACHE": os.path.join(out_dir, "gocache"), "GOFLAGS": ""}
    r = subprocess.run([f"{goroot}/bin/go", "build", "-o", binary, "cdioracle"], env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building the CDI oracle with {goroot} failed:\n{r.stderr[-3000:]}")
    return binary


def run_cdi_oracle(binary, case_dirs):
    """{case dir: {qualified device: spec path relative to the case, "/..."}} from the real library."""
    r = subprocess.run([binary], input="\n".join(case_dirs) + "\n", capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"the CDI oracle failed ({r.returncode}): {r.stderr[-2000:]}")
    out = {}
    for line in r.stdout.splitlines():
        res = __import__("json").loads(line)
        base = res["case"].rstrip("/")
        out[base] = {d: p[len(base):] for d, p in res["devices"].items()}
        if res.get("panic"):
            out[base]["panic"] = res["panic"]
    return out


def containerd_dump(img, config):
    """What the release's containerd makes of `config` (its `config dump`): {"refused": bool,
    "enable_cdi", "cdi_spec_dirs"} from the CRI table that version reads."""
    import tomllib
    r = subprocess.run([os.path.join(img, "usr/bin/containerd"), "--config", config, "config", "dump"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return {"refused": True, "why": (r.stderr.strip().splitlines() or [""])[-1]}
    d = tomllib.loads(r.stdout)
    table = "io.containerd.cri.v1.runtime" if d.get("version", 0) >= 3 else "io.containerd.grpc.v1.cri"
    cri = d.get("plugins", {}).get(table, {})
    return {"refused": False, "enable_cdi": cri.get("enable_cdi"), "cdi_spec_dirs": cri.get("cdi_spec_dirs")}


def containerd_daemon_starts(img, config, workdir):
    """Whether the release's containerd daemon itself starts on `config`, and with its CRI plugin,
    which is what a node gets: its dump and its daemon differ (2.x's dump passes over a missing
    import, the daemon does not start; the CRI plugin checks its own table as it loads and, failing,
    leaves the daemon running without it). The daemon runs with its root, state and socket under
    `workdir` and is killed once it says "containerd successfully booted", every plugin loaded; it
    runs in a mount namespace of its own with an empty /run, where 2.x's CRI plugin makes the NRI
    socket (/var/run/nri/nri.sock): daemons side by side would otherwise fight over this machine's.
    {"refused": bool, "why": its last line when it did not start, "cri": whether the CRI plugin
    loaded, "cri_why": why it did not}."""
    import signal
    import threading
    os.makedirs(workdir, exist_ok=True)
    p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs tmpfs /run && exec "$0" "$@"',
                          os.path.join(img, "usr/bin/containerd"), "--config", config, "--log-level", "info",
                          "--root", f"{workdir}/root", "--state", f"{workdir}/state", "--address", f"{workdir}/sock"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    watchdog = threading.Timer(30, lambda: os.killpg(p.pid, signal.SIGKILL))
    watchdog.start()
    last, booted, cri, cri_why = "", False, False, None
    try:
        for line in p.stderr:
            if "containerd successfully booted" in line:
                booted = True
                break
            # 1.x: msg="loading plugin \"io.containerd.grpc.v1.cri\"..."; 2.x: msg="loading plugin" id=io.containerd.grpc.v1.cri
            if "io.containerd.grpc.v1.cri" in line and "loading plugin" in line:
                cri = True
            if "io.containerd.grpc.v1.cri" in line and "failed to load plugin" in line:
                cri, cri_why = False, line.strip()
            last = line.strip() or last
    finally:
        watchdog.cancel()
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        rc = p.wait()
        p.stderr.close()
    if not booted:
        return {"refused": True, "why": last or f"exit status {rc}"}
    return {"refused": False, "cri": cri, "cri_why": cri_why}
