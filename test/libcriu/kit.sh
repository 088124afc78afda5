#!/bin/bash
# CRIU's own libcriu tests (../shared/upstream-criu/test/others/libcriu, relative to the
# repository), built in a scratch copy against this repository's lib/c (criu.h,
# libcriu.so.2) and run against criu/criu as the kit's run.sh runs them: each test as
# `setsid ./TEST CRIU DIR`, with criu's directory first in PATH (restores that name no
# binary start "criu") and the feature variables test_feature_check expects.
#
#   test/libcriu/kit.sh [TEST...]     # default: all, in the kit's order
#
# Then the same tests built against CRIU's own criu.h and libcriu (Debian's criu package
# has them, 3.17) run on lib/c's libcriu.so.2: binary compatibility (one line and nothing
# run where they are not installed; tests of newer calls skipped).
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
build_ours() {
	gcc -c "$1.c" -I"$lib" -I"$repo/images" -Werror -o "$1.o" &&
		gcc "$1.o" lib.o -L"$lib" -lcriu -o "$1"
}
# Or CRIU's own header and library (Debian's criu package has them): the binary then runs
# on lib/c's libcriu.so.2 all the same (LD_LIBRARY_PATH), which is what a soname promises.
build_criu() {
	gcc -c "$1.c" -I"$criu_include" -Werror -o "$1.o" && gcc "$1.o" lib.o -lcriu -o "$1"
}
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$(dirname "$criu"):$PATH"

passed=0 failed=0 skipped=0 regressions=
listed() { grep -qx "$1" "$here/kit-pass.txt"; }

# run_tests LABEL BUILD DIR: each test built with BUILD in DIR (a copy of the kit) and run.
run_tests() {
	local label=$1 build=$2 t dir status
	cd "$3" || exit 2
	if ! gcc -c lib.c -I"${4:-$lib}" -I"$repo/images" -Werror -o lib.o 2>build.log; then
		echo "$label: lib.c does not build:"
		cat build.log
		failed=$((failed + 1))
		return
	fi
	for t in "${tests[@]}"; do
		if [ $dirty_tracking = no ] && { [ "$t" = test_iters ] || [ "$t" = test_pre_dump ]; }; then
			echo "$label: $t: SKIP (criu check --feature mem_dirty_track: no dirty-page" \
				"tracking on this kernel)"
			skipped=$((skipped + 1))
			continue
		fi
		if ! $build "$t" >"$t.build.log" 2>&1; then
			if [ "$build" = build_criu ]; then
				# tests of calls newer than the installed CRIU's header
				echo "$label: $t: SKIP (does not build against $criu_include)"
				skipped=$((skipped + 1))
				continue
			fi
			echo "$label: $t: FAIL (does not build against lib/c: $3/$t.build.log)"
			failed=$((failed + 1))
			listed "$t" && regressions="$regressions $t"
			continue
		fi
		if ! ldd "./$t" | grep -q "libcriu.so.2 => $lib/libcriu.so.2 "; then
			echo "$label: $t: FAIL (does not load $lib/libcriu.so.2)"
			failed=$((failed + 1))
			regressions="$regressions $t"
			continue
		fi
		dir="$3/output/$t"
		mkdir -p "$dir"
		# A hung test must not hang the suite; none of them takes more than seconds.
		timeout -k 10 300 "$here/subreaper.py" "./$t" "$criu" "$dir" </dev/null \
			>"$dir/test.log" 2>&1
		status=$?
		if [ $status -eq 0 ]; then
			echo "$label: $t: PASS"
			passed=$((passed + 1))
			continue
		fi
		if listed "$t"; then
			echo "$label: $t: FAIL (exit $status; $dir/test.log, dump.log, restore.log)"
			regressions="$regressions $t"
		else
			echo "$label: $t: FAIL, known (not in kit-pass.txt; exit $status, $dir)"
		fi
		tail -3 "$dir/test.log" | sed 's/^/    /'
		failed=$((failed + 1))
	done
}

run_tests "libcriu kit" build_ours "$work"

# CRIU's header where Debian's criu package installed it (not ours: libcriu-cleanroom-dev
# replaces those files).
criu_include=/usr/include/criu
if dpkg -S "$criu_include/criu.h" 2>/dev/null | grep -q '^criu:'; then
	mkdir -p "$work/abi/output"
	cp "$kit"/*.c "$kit"/*.h "$work/abi/"
	run_tests "libcriu kit, built on CRIU's libcriu" build_criu "$work/abi" "$criu_include"
else
	echo "libcriu kit, built on CRIU's libcriu: no CRIU criu.h (Debian's criu) in" \
		"$criu_include, nothing run"
fi

echo "libcriu kit: $passed passed, $failed failed, $skipped skipped"
if [ -n "$regressions" ]; then
	echo "libcriu kit: listed in kit-pass.txt but did not pass:$regressions"
	exit 1
fi
