"""Host filesystems made of Debian's real NVIDIA packages (tests/debian/fetch-nvidia-debs.sh), laid out as
each host family installs them:

- Debian: the files where dpkg unpacks them, and the alternatives links as nvidia-alternative's postinst
  makes them (LINK -> /etc/alternatives/nvidia--NAME -> real file). The postinst of the downloaded package
  is read, not a list of ours: its add_slave/add_multiarch_slave calls are replayed the way the script
  and update-alternatives do (a slave exists when its source file does and its link's directory does).
- Ubuntu: every library of the driver directly in the multiarch dir with its SONAME link, nvidia-smi in
  /usr/bin (what Ubuntu's libnvidia-compute-<branch> packages install), from the same files.
- Red Hat family and Azure Linux: the same in /usr/lib64.
"""

import os
import re
import shlex
import shutil
import subprocess

DEBS = os.environ.get("DEBIAN_NVIDIA_DEBS", "")
SETS = ("bookworm-535", "bookworm-535-i386", "bookworm-535-firmware", "bookworm-tesla-535", "trixie-550")


def debs(name):
    d = os.path.join(DEBS, name)
    found = sorted(f for f in os.listdir(d) if f.endswith(".deb")) if os.path.isdir(d) else []
    if not found or not os.path.exists(os.path.join(DEBS, ".complete")):  # loud, never a skip
        raise RuntimeError(f"Debian's NVIDIA packages {name} are missing in {DEBS!r}: make check fetches them "
                           "(tests/debian/fetch-nvidia-debs.sh)")
    return [os.path.join(d, f) for f in found]


class HostTree:
    """A host root directory: p('/usr/lib/...') is the path of that host path in the test's tree."""

    # What a minimal Debian system has before any NVIDIA package (the postinst links only into
    # directories that exist).
    BASE_DIRS = ("/usr/bin", "/usr/sbin", "/usr/share/man/man1", "/usr/share/applications", "/etc/alternatives",
                 "/etc/modprobe.d", "/usr/lib/x86_64-linux-gnu", "/usr/lib/i386-linux-gnu", "/lib/firmware")

    def __init__(self, root):
        self.root = root
        for d in self.BASE_DIRS:
            os.makedirs(self.p(d), exist_ok=True)

    def p(self, absolute):
        return os.path.join(self.root, absolute.lstrip("/"))

    def resolves_to_file(self, absolute):
        """[ -f PATH ] on the host: symlinks followed, absolute ones inside this host."""
        path = absolute
        for _ in range(40):
            real = self.p(path)
            if os.path.islink(real):
                target = os.readlink(real)
                path = target if target.startswith("/") else os.path.normpath(os.path.join(os.path.dirname(path), target))
                continue
            return os.path.isfile(real)
        return False

    def symlink(self, target, link):
        real = self.p(link)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        if os.path.lexists(real):
            os.unlink(real)
        os.symlink(target, real)


def install_debian(host, deb_set):
    """dpkg -i of a set, as far as the files go: unpack, then nvidia-alternative's postinst links."""
    postinsts = []
    for deb in debs(deb_set):
        subprocess.run(["dpkg-deb", "-x", deb, host.root], check=True)
        if "-alternative_" in os.path.basename(deb):
            ctl = subprocess.run(["dpkg-deb", "-I", deb, "postinst"], check=True, capture_output=True, text=True).stdout
            postinsts.append(ctl)
    for text in postinsts:
        replay_alternatives(host, text)


