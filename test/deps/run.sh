#!/bin/bash
# The build's dependency check (scripts/check-deps.sh, run by the top Makefile): a goal
# whose tool or library is missing stops before building anything, with one line on stderr
# naming what is missing and scripts/install-deps.sh, and a non-zero exit status; the
# cleaning goals still run. Missing things are simulated (a PATH without the tool, a
# nonexistent PROTOC_C, a pkg-config that finds no module, a python3 that cannot start), so
# nothing on the machine is changed. Usage: test/deps/run.sh; exit status 1 if a check fails.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
make_bin=$(command -v make)
tmp=$(mktemp -d /tmp/deps-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0
fix="run scripts/install-deps.sh (as root)"

report() { # OK NAME [DETAIL]
	if [ "$1" = 0 ]; then
		echo "PASS: $2"; pass=$((pass + 1))
	else
		echo "FAIL: $2${3:+: $3}"; fail=$((fail + 1))
	fi
}

# make in the tree, as a fresh make would run: not as a sub-make of make test (whose
# MAKEFLAGS would pass its own variables and whose check would be taken as done).
run_make() { # ENV... -- MAKE ARGS...
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env -u CRIU_DEPS_CHECKED -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${envs[@]}" \
		"$make_bin" -C "$top" --no-print-directory "$@" >"$tmp/out" 2>"$tmp/err"
}

# One missing thing: exit 2 (make's), nothing on stdout (no recipe started), and stderr
# exactly one line saying what is missing and the command to run.
expect_stop() { # NAME WANT ENV... -- MAKE ARGS...
	local name=$1 want=$2 rc err
	shift 2
	run_make "$@"
	rc=$?
	err=$(cat "$tmp/err")
	if [ $rc -ne 2 ]; then
		report 1 "$name" "exit $rc, want 2"
	elif [ -s "$tmp/out" ]; then
		report 1 "$name" "make started something: $(head -1 "$tmp/out")"
	elif [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
		report 1 "$name" "$(wc -l <"$tmp/err") lines on stderr: $err"
	elif [[ "$err" != *": *** missing $want: $fix.  Stop." ]]; then
		report 1 "$name" "said: $err"
	else
		report 0 "$name"
	fi
}

# The precondition: this machine has everything (else the checks below test nothing).
out=$(env -u CRIU_DEPS_CHECKED "$top/scripts/check-deps.sh" all)
report $? "check-deps.sh all finds everything here" "$out"

# A PATH holding every command of /usr/bin (and /bin) but the ones named.
path_without() { # DIR COMMAND...
	local dir=$1 f
	shift
	mkdir -p "$dir"
	ln -s /usr/bin/* "$dir/"
	[ /bin -ef /usr/bin ] || ln -s /bin/* "$dir/" 2>/dev/null
	for f; do rm -f "$dir/$f"; done
}
path_without "$tmp/no-protoc-c" protoc-c
path_without "$tmp/no-clang" clang

expect_stop "make, protoc-c not on PATH" "protoc-c (protobuf-c-compiler)" \
	PATH="$tmp/no-protoc-c" -- all
expect_stop "make demo, PROTOC_C names no file" "/nonexistent/protoc-c (protobuf-c-compiler)" \
	-- demo PROTOC_C=/nonexistent/protoc-c
expect_stop "make test, clang not on PATH" "clang (clang)" PATH="$tmp/no-clang" -- test
expect_stop "make, no pkg-config module found" \
	"libprotobuf-c (libprotobuf-c-dev), libdrm_amdgpu (libdrm-dev)" \
	PKG_CONFIG_LIBDIR=/nonexistent PKG_CONFIG_PATH= -- all
expect_stop "make crit-test, python3 without its protobuf module" \
	"python3's google.protobuf (python3-protobuf)" PYTHONHOME=/nonexistent -- crit-test
expect_stop "make test, two things missing: both named, in one line" \
	"/nonexistent/protoc-c (protobuf-c-compiler), clang (clang)" \
	PATH="$tmp/no-clang" -- test PROTOC_C=/nonexistent/protoc-c

# A goal that needs nothing runs whatever is missing; with everything there, make goes on.
run_make -- -n clean PROTOC_C=/nonexistent/protoc-c
report $? "make -n clean runs without protoc-c" "$(cat "$tmp/err")"
run_make -- -n all
rc=$?
grep -q 'missing' "$tmp/err"
report $((rc != 0 || $? == 0)) "make -n all goes on when everything is there" "$(cat "$tmp/err")"

echo "deps: $pass passed, $fail failed"
[ $fail -eq 0 ]
