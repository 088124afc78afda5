#!/bin/sh
# Builds the Debian packages (debian/) with dpkg-buildpackage -us -uc -b from a copy of
# the tree (the files git knows, committed or not) in OUTDIR/src, so that the build's
# `make clean` and debian/ scratch files never touch the working tree; the .debs, .buildinfo
# and .changes land in OUTDIR. Needs the build dependencies (scripts/install-deps.sh).
# Usage: build-deb.sh OUTDIR
set -eu
[ $# -eq 1 ] || { echo "usage: build-deb.sh OUTDIR" >&2; exit 1; }
top="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$1"
out="$(cd "$1" && pwd)"
# safe.directory: CI may run this as root in a clone another user owns.
git() { command git -c safe.directory="$top" -C "$top" "$@"; }
if ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "build-deb.sh: $top is not a git checkout; run dpkg-buildpackage -us -uc -b there" >&2
	exit 1
fi
rm -rf "$out/src" "$out"/*.deb "$out"/*.buildinfo "$out"/*.changes
mkdir "$out/src"
# Tracked files and new ones not ignored; files deleted in the work tree are skipped.
(cd "$top" && git ls-files -z --cached --others --exclude-standard |
	xargs -0 sh -c 'for f; do [ ! -e "$f" ] || printf "%s\0" "$f"; done' sh |
	xargs -0 cp --parents -P -t "$out/src")
cd "$out/src"
dpkg-buildpackage -us -uc -b -j"${DEB_JOBS:-2}" >"$out/build.log" 2>&1 || {
	tail -40 "$out/build.log" >&2
	echo "build-deb.sh: dpkg-buildpackage failed; the whole log is $out/build.log" >&2
	exit 1
}
ls "$out"/*.deb
