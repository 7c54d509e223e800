"""The pods' container image, made from the machine image's own files (no registry is reachable): glibc
(every library Debian's libc6 installs, so nvidia-smi and the driver's libraries find theirs), a shell
and the few tools the probes run, each with the libraries it needs, as one layer of a docker-archive
tar that `ctr -n k8s.io images import` loads. The same image is the pods' sandbox (pause) image: its
command only sleeps."""

import hashlib
import io
import json
import os
import re
import subprocess
import tarfile

NAME = "localhost/unbounded-test/probe:1"
ARCH = "x86_64-linux-gnu"
TOOLS = ("sh", "dash", "cat", "ls", "sha256sum", "sleep", "mknod", "readlink", "stat", "test", "true", "env")


def _needed(path):
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def _files(root):
    """Image paths (relative, under usr/) of the tools, glibc and the libraries they need."""
    libdir = f"usr/lib/{ARCH}"
    want = set()
    listing = os.path.join(root, "var/lib/dpkg/info/libc6:amd64.list")
    with open(listing) as f:
        for line in f:
            rel = line.strip().lstrip("/")
            if not rel.startswith(("usr/lib", "lib")) or os.path.isdir(os.path.join(root, rel)):
                continue
            want.add(rel if rel.startswith("usr/") else "usr/" + rel)
    todo = [f"usr/bin/{t}" for t in TOOLS]
    seen = set()
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        path = os.path.join(root, rel)
        if not os.path.lexists(path):
            raise RuntimeError(f"{path} is missing from the machine image")
        want.add(rel)
        if os.path.islink(path):
            target = os.readlink(path)
            todo.append(os.path.normpath(os.path.join(os.path.dirname(rel), target)).lstrip("/")
                        if not target.startswith("/") else "usr/" + target.lstrip("/").removeprefix("usr/"))
            continue
        todo += [f"{libdir}/{n}" for n in _needed(path)]
    return sorted(want)


def build(root, dest):
    """Writes the docker-archive tar of the image to `dest`; returns its name."""
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
        def add_dir(name, mode=0o755):
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, mode
            t.addfile(info)

        def add_link(name, target):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            t.addfile(info)

        for d in ("usr", "usr/bin", "usr/lib", f"usr/lib/{ARCH}", "usr/lib64", "etc", "dev", "proc", "sys", "run", "var"):
            add_dir(d)
        add_dir("tmp", 0o1777)
        for link in ("bin", "lib", "lib64", "sbin"):  # merged /usr, as the machine's
            add_link(link, f"usr/{link if link != 'sbin' else 'bin'}")
        files = _files(root)
        made = {"usr", "usr/bin", "usr/lib", f"usr/lib/{ARCH}", "usr/lib64"}
        dirs = set()
        for rel in files:
            parent = os.path.dirname(rel)
            while parent and parent not in made and parent not in dirs:
                dirs.add(parent)
                parent = os.path.dirname(parent)
        for d in sorted(dirs, key=lambda x: (x.count("/"), x)):
            add_dir(d)
        for rel in files:
            t.add(os.path.join(root, rel), arcname=rel, recursive=False)
        for name, text in (("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n"), ("etc/group", "root:x:0:\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    blob = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(blob).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": ["PATH=/usr/bin:/bin"], "Cmd": ["/usr/bin/sleep", "infinity"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "tests/containerd/probe_image.py"}]}, sort_keys=True).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [NAME], "Layers": ["layer.tar"]}]).encode()
    with tarfile.open(dest, "w") as t:
        for name, data in (("layer.tar", blob), (config_name, config), ("manifest.json", manifest)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return NAME
