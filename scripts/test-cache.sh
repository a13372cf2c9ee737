#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Test of the cache's locking (scripts/lib.sh), in a scratch FERROCE_CACHE:
# an entry another run holds (cache_hold) is never pruned, a held complete
# entry does not keep cache_entry waiting, and a released old entry is
# pruned.  Prints TAP-like lines; exit status 0 only if all pass.
. "$(dirname "$0")/lib.sh"
set +e
FERROCE_CACHE=$(mktemp -d)
export FERROCE_CACHE
trap 'rm -rf "$FERROCE_CACHE"' EXIT
failed=0
t() {
	local name=$1
	shift
	if "$@"; then echo "ok - $name"; else echo "not ok - $name"; failed=1; fi
}

mkdir -p "$FERROCE_CACHE/roots"
for e in a b c; do
	mkdir "$FERROCE_CACHE/roots/trixie-$e"
	touch "$FERROCE_CACHE/roots/trixie-$e/.complete"
	sleep 0.05 # distinct mtimes: a oldest, c newest
done
touch "$FERROCE_CACHE/roots/trixie-c"

# Another "run" holds the oldest entry for a while.
(cache_hold "$FERROCE_CACHE/roots/trixie-a" && echo held >"$FERROCE_CACHE/held" && sleep 30) &
holder=$!
for _ in $(seq 50); do [ -e "$FERROCE_CACHE/held" ] && break; sleep 0.1; done

prune_cache 'roots/trixie-*' 1 2>/dev/null
t "prune keeps the newest entry" test -d "$FERROCE_CACHE/roots/trixie-c"
t "prune deletes an old entry nobody holds" test ! -e "$FERROCE_CACHE/roots/trixie-b"
t "prune keeps an old entry another run holds" test -e "$FERROCE_CACHE/roots/trixie-a/.complete"

never_built() { echo "rebuilt a complete entry" >&2; return 1; }
out=$(timeout 10 bash -c '. "$1/scripts/lib.sh"; cache_entry roots/trixie-a never_built' x "$FERROCE_TOP" 2>&1)
t "cache_entry returns a held complete entry at once ($out)" test "$out" = "$FERROCE_CACHE/roots/trixie-a"

kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
prune_cache 'roots/trixie-*' 1 2>/dev/null
t "once released, the old entry is pruned" test ! -e "$FERROCE_CACHE/roots/trixie-a"
exit "$failed"
