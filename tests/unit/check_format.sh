#!/bin/sh
# Issue 35, item 7: every C++ file of the project is as .clang-format says (Debian's clang-format-14:
# another version formats some constructs differently). Prints one TAP line per file that differs,
# with clang-format's diff, and one for the whole. Fails loudly when clang-format-14 is missing
# (make check installs it).
set -u
SRC=$1
if ! command -v clang-format-14 >/dev/null; then
	echo "1..1"
	echo "not ok 1 - clang-format-14 is missing (Debian package clang-format-14: make check installs it)"
	exit 1
fi
cd "$SRC" || exit 1
# The files as git knows them in a checkout; every C++ file under the source directories otherwise
# (a tarball, the Debian package's build).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	files=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c')
else
	files=$(find fuzz generator host consumers lib setup license-reload tests -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.c' | sort)
fi
n=0
bad=0
out=""
for f in $files; do
	n=$((n + 1))
	if ! d=$(clang-format-14 --style=file "$f" | diff -u "$f" -); then
		bad=$((bad + 1))
		out="$out$(printf 'not ok - %s is not as .clang-format says (clang-format-14 -i %s)\n%s' "$f" "$f" "$(echo "$d" | sed 's/^/# /')")
"
	fi
done
echo "1..1"
if [ "$bad" = 0 ]; then
	echo "ok 1 - $n files as .clang-format says"
	exit 0
fi
printf '%s' "$out" | sed 's/^not ok - /# not ok - /'
echo "not ok 1 - $bad of $n files are not as .clang-format says"
exit 1
