# Sourced by tests/debian/fetch-*.sh: apt with a private state and sources list in $DEST/.apt, so
# that the machine's apt configuration is neither needed nor changed. The caller sets DEST (made
# absolute here), MIRROR and SOURCES (sources.list lines, where @MIRROR@ and @KEY@ stand for the
# mirror and Debian's archive key) and ARCHES ("amd64" or "amd64 i386"). Returns 0 at once with
# DONE=1 when $DEST/.complete already holds WANT, the caller's checksum of what it fetches.
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
DONE=0
if [ "$(cat "$DEST/.complete" 2>/dev/null)" = "$WANT" ]; then
	DONE=1
	return 0
fi
APTDIR="$DEST/.apt"
rm -rf "$APTDIR"
mkdir -p "$APTDIR/lists/partial" "$APTDIR/cache/archives/partial"
printf '%s\n' "$SOURCES" | sed -e "s|@MIRROR@|$MIRROR|g" -e "s|@KEY@|/usr/share/keyrings/debian-archive-keyring.gpg|g" > "$APTDIR/sources.list"
APTOPTS="-o Dir::Etc::SourceList=$APTDIR/sources.list -o Dir::Etc::SourceParts=/dev/null \
	-o Dir::State::Lists=$APTDIR/lists -o Dir::Cache=$APTDIR/cache -o Acquire::Retries=3"
for arch in $ARCHES; do
	APTOPTS="$APTOPTS -o APT::Architectures::=$arch"
done

updated=false
for try in 1 2 3; do
	if apt-get $APTOPTS update -q; then
		updated=true
		break
	fi
	echo "apt-get update failed (try $try of 3), trying again" >&2
	sleep 5
done
# A failed update may still have fetched every index the downloads need; they say if not.
$updated || echo "apt-get update did not succeed for every index; downloading what the indexes allow" >&2
