#!/usr/bin/env python3
"""Runs the libFuzzer targets of a -Dfuzzing=true build (fuzz/README.md), each for SECONDS, from its
checked-in corpus and regression inputs, the build's binary seeds and (when fetched) the ELF files of
Debian's NVIDIA packages. A crash, leak, timeout, RSS overrun or violated contract fails the run and
prints the input as a reproducer (escaped and hex). New inputs go to a scratch directory, never into
the tree.
usage: run-fuzzers.py BUILD SECONDS [TARGET...]
       run-fuzzers.py --expect-failure BUILD SECONDS TARGET   (succeeds only when TARGET fails)
       run-fuzzers.py --minimise BUILD [TARGET...]   (each corpus merged with -merge=1 into a fresh
           directory: prints the seeds the merge drops, fails when one is not in KEPT_UNMERGED)"""
import concurrent.futures
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
# target: (dictionary, RSS bound in MiB). The bounds are what each parser may cost under ASan with
# libFuzzer's own corpus in memory; a parse that needs more is a defect (an input it failed to cap).
TARGETS = {
    'cdi_spec': ('yaml', 1024),
    'config': ('yaml', 512),
    'device_plugin_spec': ('json', 1024),
    'discovery_memo': ('json', 512),
    'elf': ('elf', 512),
    'gpu_information': ('proc', 512),
    'graphics_config': ('json', 512),
    'gridd_journal': ('gridd', 512),
    'hook_help': ('hook', 512),
    'imex': ('proc', 512),
    'license_state_file': ('license', 512),
    'manifest': ('json', 512),
    'mig': ('proc', 512),
    'mountinfo': ('mountinfo', 512),
    'pe': ('pe', 512),
    'proc_devices': ('proc', 512),
    'spec_marker': ('spec', 512),
    'status_json': ('json', 512),
    'toml': ('toml', 512),
}
# Seeds a merge drops that stay in the tree on purpose (fuzz/README.md, "Inputs").
KEPT_UNMERGED = {
    # libFuzzer runs the empty input itself, so a merge never keeps it; the g++ replay runs only
    # files, and an empty configuration file (defaults) is a case of its own.
    'config/empty.yaml',
}
FOUND_BY_ASAN = set()  # the targets whose failure was an ASan report (--expect-failure wants one)
SEEDS_OF = {'mountinfo-broken': 'mountinfo'}  # a broken build of a parser fuzzes from its seeds


def reproducer(path, say):
    data = open(path, 'rb').read()
    esc = ''.join(chr(b) if 32 <= b < 127 and b != 0x5c else '\\n' if b == 10 else '\\\\' if b == 0x5c else '\\x%02x' % b
                  for b in data[:4096])
    say(f'  reproducer ({len(data)} bytes), escaped: "{esc}"{" (cut)" if len(data) > 4096 else ""}')
    say('  as hex (commit it as fuzz/regressions/<target>/<name>.hex):')
    for i in range(0, min(len(data), 4096), 32):
        say('    ' + data[i:i + 32].hex())


def run(build, seconds, name, scratch):
    """Runs one target; returns whether it passed and what to print of it (the targets run side by
    side, so each one's lines are printed together, in the order the targets were named)."""
    lines = []
    try:
        ok = run_target(build, seconds, name, scratch, lines.append)
    except Exception:  # said with the target's other lines, and the other targets' reports still printed
        lines.append(f'fuzz-{name}: FAILED (the runner itself)\n' + traceback.format_exc())
        ok = False
    return ok, '\n'.join(lines)