def replay_alternatives(host, postinst):
    """The 'triggered' branch of nvidia-alternative's postinst: update-alternatives --install of the
    master link with the slaves whose source exists (conf slaves included; the libnvidia-ml.so slave
    only with nvml.h, which no driver package ships)."""
    triplets = re.search(r'^TRIPLETS="([^"]*)"', postinst, re.M).group(1).split()
    slaves = []

    def add_slave(link, name, source):
        if host.resolves_to_file(source) and os.path.isdir(host.p(os.path.dirname(link))):
            slaves.append((link, "nvidia--" + name, source))

    def add_multiarch_slave(target_dir, target_sub, file, source_dir, source_sub, prefix=""):
        for t in triplets:
            suffix = t.rstrip("/")
            suffix = "-" + suffix.lstrip("/") if suffix else ""
            add_slave(f"{target_dir}{t}{target_sub}{file}", f"{prefix}{file}{suffix}", f"{source_dir}{t}{source_sub}{file}")

    for block in ("slaves", "conf_slaves", "kmod_slaves"):
        m = re.search(r'^\s*' + block + r'="(.*?)^"', postinst, re.M | re.S)
        for call in re.findall(r'\$\((add_slave|add_multiarch_slave) ([^)]*)\)', m.group(1) if m else ""):
            args = shlex.split(call[1])
            (add_slave if call[0] == "add_slave" else add_multiarch_slave)(*args)
    master = re.search(r'update-alternatives --install (\S+) (\S+) (\S+) ', postinst)
    link, name, path = master.groups()
    if not os.path.isdir(host.p(path)):
        return
    host.symlink(f"/etc/alternatives/{name}", link)
    host.symlink(path, f"/etc/alternatives/{name}")
    for link, name, source in slaves:
        host.symlink(f"/etc/alternatives/{name}", link)
        host.symlink(source, f"/etc/alternatives/{name}")


def driver_files(host, arch, flavour="current"):
    """(name, path) of every regular file Debian's packages put in <arch>/nvidia/<flavour>/ and in the
    lib dir itself (the private GL libraries)."""
    out = []
    for d in (f"/usr/lib/{arch}/nvidia/{flavour}", f"/usr/lib/{arch}"):
        real = host.p(d)
        for n in sorted(os.listdir(real)) if os.path.isdir(real) else []:
            path = os.path.join(real, n)
            if os.path.isfile(path) and not os.path.islink(path) and ".so." in n:
                out.append((n, path))
    return out


def soname_of(path):
    out = subprocess.run(["readelf", "-d", path], check=True, capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return m.group(1) if m else None


def install_flat(host, debian_host, arch, libdir, bindir="/usr/bin", dev_links=False):
    """Ubuntu's (libdir /usr/lib/<arch>) and Red Hat's (/usr/lib64) layout of the same files: regular
    files directly in the lib dir with relative SONAME links beside them, nvidia-smi in bindir. The .run
    installer's (dev_links): also NAME.so -> SONAME, the .so -> .so.1 -> .so.<v> chains it makes."""
    d = host.p(libdir)
    os.makedirs(d, exist_ok=True)
    for name, path in driver_files(debian_host, arch):
        shutil.copy2(path, os.path.join(d, name))
        so = soname_of(path)
        if so and so != name:
            host.symlink(name, os.path.join(libdir, so))
            if dev_links:
                host.symlink(so, os.path.join(libdir, name[:name.index(".so.") + 3]))
    if bindir:
        os.makedirs(host.p(bindir), exist_ok=True)
        shutil.copy2(debian_host.p("/usr/lib/nvidia/current/nvidia-smi"), host.p(os.path.join(bindir, "nvidia-smi")))


def install_run(host, debian_host):
    """What NVIDIA's .run installer leaves on a Debian-family host: the 64-bit libraries flat in the
    multiarch dir, the 32-bit ones in /usr/lib32, .so -> .so.1 -> .so.<v> chains, nvidia-smi in /usr/bin,
    the GSP firmware in /lib/firmware/nvidia/<v>/."""
    install_flat(host, debian_host, "x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", dev_links=True)
    install_flat(host, debian_host, "i386-linux-gnu", "/usr/lib32", bindir=None, dev_links=True)
    shutil.copytree(debian_host.p("/lib/firmware/nvidia"), host.p("/lib/firmware/nvidia"), dirs_exist_ok=True)


def bind(machine, host, host_path, n):
    """--bind-ro=HOST_PATH:/run/host-nvidia/N, as a copy made of hard links (no mount needed)."""
    dest = machine.p(f"/run/host-nvidia/{n}")
    shutil.copytree(host.p(host_path), dest, symlinks=True, copy_function=os.link)
    return dest
