#!/bin/bash
# CRIU's own libcriu tests (../shared/upstream-criu/test/others/libcriu, relative to the
# repository), built in a scratch copy against this repository's lib/c (criu.h,
# libcriu.so.2) and run against criu/criu as the kit's run.sh runs them: each test as
# `setsid ./TEST CRIU DIR`, with criu's directory first in PATH (restores that name no
# binary start "criu") and the feature variables test_feature_check expects.
#
#   test/libcriu/kit.sh [TEST...]     # default: all, in the kit's order
#
# CRIU=PATH runs them against another criu (e.g. the kit's bin/criu, to compare).
# Prints one line per test and "libcriu kit: N passed, N failed, N skipped"; exits 1 if a
# test of test/libcriu/kit-pass.txt (the ones known to pass) did not pass; the others'
# failures are reported as known.
# Without the kit: one line, nothing run, exit 0. Output: test/out/libcriu-kit/.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kit="$repo/../shared/upstream-criu/test/others/libcriu"
if [ ! -f "$kit/lib.c" ]; then
	echo "libcriu kit: no upstream kit at $kit, nothing run"
	exit 0
fi
criu=${CRIU:-$repo/criu/criu}
lib="$repo/lib/c"
for f in "$criu" "$lib/libcriu.so.2" "$lib/criu.h" "$repo/images/rpc.pb-c.h"; do
	[ -e "$f" ] || { echo "libcriu kit: no $f (run make first)" >&2; exit 2; }
done
criu=$(cd "$(dirname "$criu")" && pwd)/$(basename "$criu")

work="$repo/test/out/libcriu-kit"
rm -rf "$work"
mkdir -p "$work/output"
cp "$kit"/*.c "$kit"/*.h "$work/"
cd "$work"

# The kit's order.
tests=(test_sub test_self test_notify test_rpc_config test_iters test_errno test_join_ns
	test_pre_dump test_check test_feature_check)
[ $# -gt 0 ] && tests=("$@")

# As the kit's run.sh: what this criu and kernel have, test_feature_check compares with.
# test_iters and test_pre_dump need dirty-page tracking (--track-mem): the kit skips them
# where the architecture lacks it; here they are skipped where the kernel does (no
# soft-dirty bits: CRIU's own criu refuses --track-mem then too).
dirty_tracking=no
if "$criu" check --feature mem_dirty_track >/dev/null 2>&1; then
	export CRIU_FEATURE_MEM_TRACK=1
	dirty_tracking=yes
fi
"$criu" check --feature uffd-noncoop >/dev/null 2>&1 && export CRIU_FEATURE_LAZY_PAGES=1
"$criu" check --feature pidfd_store >/dev/null 2>&1 && export CRIU_FEATURE_PIDFD_STORE=1

# The kit's compiler flags (-Werror alone), our header and library in place of CRIU's.
cc_test() {
	gcc -c "$1.c" -I"$lib" -I"$repo/images" -Werror -o "$1.o" &&
		gcc "$1.o" lib.o -L"$lib" -lcriu -o "$1"
}
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$(dirname "$criu"):$PATH"

passed=0 failed=0
if ! gcc -c lib.c -I"$lib" -I"$repo/images" -Werror -o lib.o 2>build.log; then
	echo "libcriu kit: lib.c does not build against lib/c/criu.h:"
	cat build.log
	exit 1
fi
skipped=0 regressions=
listed() { grep -qx "$1" "$here/kit-pass.txt"; }
for t in "${tests[@]}"; do
	if [ $dirty_tracking = no ] && { [ "$t" = test_iters ] || [ "$t" = test_pre_dump ]; }; then
		echo "libcriu kit: $t: SKIP (criu check --feature mem_dirty_track: no dirty-page" \
			"tracking on this kernel)"
		skipped=$((skipped + 1))
		continue
	fi
	if ! cc_test "$t" >"$t.build.log" 2>&1; then
		echo "libcriu kit: $t: FAIL (does not build against lib/c: $work/$t.build.log)"
		failed=$((failed + 1))
		listed "$t" && regressions="$regressions $t"
		continue
	fi
	dir="$work/output/$t"
	mkdir -p "$dir"
	# A hung test must not hang the suite; none of them takes more than seconds.
	if timeout -k 10 300 "$here/subreaper.py" "./$t" "$criu" "$dir" </dev/null >"$dir/test.log" 2>&1; then
		echo "libcriu kit: $t: PASS"
		passed=$((passed + 1))
	else
		status=$?
		if listed "$t"; then
			echo "libcriu kit: $t: FAIL (exit $status; $dir/test.log, dump.log, restore.log)"
			regressions="$regressions $t"
		else
			echo "libcriu kit: $t: FAIL, known (not in kit-pass.txt; exit $status, $dir)"
		fi
		tail -3 "$dir/test.log" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
done
echo "libcriu kit: $passed passed, $failed failed, $skipped skipped"
if [ -n "$regressions" ]; then
	echo "libcriu kit: listed in kit-pass.txt but did not pass:$regressions"
	exit 1
fi
