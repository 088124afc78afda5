#!/bin/bash
# Upstream CRIU's own RPC clients (the kit's test/others/rpc: C and Python clients of
# `criu service` and `criu swrk`) against criu/criu, run as upstream runs them: in a scratch
# copy, criu/criu copied beside them setuid root, the service and clients as uid 1000
# (setpriv, where the kit's Makefile uses sudo), all in a
# pid namespace of their own (unshare -pf --mount-proc), whose init reaps what the tests leave.
# Each of upstream's steps is run and reported on its own (upstream's run.sh stops at the
# first failure):
#   test-c, test-py   a client dumps itself over the service, `criu restore` brings it back
#   restore-loop      `criu dump` of a looping program, an RPC RESTORE of it
#   ps_test           PAGE_SERVER (port 0), then a self dump to it
#   errno             cr_errno and cr_errmsg of failing requests
#   version           VERSION over swrk
#   config_file       configuration files over swrk (CRIU_CONFIG_FILE, config_file)
# Prints one line per step and "rpc kit: pass=N fail=N"; exit 1 when a step fails. Upstream
# criu itself passes test-c, test-py, restore-loop, ps_test and version here (the kit's
# README); this criu passes all seven, and each is required. One line and exit 0 without
# the kit. Run as root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
kit="$repo/../shared/upstream-criu"
if [ ! -d "$kit/test/others/rpc" ]; then
	echo "rpc kit: no upstream kit at $kit, nothing run"
	exit 0
fi
criu=${CRIU:-$repo/criu/criu}
[ -x "$criu" ] || { echo "kit.sh: no $criu (run make first)" >&2; exit 2; }

if [ "${1:-}" != --inside ]; then
	work=$(mktemp -d /tmp/rpc-kit.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	mkdir -p "$work/test/others" "$work/images" "$work/criu"
	cp -r "$kit/test/others/rpc" "$kit/test/others/loop.c" "$kit/test/others/Makefile" \
		"$work/test/others/"
	# The clients are built from CRIU's own schema, as clients in the wild are.
	cp "$kit/images/rpc.proto" "$work/images/"
	rm -f "$work/test/others/rpc/rpc.proto"
	ln -s ../../../images/rpc.proto "$work/test/others/rpc/rpc.proto"
	cp "$criu" "$work/criu/criu"
	chmod -R u+w,a+rX "$work"
	unshare -pf --mount-proc "$0" --inside "$work"
	exit $?
fi

work=$2
cd "$work/test/others/rpc" || exit 2
# As the kit's Makefile runs them (sudo -u '#1000'), by number: no such user is needed.
as_user() { setpriv --reuid=1000 --regid=1000 --clear-groups -- "$@"; }
make -s all >build.out 2>&1 && make -s -C .. loop >>build.out 2>&1 ||
	{ echo "rpc kit: the clients do not build:"; cat build.out; exit 2; }
mkdir -p build/{imgs_errno,imgs_ps,imgs_c,imgs_loop,imgs_py}
chmod -R a+rwx build
for f in imgs_errno/criu.log imgs_ps/page-server.log imgs_ps/dump.log imgs_c/restore-c.log \
	imgs_loop/criu.log imgs_loop/dump-loop.log imgs_py/criu.log imgs_py/restore-py.log \
	imgs_c/criu.log service.log; do
	touch "build/$f"
	chmod 666 "build/$f"
done
as_user mkfifo build/status
as_user bash -c "exec 200<>build/status; ./criu service -v4 -W build --address criu_service.socket \
	-d --pidfile pidfile -o service.log --status-fd 200; python3 read.py build/status" ||
	{ echo "rpc kit: criu service did not start"; cat build/service.log; exit 1; }

pass=0
fail=0
failed_required=
step() {
	local name=$1 required=$2
	shift 2
	if "$@" >"build/step-$name.out" 2>&1; then
		echo "PASS $name"
		pass=$((pass + 1))
	else
		echo "FAIL $name: $(tail -n 3 "build/step-$name.out" | tr '\n' ' ')"
		fail=$((fail + 1))
		[ "$required" = yes ] && failed_required="$failed_required $name"
	fi
}
test_c='setsid ./test-c build/criu_service.socket build/imgs_c </dev/null &&
	./criu restore -v4 -o restore-c.log -D build/imgs_c'
test_py='setsid ./test.py build/criu_service.socket build/imgs_py </dev/null &&
	./criu restore -v4 -o restore-py.log -D build/imgs_py'
restore_loop='p=$(../loop) || exit 1
	./criu dump -j -v4 -o dump-loop.log --network-lock skip -D build/imgs_loop -t "$p" &&
	./restore-loop.py build/criu_service.socket build/imgs_loop
	ret=$?
	kill -TERM "$p"
	exit $ret'
step test-c yes as_user bash -c "$test_c"
step test-py yes as_user bash -c "$test_py"
step restore-loop yes as_user bash -c "$restore_loop"
step ps_test yes as_user setsid ./ps_test.py build/criu_service.socket build/imgs_ps
step errno yes as_user setsid ./errno.py build/criu_service.socket build/imgs_errno
step version yes as_user ./version.py
step config_file yes ./config_file.py build
[ -n "${KEEP:-}" ] && cp -r build "$KEEP"
kill -TERM "$(cat build/pidfile)"
echo "rpc kit: pass=$pass fail=$fail"
if [ -n "$failed_required" ]; then
	echo "rpc kit: failed where upstream criu passes:$failed_required"
	exit 1
fi
exit 0
