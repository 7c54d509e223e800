#!/usr/bin/env python3
"""Seeds from Debian's real NVIDIA packages (tests/debian/fetch-nvidia-debs.sh DEBS): the head of each
ELF library (its ELF, program and dynamic headers sit in the first pages; the fuzzer's inputs stay
small) into OUT/elf, the ICD and layer configs into OUT/graphics_config (with the kind byte the
target reads first). Nothing here is checked in; `make fuzz` runs it when DEBS exists.
usage: deb-seeds.py DEBS OUT"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HEAD = 64 * 1024
# graphics_config.hpp's KINDS order: the file's name -> the index the target takes from byte 0.
KINDS = ['10_nvidia.json', '15_nvidia_gbm.json', '10_nvidia_wayland.json', '09_nvidia_wayland2.json', 'nvidia_icd.json',
         'nvidia_icd.x86_64.json', 'nvidia_icd.aarch64.json', 'nvidia_layers.json', 'nvidia.icd']


def main():
    debs, out = sys.argv[1], sys.argv[2]
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, 'elf'))
    os.makedirs(os.path.join(out, 'graphics_config'))
    with tempfile.TemporaryDirectory() as tmp:
        for deb in sorted(glob.glob(os.path.join(debs, 'bookworm-535', '*.deb'))):
            subprocess.run(['dpkg-deb', '-x', deb, tmp], check=True)
        for dirpath, _, files in os.walk(tmp):
            for f in files:
                p = os.path.join(dirpath, f)
                if os.path.islink(p) or not os.path.isfile(p):
                    continue
                with open(p, 'rb') as fh:
                    head = fh.read(HEAD)
                if head.startswith(b'\x7fELF') and '.so' in f:
                    open(os.path.join(out, 'elf', f), 'wb').write(head)
                elif f in KINDS:
                    open(os.path.join(out, 'graphics_config', f), 'wb').write(bytes([KINDS.index(f)]) + head)
    print(f'{out}: {len(os.listdir(os.path.join(out, "elf")))} ELF and '
          f'{len(os.listdir(os.path.join(out, "graphics_config")))} graphics config seeds from {debs}')


if __name__ == '__main__':
    main()
