#!/bin/sh
# Every man page renders at 80 columns without a single warning from man/groff.
set -u
status=0
if [ $# -eq 0 ]; then
	echo "not ok - no man pages were built (is scdoc installed?)"
	echo "1..1"
	exit 1
fi
for page in "$@"; do
	warnings=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
	if [ -n "$warnings" ]; then
		echo "not ok - $page"
		echo "$warnings" | sed 's/^/# /'
		status=1
	else
		echo "ok - $page"
	fi
done
echo "1..$#"
exit $status
