#!/usr/bin/env python3
"""Writes a copy of libstdc++ 12's <expected> that clang 14 compiles, for the fuzz build only.

libstdc++ declares each special member of std::expected twice, a defaulted trivial one and a
constrained non-trivial one, and relies on the compiler choosing by constraints (P0848). clang 14
does not implement P0848: it takes the defaulted one, finds it deleted for a T or E that is not
trivial (our Error holds a std::string) and refuses every `return fail(...)`. The copy keeps only the
non-trivial members, which are correct for every T and E (merely not trivial), and drops the
__cpp_concepts guard that clang 14's 201907L fails. g++ builds never see it.
usage: clang14_expected.py SYSTEM_EXPECTED OUTPUT"""
import os
import re
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    text = open(src).read()
    # The defaulted trivial versions of expected's copy and move constructors and destructor.
    for pat in (r'\n\s*expected\(const expected&\) = default;', r'\n\s*expected\(expected&&\) = default;',
                r'\n\s*constexpr ~expected\(\) = default;'):
        text, n = re.subn(pat, '', text)
        if n != 2:  # the primary template and the void specialisation
            sys.exit(f'{src}: expected 2 of {pat!r}, found {n}: not the header this was written for')
    # Their non-trivial twins, without the constraints that chose between the two.
    text, n = re.subn(r'(constexpr ~expected\(\))\s*requires \(!is_trivially_destructible_v<_Tp>\)\s*\|\| '
                      r'\(!is_trivially_destructible_v<_Er>\)', r'\1', text)
    text, m = re.subn(r'(constexpr ~expected\(\)) requires \(!is_trivially_destructible_v<_Er>\)', r'\1', text)
    text, k = re.subn(r'\n\s*&& \(!is_trivially_(copy|move)_constructible_v<_Tp>\n\s*\|\| '
                      r'!is_trivially_(copy|move)_constructible_v<_Er>\)', '', text)
    text, j = re.subn(r'\n\s*&& \(!is_trivially_(copy|move)_constructible_v<_Er>\)', '', text)
    if (n, m, k, j) != (1, 1, 2, 2):
        sys.exit(f'{src}: unexpected structure ({n}, {m}, {k}, {j}): not the header this was written for')
    text = text.replace('#if __cplusplus > 202002L && __cpp_concepts >= 202002L', '#if __cplusplus > 202002L', 1)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    # Rewritten only when it changes: every object depends on it, a new mtime rebuilds them all.
    if os.path.exists(out) and open(out).read() == text:
        return
    with open(out, 'w') as f:
        f.write(text)


if __name__ == '__main__':
    main()
