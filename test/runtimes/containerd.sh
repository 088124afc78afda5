#!/bin/bash
# make runtimes (and make test): containerd 1.6 checkpoints and restores a container through
# runc and this criu. The test starts its own containerd (root, state, sockets under
# /tmp/criu-test-containerd, the CRI plugin off) with a PATH whose first directory holds a
# `criu` that is criu/criu: containerd's runc shim runs runc, which runs `criu swrk` from
# PATH. The image is built here (oci-image.py: an OCI archive of a busybox root, loaded
# with `ctr image import`); its container's pid 1 is a shell counting in a variable (lib.sh
# loop_script) with a child (sleep) and a file in /dev/shm.
# Checks, one line each: `ctr container checkpoint --task --rw --image` (the task is paused
# for it and runs on after), then, with the container gone, `ctr container restore --live
# --rw` from that checkpoint image: the count goes on (no restart), pid 1 and the child keep
# their pids inside, /dev/shm its bytes; `ctr task checkpoint --exit` stops the task and
# stores its criu images as an image.
# Prints PASS/FAIL lines and a total; one SKIP line where containerd cannot start here.
set -u
name=containerd
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$here/out/containerd
base=/tmp/criu-test-containerd
ns=criu-test
. "$here/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "FAIL containerd: run as root"; exit 1; }
[ -x "$root/criu/criu" ] || { echo "FAIL containerd: no criu/criu (run make first)"; exit 1; }
for t in containerd ctr runc; do
	command -v $t >/dev/null ||
		{ echo "FAIL containerd: $t is not installed (scripts/install-deps.sh)"; exit 1; }
done

CTR="ctr -a $base/containerd.sock -n $ns"
daemon=