def run_target(build, seconds, name, scratch, say):
    base = SEEDS_OF.get(name, name)
    dictionary, rss = TARGETS[base]
    binary = os.path.join(build, 'fuzz', 'fuzz-' + name)
    work = os.path.join(scratch, name)
    new = os.path.join(work, 'new')
    os.makedirs(new)
    corpora = [new]
    for d in (os.path.join(HERE, 'corpus', base), os.path.join(HERE, 'regressions', base),
              os.path.join(build, 'fuzz', 'binary-seeds', base), os.path.join(build, 'nvidia-debs-seeds', base)):
        if os.path.isdir(d):
            if d.startswith(os.path.join(HERE, 'regressions')):  # .hex inputs are decoded for libFuzzer
                dec = os.path.join(work, 'regressions')
                os.makedirs(dec)
                for f in sorted(os.listdir(d)):
                    text = open(os.path.join(d, f), 'rb').read()
                    if f.endswith('.hex'):
                        text = bytes.fromhex(''.join(l for l in text.decode().splitlines() if not l.startswith('#')))
                    open(os.path.join(dec, f), 'wb').write(text)
                d = dec
            corpora.append(d)
    cmd = [binary, f'-max_total_time={seconds}', f'-rss_limit_mb={rss}', f'-malloc_limit_mb={rss}', '-timeout=10',
           f'-dict={os.path.join(HERE, "dict", dictionary + ".dict")}', f'-artifact_prefix={work}/',
           '-print_final_stats=1', '-close_fd_mask=1'] + corpora
    log = os.path.join(work, 'log')
    with open(log, 'w') as out:
        rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT).returncode
    text = open(log, errors='replace').read()
    execs = [l for l in text.splitlines() if l.startswith('stat::number_of_executed_units')]
    rss_line = [l for l in text.splitlines() if l.startswith('stat::peak_rss_mb')]
    stats = (execs[0].split(':')[-1].strip() if execs else '?') + ' runs, peak RSS ' + \
        (rss_line[0].split(':')[-1].strip() if rss_line else '?') + f' MiB of {rss}'
    if rc == 0:
        say(f'fuzz-{name}: ok, {seconds} s, {stats}')
        return True
    if 'ERROR: AddressSanitizer' in text:
        FOUND_BY_ASAN.add(name)
    say(f'fuzz-{name}: FAILED (exit {rc}), {stats}')
    lines = text.splitlines()
    first = next((i for i, l in enumerate(lines) if 'ERROR:' in l or 'runtime error:' in l or 'contract violated' in l), max(0, len(lines) - 40))
    say('\n'.join('  ' + l for l in lines[max(0, first - 2):first + 30]))
    keep = os.path.join(build, 'fuzz-artifacts', name)
    for f in sorted(os.listdir(work)):
        if f.split('-')[0] in ('crash', 'leak', 'timeout', 'oom', 'slow'):
            reproducer(os.path.join(work, f), say)
            os.makedirs(keep, exist_ok=True)
            shutil.copy(os.path.join(work, f), keep)
            say(f'  kept as {os.path.join(keep, f)}; replay: {binary} {os.path.join(keep, f)}')
    return False


def minimise(build, names):
    """Merges each corpus into a fresh directory and reports, by content, what it keeps and drops."""
    ok = True
    scratch = tempfile.mkdtemp(prefix='unbounded-fuzz-merge-')
    try:
        for name in names:
            corpus = os.path.join(HERE, 'corpus', name)
            merged = os.path.join(scratch, name)
            os.makedirs(merged)
            _, rss = TARGETS[name]
            subprocess.run([os.path.join(build, 'fuzz', 'fuzz-' + name), '-merge=1', f'-rss_limit_mb={rss}', '-timeout=10',
                            merged, corpus], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            kept = {hashlib.sha1(open(os.path.join(merged, f), 'rb').read()).hexdigest() for f in os.listdir(merged)}
            seeds = sorted(os.listdir(corpus))
            dropped = [f for f in seeds if hashlib.sha1(open(os.path.join(corpus, f), 'rb').read()).hexdigest() not in kept]
            size = sum(os.path.getsize(os.path.join(corpus, f)) for f in seeds)
            print(f'{name}: {len(seeds)} seeds ({size} bytes), the merge keeps {len(seeds) - len(dropped)}' +
                  (', drops ' + ' '.join(dropped) if dropped else ''))
            for f in dropped:
                if f'{name}/{f}' not in KEPT_UNMERGED:
                    print(f'  {name}/{f} adds no coverage: remove it, or list it in KEPT_UNMERGED saying why')
                    ok = False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if ok else 1


def main():
    args = sys.argv[1:]
    if args and args[0] == '--minimise':
        if len(args) < 2:
            sys.exit(__doc__)
        return minimise(args[1], args[2:] or sorted(os.listdir(os.path.join(HERE, 'corpus'))))
    expect_failure = bool(args) and args[0] == '--expect-failure'
    if expect_failure:
        args = args[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    build, seconds, names = args[0], int(args[1]), args[2:] or sorted(TARGETS)
    scratch = tempfile.mkdtemp(prefix='unbounded-fuzz-run-')
    try:
        # One target a core: each is one process that runs for its SECONDS whatever the load.
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
            failed = []
            for name, (ok, report) in zip(names, pool.map(lambda n: run(build, seconds, n, scratch), names)):
                print(report, flush=True)
                if not ok:
                    failed.append(name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if expect_failure:
        if failed and names[0] in FOUND_BY_ASAN:
            print(f'fuzz-{names[0]} failed as it must: the tier finds the bounds bug within {seconds} s')
            return 0
        print(f'fuzz-{names[0]} did not fail with an ASan report within {seconds} s: the tier missed a known bounds bug')
        return 1
    if failed:
        print('failed: ' + ' '.join(failed))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
