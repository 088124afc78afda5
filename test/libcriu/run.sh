#!/bin/bash
# libcriu (lib/c): wire_test.c against a fake criu (every option in its request field,
# notifications, each kind of answer), then against criu/criu libcriu_test.c built twice,
# linked with lib/c/libcriu.so.2 and with lib/c/libcriu.a, each run on the zdtm program
# test/bin/mem_anon_private; and lib/c/version.h checked against criu's interface version.
# Prints the programs' lines and "libcriu: N passed, N failed" (one count per program and
# build, one for version.h); exit 1 if one failed. Run as root, after `make` and `make -C test`.
# CRIU=PATH runs it against another criu. Output: test/out/libcriu/.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
criu=${CRIU:-$repo/criu/criu}
lib="$repo/lib/c"
program="$repo/test/bin/mem_anon_private"
for f in "$criu" "$lib/libcriu.so.2" "$lib/libcriu.a" "$program"; do
	[ -e "$f" ] || { echo "libcriu: no $f (run make and make -C test first)" >&2; exit 2; }
done
criu=$(cd "$(dirname "$criu")" && pwd)/$(basename "$criu")
out="$repo/test/out/libcriu"
rm -rf "$out"
mkdir -p "$out"

cflags=(-O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -I"$lib" -I"$repo/images")
gcc "${cflags[@]}" -o "$out/libcriu_test" "$here/libcriu_test.c" -L"$lib" -lcriu \
	-Wl,-rpath,"$lib" || exit 2
gcc "${cflags[@]}" -o "$out/libcriu_test-static" "$here/libcriu_test.c" "$lib/libcriu.a" \
	-lprotobuf-c || exit 2
# the shared build must run on lib/c's library, not on one installed on the machine
ldd "$out/libcriu_test" | grep -q "$lib/libcriu.so.2" ||
	{ echo "libcriu: $out/libcriu_test does not load $lib/libcriu.so.2" >&2; exit 2; }

passed=0 failed=0
# The library alone against a fake criu: options on the wire, notifications, answers.
gcc "${cflags[@]}" -o "$out/wire_test" "$here/wire_test.c" -L"$lib" -lcriu -Wl,-rpath,"$lib" \
	-lprotobuf-c -lpthread || exit 2
echo "libcriu: wire_test"
if timeout -k 10 60 "$out/wire_test"; then
	passed=$((passed + 1))
else
	echo "libcriu: wire_test: FAIL"
	failed=$((failed + 1))
fi
# lib/c/version.h (installed, read by libcriu's users) says the CRIU interface version
# criu implements (criu/include/version.h): the two must agree.
iface() { sed -n "s/^#define $2[[:space:]]*\([0-9]*\)$/\1/p" "$1"; }
lib_v="$(iface "$lib/version.h" CRIU_VERSION_MAJOR).$(iface "$lib/version.h" CRIU_VERSION_MINOR)"
criu_v="$(iface "$repo/criu/include/version.h" CRIU_IFACE_MAJOR).$(iface \
	"$repo/criu/include/version.h" CRIU_IFACE_MINOR)"
if [ "$lib_v" = "$criu_v" ] && [ "$lib_v" != . ]; then
	echo "ok version.h: lib/c says $lib_v, as criu/include/version.h"
	passed=$((passed + 1))
else
	echo "FAIL version.h: lib/c/version.h says $lib_v, criu/include/version.h $criu_v"
	failed=$((failed + 1))
fi
for t in libcriu_test libcriu_test-static; do
	mkdir -p "$out/$t.work"
	echo "libcriu: $t"
	# restores with no binary named start "criu": this one, as the kit's tests expect
	if PATH="$(dirname "$criu"):$PATH" timeout -k 10 300 "$out/$t" "$criu" "$program" \
		"$out/$t.work" </dev/null; then
		passed=$((passed + 1))
	else
		echo "libcriu: $t: FAIL (logs in $out/$t.work)"
		failed=$((failed + 1))
	fi
done
echo "libcriu: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
