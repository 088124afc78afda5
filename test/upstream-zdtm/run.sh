#!/bin/bash
# Runs upstream CRIU's zdtm suite (../shared/upstream-criu, relative to the repository)
# against this repository's criu/criu.
#
#   test/upstream-zdtm/run.sh FLAVOUR [zdtm.py run options...]          # whole flavour
#   test/upstream-zdtm/run.sh FLAVOUR --list [FILE] [zdtm.py options]   # only the listed tests
#
# FLAVOUR: h, ns or uns. Whole-flavour mode prints run-zdtm's line
# "zdtm FLAVOUR: pass=N fail=N skip=N". --list runs the tests named in FILE (default
# test/upstream-zdtm/pass-FLAVOUR.txt; one zdtm/static/NAME a line, '#' comments) and exits 1
# naming each listed test that did not pass (failed, skipped or missing from the report).
# Extra options go to `zdtm.py run` (default -p 2). Run as root.
#
# The kit is read-only and some of its files are symlinks flattened to plain files holding the
# target's name (e.g. test/zdtm/static/file_lease01.desc), which crash zdtm.py; they are
# repaired in the work copy ($ZDTM_WORK, default /srv/zdtm-work), which is prepared and built
# once (as run-zdtm does) and then reused by run-zdtm.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kit="$repo/../shared/upstream-criu"
flav=${1:?usage: run.sh FLAVOUR [--list [FILE]] [zdtm.py run options]}; shift
list=
if [ "${1:-}" = --list ]; then
	shift
	if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then list=$1; shift; else list="$here/pass-$flav.txt"; fi
fi
if [ ! -x "$kit/run-zdtm" ]; then
	echo "zdtm $flav: no upstream kit at $kit, nothing run"
	exit 0
fi
kit=$(cd "$kit" && pwd)
criu="$repo/criu/criu"
[ -x "$criu" ] || { echo "run.sh: no $criu (run make first)" >&2; exit 2; }
work=${ZDTM_WORK:-/srv/zdtm-work}
export ZDTM_WORK=$work

# Replace every flattened symlink in the copy: a small file whose whole content is one
# relative path (no blanks) naming an existing file beside it becomes a symlink to it.
repair_links() {
	local n=0 f c d
	while IFS= read -r -d '' f; do
		c=$(cat "$f" 2>/dev/null) || continue
		case "$c" in ""|/*|*[[:space:]]*) continue ;; esac
		d=$(dirname "$f")
		[ -f "$d/$c" ] || continue
		ln -sfn "$c" "$f" && n=$((n + 1))
	done < <(find "$1" -type f -size -256c -print0)
	echo "$n"
}

stamp="$work/.repaired"
if [ ! -f "$work/.built" ] || [ ! -f "$stamp" ] || ! cmp -s "$kit/README.md" "$stamp"; then
	"$kit/install-deps" >/dev/null || { echo "run.sh: cannot install the kit's dependencies" >&2; exit 2; }
	rm -rf "$work"; mkdir -p "$work" || exit 2
	cp -a "$kit/." "$work/" && chmod -R u+w "$work" && chmod 755 "$(dirname "$work")" "$work" || exit 2
	n=$(repair_links "$work")
	echo "run.sh: repaired $n flattened symlinks in $work"
	make -k -C "$work/test/zdtm" -j"$(nproc)" >"$work/build.log" 2>&1
	ls "$work/test/zdtm/static/env00" >/dev/null 2>&1 || { echo "run.sh: build failed, see $work/build.log" >&2; exit 2; }
	touch "$work/.built"
	cp "$kit/README.md" "$stamp"
fi

# Test a snapshot of the binary: a rebuild in the tree during a run does not change it midway.
mkdir -p "$work/criu-under-test" && cp "$criu" "$work/criu-under-test/criu.new" &&
	mv -f "$work/criu-under-test/criu.new" "$work/criu-under-test/criu" || exit 2
criu="$work/criu-under-test/criu"

if [ -z "$list" ]; then
	exec "$work/run-zdtm" "$criu" "$flav" "$@"
fi

[ -f "$list" ] || { echo "run.sh: no list $list" >&2; exit 2; }
mapfile -t tests < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$list" | grep -v '^$')
[ ${#tests[@]} -gt 0 ] || { echo "zdtm $flav: $list names no test"; exit 0; }
args=()
for t in "${tests[@]}"; do args+=(-t "$t"); done
[ $# -gt 0 ] || set -- -p 2
start=$(date +%s)
"$work/run-zdtm" "$criu" "$flav" "${args[@]}" "$@"
tap="$work/report-$flav/criu-testreport.tap"
bad=()
for t in "${tests[@]}"; do
	line=$(grep -E "^(not )?ok [0-9]+ - $t( |\$)" "$tap" 2>/dev/null | head -1)
	case "$line" in
	"") bad+=("$t (not in the report)") ;;
	not*) bad+=("$t (failed)") ;;
	*"# SKIP"*) bad+=("$t (skipped)") ;;
	esac
done
echo "zdtm $flav list: ${#tests[@]} listed, $(( ${#tests[@]} - ${#bad[@]} )) passed, ${#bad[@]} did not, in $(( $(date +%s) - start )) s"
[ ${#bad[@]} -eq 0 ] && exit 0
for b in "${bad[@]}"; do echo "  FAIL $b"; done
echo "  logs: $work/report-$flav, $work/run-$flav.log, $work/test/dump/<test>/"
exit 1