# Every task killed and deleted, every container and image removed, containerd stopped,
# what it mounted under $base unmounted.
cleanup() {
	local id m
	if [ -n "$daemon" ]; then
		for id in $($CTR task ls -q 2>/dev/null); do
			$CTR task kill -s KILL "$id" >/dev/null 2>&1
			$CTR task rm -f "$id" >/dev/null 2>&1
		done
		for id in $($CTR container ls -q 2>/dev/null); do
			$CTR container rm "$id" >/dev/null 2>&1
		done
		kill "$daemon" 2>/dev/null
		wait "$daemon" 2>/dev/null
		daemon=
	fi
	for m in $(awk -v b="$base" 'index($2, b) == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$base"
	# ctr's tasks have their cgroups in /$ns/ID: containerd leaves /$ns behind.
	for m in /sys/fs/cgroup/*/"$ns"; do
		[ -d "$m" ] && find "$m" -depth -type d -exec rmdir {} + 2>/dev/null
	done
}
cleanup
trap cleanup EXIT
trap "exit 1" INT TERM
rm -rf "$out"
mkdir -p "$out/bin" "$base"
ln -s "$root/criu/criu" "$out/bin/criu"
build_helpers "$out/helpers" || { echo "FAIL containerd: cannot build the helpers"; exit 1; }

cat >"$base/config.toml" <<EOC
version = 2
root = "$base/root"
state = "$base/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$base/containerd.sock"
[ttrpc]
  address = "$base/containerd.sock.ttrpc"
[debug]
  address = "$base/debug.sock"
EOC
PATH="$out/bin:$PATH" setsid containerd --config "$base/config.toml" </dev/null \
	>"$out/containerd.log" 2>&1 &
daemon=$!
for _ in $(seq 300); do
	$CTR version >/dev/null 2>&1 && break
	kill -0 "$daemon" 2>/dev/null || break
	sleep 0.1
done
if ! $CTR version >/dev/null 2>&1; then
	echo "SKIP containerd: containerd does not start here: $(tail -1 "$out/containerd.log")"
	exit 0
fi

make_rootfs "$out/rootfs"
loop_script >"$out/rootfs/loop.sh"
"$here/oci-image.py" "$out/rootfs" localhost/criu-test-busybox:1 "$out/image.tar" &&
	$CTR image import "$out/image.tar" >"$out/import.out" 2>&1 ||
	{ echo "FAIL containerd: ctr image import: $(tail -1 "$out/import.out")"; exit 1; }

task_pid() {
	$CTR task ls 2>/dev/null | awk -v id="$1" '$1 == id { print $2 }'
}

task_status() {
	local st
	st=$($CTR task ls 2>/dev/null | awk -v id="$1" '$1 == id { print $3 }')
	echo "${st:-gone}"
}

check() {
	why=""
	if "$2"; then
		pass "$1"
	else
		failed_with "$1" "$why"
	fi
}

# run ID: ctr run -d of the image (runc's state under $base); waits for 5 counts and writes
# /dev/shm/data. Sets pid, child, shm_sum.
run() {
	$CTR run -d --runc-root "$base/runc" localhost/criu-test-busybox:1 "$1" /bin/sh /loop.sh \
		>"$out/run-$1.out" 2>&1 ||
			{ why="ctr run: $(tail -1 "$out/run-$1.out")"; return 1; }
	pid=$(task_pid "$1")
	[ -n "$pid" ] || { why="no task after ctr run"; return 1; }
	wait_lines "/proc/$pid/root/log" 5 || { why="the count did not start"; return 1; }
	child=$(cat "/proc/$pid/root/child.pid")
	head -c 65536 /dev/urandom >"/proc/$pid/root/dev/shm/data"
	shm_sum=$(sha256sum <"/proc/$pid/root/dev/shm/data")
}

t_checkpoint_restore() {
	local n count
	run k1 || return 1
	$CTR container checkpoint --task --rw --image k1 localhost/criu-test-ck:1 \
		>"$out/checkpoint.out" 2>&1 ||
			{
				why="ctr container checkpoint: $(tail -1 "$out/checkpoint.out")"
				return 1
			}
	[ "$(task_status k1)" = RUNNING ] ||
		{ why="task $(task_status k1) after the checkpoint"; return 1; }
	[ "$(task_pid k1)" = "$pid" ] || { why="another pid 1 after the checkpoint"; return 1; }
	n=$(wc -l <"/proc/$pid/root/log")
	wait_lines "/proc/$pid/root/log" $((n + 3)) ||
		{ why="the count stopped after the checkpoint"; return 1; }
	$CTR image ls -q | grep -qx localhost/criu-test-ck:1 ||
		{ why="no checkpoint image"; return 1; }
	$CTR task kill -s KILL k1 >/dev/null 2>&1
	$CTR task rm -f k1 >/dev/null 2>&1
	$CTR container rm k1 >/dev/null 2>&1 || { why="cannot remove the container"; return 1; }
	$CTR container restore --live --rw k1 localhost/criu-test-ck:1 >"$out/restore.out" 2>&1 ||
		{ why="ctr container restore: $(tail -1 "$out/restore.out")"; return 1; }
	[ "$(task_status k1)" = RUNNING ] ||
		{ why="task $(task_status k1) after restore"; return 1; }
	pid=$(task_pid k1)
	# The rw layer is the checkpoint's: /log ends where the checkpoint caught the count.
	count=$(wc -l <"/proc/$pid/root/log")
	wait_lines "/proc/$pid/root/log" $((count + 3)) ||
		{ why="the count did not go on after restore"; return 1; }
	counts_on "/proc/$pid/root/log" >"$out/why" || { why="/log: $(cat "$out/why")"; return 1; }
	[ "$(ns_pid "$pid")" = 1 ] || { why="pid 1 is pid $(ns_pid "$pid") inside"; return 1; }
	[ -n "$(child_with_nspid "$pid" "$child" "sleep 100000")" ] ||
		{ why="no sleep with pid $child inside"; return 1; }
	[ "$(sha256sum <"/proc/$pid/root/dev/shm/data")" = "$shm_sum" ] ||
		{ why="/dev/shm/data has other bytes"; return 1; }
}
check "ctr container checkpoint --task, then ctr container restore --live: the count goes on" \
	t_checkpoint_restore

t_task_checkpoint() {
	local ref
	run k2 || return 1
	ref=$($CTR task checkpoint --exit k2 2>"$out/task-checkpoint.err") ||
		{
			why="ctr task checkpoint --exit: $(tail -1 "$out/task-checkpoint.err")"
			return 1
		}
	[ "$(task_status k2)" = STOPPED ] ||
		{ why="task $(task_status k2) after --exit"; return 1; }
	$CTR image ls -q | grep -qx "$ref" || { why="no image $ref"; return 1; }
}
check "ctr task checkpoint --exit: the task stops, its images stored as an image" \
	t_task_checkpoint

total
