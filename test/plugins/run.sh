#!/bin/bash
# End-to-end tests of the plugin framework (issue 3 item 6) with the test plugins:
# hook order and processes, fdstore from init to the task, POST_FORKING overlapping the
# task's RESTORE_EXT_FILE, RESUME_DEVICES_LATE before the task runs, -ENOTSUP chaining,
# a failing hook at each stage, a missing plugin. Prints "N passed, N failed".
# Usage (root, after make and make -C test/plugins): test/plugins/run.sh [path/to/criu]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
CRIU=${1:-$HERE/../../criu/criu}
OUT=$HERE/out
LIB=$HERE/lib
passed=0 failed=0 pid=0

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }

# Up to 10 s for a pid to disappear (a killed task must be reaped before restoring it).
wait_gone() {
	for _ in $(seq 100); do [ -d "/proc/$1" ] || return 0; sleep 0.1; done
	return 1
}

wait_file() {
	for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	return 1
}

# Alive, not stopped, not traced: what a failed dump must leave behind.
untouched() {
	local state tracer
	state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)
	tracer=$(awk '/^TracerPid:/ {print $2}' "/proc/$1/status" 2>/dev/null)
	[ "$state" = R ] || [ "$state" = S ] && [ "$tracer" = 0 ]
}

# Line number of the first trace line matching $1, or 0.
line_of() { grep -n -m1 -- "$1" "$OUT/trace" | cut -d: -f1 || true; }

in_order() {
	local prev=0 n
	for pat in "$@"; do
		n=$(line_of "$pat")
		[ -n "$n" ] && [ "$n" -gt "$prev" ] || return 1
		prev=$n
	done
}

dump() { "$CRIU" dump -t "$pid" -D "$OUT/img" -L "$LIB" -v4 -o dump.log >"$OUT/dump.err" 2>&1; }
restore() {
	"$CRIU" restore -d -D "$OUT/img" -L "${1:-$LIB}" -v4 -o restore.log >"$OUT/restore.err" 2>&1
}

rm -rf "$OUT" && mkdir -p "$OUT/img"
export CRIU_TEST_TRACE=$OUT/trace CRIU_TESTDEV_ADDRS=$OUT/addrs
setsid "$HERE/plugin_dev" "$OUT/addrs" "$OUT/result" </dev/null >/dev/null 2>&1 &
if ! wait_file "$OUT/addrs"; then
	echo "plugin_dev did not start"; exit 1
fi
pid=$(cut -d' ' -f1 "$OUT/addrs")
trap '[ -d /proc/$pid ] && kill -9 $pid' EXIT

# A failing hook at each dump stage: dump fails naming the plugin, the task is untouched.
for hook in INIT PAUSE_DEVICES CHECKPOINT_DEVICES DUMP_EXT_FILE DUMP_DEVICES_LATE; do
	if CRIU_TEST_FAIL=$hook dump; then
		fail "dump_fails_at_$hook" "dump succeeded"
	elif ! grep -q test_fail "$OUT/dump.err"; then
		fail "dump_fails_at_$hook" "error does not name the plugin: $(head -c 300 "$OUT/dump.err")"
	elif ! untouched "$pid"; then
		fail "dump_fails_at_$hook" "task $pid not running untraced afterwards"
	else
		pass "dump_fails_at_$hook"
	fi
done

rm -f "$OUT/trace"
if ! dump; then
	fail dump "$(tail -3 "$OUT/dump.err")"
	echo "$passed passed, $failed failed"; exit 1
fi
pass dump
criu_pid=$(grep -m1 "INIT stage=0" "$OUT/trace" | sed 's/pid=\([0-9]*\).*/\1/')
if in_order "INIT stage=0" "PAUSE_DEVICES arg=$pid" "CHECKPOINT_DEVICES arg=$pid" \
	"DUMP_EXT_FILE" "DUMP_DEVICES_LATE arg=$pid" "EXIT stage=0 ret=0" &&
	! grep -v "^pid=$criu_pid " "$OUT/trace" | grep -q .; then
	pass dump_hook_order_all_in_criu
else
	fail dump_hook_order_all_in_criu "$(cat "$OUT/trace")"
fi
wait_gone "$pid" || fail dump_kills "task $pid still there"

# The inventory names testdev: restoring without it is refused, and nothing is left.
if restore "$HERE/lib-notestdev" || ! grep -q testdev "$OUT/restore.err"; then
	fail missing_plugin_refused "$(head -c 300 "$OUT/restore.err")"
elif ! wait_gone "$pid"; then
	fail missing_plugin_refused "task $pid left behind"
else
	pass missing_plugin_refused
fi

# A failing hook at each restore stage: restore fails naming the plugin, nothing is left.
for hook in INIT RESTORE_INIT POST_FORKING RESTORE_EXT_FILE RESUME_DEVICES_LATE; do
	if CRIU_TEST_FAIL=$hook restore; then
		fail "restore_fails_at_$hook" "restore succeeded"
	elif ! grep -q test_fail "$OUT/restore.err"; then
		fail "restore_fails_at_$hook" "error does not name the plugin: $(head -c 300 "$OUT/restore.err")"
	elif ! wait_gone "$pid"; then
		fail "restore_fails_at_$hook" "task $pid left behind"
	else
		pass "restore_fails_at_$hook"
	fi
done

# The real restore: testdev's exchange and flag, checked by the program itself.
rm -f "$OUT/trace"
if ! restore; then
	fail restore "$(tail -3 "$OUT/restore.err")"
else
	pass restore
	if wait_file "$OUT/result" && [ "$(cat "$OUT/result")" = PASS ]; then
		pass resume_devices_late_before_task_runs
	else
		fail resume_devices_late_before_task_runs "$(cat "$OUT/result" 2>/dev/null || echo no result)"
	fi
	criu_pid=$(grep -m1 "INIT stage=2" "$OUT/trace" | sed 's/pid=\([0-9]*\).*/\1/')
	if in_order "pid=$criu_pid INIT stage=2" "pid=$criu_pid RESTORE_INIT" "pid=$criu_pid POST_FORKING" \
		"pid=$criu_pid RESUME_DEVICES_LATE arg=$pid" "pid=$criu_pid EXIT stage=2 ret=0" &&
		in_order "pid=$pid RESTORE_EXT_FILE" "pid=$criu_pid RESUME_DEVICES_LATE arg=$pid"; then
		pass restore_hook_order_and_processes
	else
		fail restore_hook_order_and_processes "$(cat "$OUT/trace")"
	fi
	# trace (first in load order) said -ENOTSUP and testdev still got the file.
	if grep -q "pid=$pid RESTORE_EXT_FILE" "$OUT/trace" && grep -q "PASS" "$OUT/result" 2>/dev/null; then
		pass enotsup_chaining
	else
		fail enotsup_chaining "trace did not see RESTORE_EXT_FILE before testdev"
	fi
fi
wait_gone "$pid"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
