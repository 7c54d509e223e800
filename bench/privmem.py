"""A process's peak private memory, measured: its anonymous RSS at the moments it can be highest, and its
peak heap.

The kernel keeps a high-water mark of the whole RSS (VmHWM), which counts the binary's text and the
libraries' pages, file-backed and shared; it keeps none of the anonymous part (RssAnon: the heap, the
stacks, the pages of .data and the relocations a process writes). Anonymous pages come by page faults,
which only add, and leave only by a system call of the process: munmap, mremap, brk, madvise, an mmap
over a mapping, exit. So its peak is reached just before one of those, and `peak_anon_kib` stops the
process (ptrace) at the entry of each of them, in every thread, and reads /proc/PID/smaps_rollup's
`Anonymous:`, a walk of the page tables, there: the highest reading is the peak. What it can miss is
what another thread faults in during the microseconds between the reading and the release, a few
pages at most. The process runs slower when traced; its memory is the same.

`peak_heap_bytes` is valgrind massif's peak (malloc and operator new, with allocator overhead, at
--peak-inaccuracy=0): what of the anonymous peak is heap.
"""

import ctypes
import os
import platform
import re
import shutil
import signal
import subprocess
import tempfile

PTRACE_TRACEME, PTRACE_SYSCALL, PTRACE_SETOPTIONS = 0, 24, 0x4200
PTRACE_GET_SYSCALL_INFO = 0x420E
PTRACE_O_TRACESYSGOOD, PTRACE_O_TRACECLONE, PTRACE_O_TRACEEXEC, PTRACE_O_EXITKILL = 0x1, 0x8, 0x10, 0x100000
PTRACE_SYSCALL_INFO_ENTRY = 1
WALL = 0x40000000

# The system calls that can release anonymous memory, by architecture.
RELEASING = {
    "x86_64": {"mmap": 9, "munmap": 11, "brk": 12, "mremap": 25, "madvise": 28, "shmdt": 67, "exit": 60,
               "exit_group": 231},
    "aarch64": {"shmdt": 197, "brk": 214, "munmap": 215, "mremap": 216, "mmap": 222, "madvise": 233, "exit": 93,
                "exit_group": 94},
}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


class _SyscallInfo(ctypes.Structure):
    # struct ptrace_syscall_info: op, pad, arch, instruction_pointer, stack_pointer, then for an entry nr.
    _fields_ = [("op", ctypes.c_uint8), ("pad", ctypes.c_uint8 * 3), ("arch", ctypes.c_uint32),
                ("instruction_pointer", ctypes.c_uint64), ("stack_pointer", ctypes.c_uint64),
                ("nr", ctypes.c_uint64), ("args", ctypes.c_uint64 * 6)]


def _ptrace(request, pid, addr=0, data=0):
    r = _libc.ptrace(request, pid, addr, data)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"ptrace({request:#x}, {pid}): {os.strerror(e)}")
    return r


def _anon_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            m = re.search(r"^Anonymous:\s+(\d+) kB", f.read(), re.M)
    except OSError:
        return 0
    return int(m.group(1)) if m else 0


def peak_anon_kib(cmd, env):
    """Runs cmd (stdout to a file, stderr to /dev/null) under ptrace; returns (peak anonymous RSS in KiB,
    stdout bytes). Raises SystemExit when it fails."""
    releasing = set(RELEASING[platform.machine()].values())
    out = tempfile.TemporaryFile()
    exe = shutil.which(cmd[0]) or cmd[0]
    pid = os.fork()
    if pid == 0:  # the child: traced from its exec on
        try:
            os.dup2(out.fileno(), 1)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            _ptrace(PTRACE_TRACEME, 0)
            os.execve(exe, cmd, env)
        finally:
            os._exit(127)
    peak, info, status = 0, _SyscallInfo(), None
    _, st = os.waitpid(pid, WALL)  # the SIGTRAP of the exec
    if not os.WIFSTOPPED(st):
        raise SystemExit(f"{' '.join(cmd)}: did not start under ptrace")
    _ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL)
    _ptrace(PTRACE_SYSCALL, pid)
    while True:
        tid, st = os.waitpid(-1, WALL)
        if os.WIFEXITED(st) or os.WIFSIGNALED(st):
            if tid == pid:
                status = st
                break
            continue
        sig, event = os.WSTOPSIG(st), st >> 16
        inject = 0
        if sig == signal.SIGTRAP | 0x80:
            _ptrace(PTRACE_GET_SYSCALL_INFO, tid, ctypes.sizeof(info), ctypes.addressof(info))
            if info.op == PTRACE_SYSCALL_INFO_ENTRY and info.nr in releasing:
                peak = max(peak, _anon_kib(pid))
        elif sig == signal.SIGTRAP and event:
            pass  # a new thread (traced from its first instruction; its SIGSTOP follows) or an exec
        elif sig != signal.SIGSTOP:
            inject = sig
        try:
            _ptrace(PTRACE_SYSCALL, tid, 0, inject)
        except OSError:
            pass  # the thread is gone (exit_group)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed under ptrace with {code}")
    out.seek(0)
    return peak, out.read()


def peak_heap_bytes(cmd, env):
    """Valgrind massif's peak heap (useful and allocator bytes) of cmd; None without valgrind."""
    valgrind = shutil.which("valgrind")
    if not valgrind:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "massif.out")
        r = subprocess.run([valgrind, "--tool=massif", "--peak-inaccuracy=0.0", f"--massif-out-file={out}", *cmd],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise SystemExit(f"valgrind massif {' '.join(cmd)} failed with {r.returncode}: {r.stderr[-2000:]}")
        snapshots = open(out).read().split("snapshot=")[1:]
        peak = [s for s in snapshots if "heap_tree=peak" in s] or snapshots
        return max(int(re.search(r"mem_heap_B=(\d+)", s).group(1)) + int(re.search(r"mem_heap_extra_B=(\d+)", s).group(1))
                   for s in peak)
