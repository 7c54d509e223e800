#!/bin/sh
# README.md is for operators and stays short: the reference lives in the man pages,
# doc/how-it-works.md, tests/README.md and bench/README.md. Fails when it grows past the bound.
set -u
readme=$1
max=350
lines=$(wc -l < "$readme")
if [ "$lines" -le "$max" ]; then
	echo "ok 1 - README.md has $lines lines, at most $max"
else
	echo "not ok 1 - README.md has $lines lines, more than $max: move reference text to the man pages or doc/"
fi
echo "1..1"
[ "$lines" -le "$max" ]
