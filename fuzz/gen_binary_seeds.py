#!/usr/bin/env python3
"""Writes the binary seeds of the elf and pe targets into OUTDIR/elf and OUTDIR/pe: nothing binary is
checked in, so they are made here from the fixture library's source (tests/fixtures/fixture_lib.cpp)
with the build's compiler, and PE images byte by byte. Then touches STAMP.
usage: gen_binary_seeds.py OUTDIR STAMP FIXTURE_SOURCE CXX [CXX ARGS...]"""
import os
import shutil
import struct
import subprocess
import sys


def main():
    outdir, stamp, source, cxx = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    elf, pe = os.path.join(outdir, 'elf'), os.path.join(outdir, 'pe')
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(elf)
    os.makedirs(pe)
    # Small and stripped: libFuzzer's default -max_len follows the largest seed.
    small = ['-shared', '-fPIC', '-O1', '-s', '-nostdlib', '-Wl,-z,noseparate-code', '-DFIXTURE_VERSION="535.104.05"']
    cuda = os.path.join(elf, 'libcuda.so.535.104.05')
    subprocess.run(cxx + small + ['-Wl,-soname,libcuda.so.1', '-o', cuda, source], check=True)
    # One with DT_NEEDED names: an NVIDIA library (kept) and libc (not the driver's).
    subprocess.run(cxx + small + ['-Wl,-soname,libnvidia-glcore.so.535.104.05', '-Wl,--no-as-needed', '-o',
                                  os.path.join(elf, 'libnvidia-glcore.so.535.104.05'), source, cuda, '-lc'],
                   check=True)
    with open(cuda, 'rb') as f:
        head = f.read(64)
    with open(os.path.join(elf, 'header-only'), 'wb') as f:
        f.write(head)

    # PE: "MZ", e_lfanew at 0x3c, "PE\0\0" and a COFF header for x86-64 there.
    dos = bytearray(b'MZ' + bytes(0x3a)) + struct.pack('<I', 0x40)
    coff = struct.pack('<HHIIIHH', 0x8664, 1, 0, 0, 0, 0xf0, 0x2022)
    with open(os.path.join(pe, 'nvngx_dlss.dll'), 'wb') as f:
        f.write(dos + b'PE\0\0' + coff + bytes(16))
    with open(os.path.join(pe, 'mz-only'), 'wb') as f:
        f.write(dos + b'NE\0\0')
    with open(stamp, 'w') as f:
        f.write('')


if __name__ == '__main__':
    main()
