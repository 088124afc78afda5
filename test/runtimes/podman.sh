#!/bin/bash
# make runtimes (and make test): podman 4.3 checkpoints and restores a container through
# runc and this criu. podman runs the OCI runtime (runc), which runs `criu swrk` from PATH:
# the test's PATH starts with a directory whose `criu` is criu/criu. Storage, run state and
# temporary files live under /tmp/criu-test-podman (vfs driver), the image is a busybox root
# the test imports (`podman import`), the container has no network. Its containers.conf
# (CONTAINERS_CONF) sets no default rlimits and no pids limit: podman's defaults raise
# RLIMIT_NOFILE/NPROC, which needs CAP_SYS_RESOURCE this VM does not give, and the cgroupfs
# manager (no systemd here).
# Checks, one line each: `container checkpoint --print-stats` (criu's stats-dump) /
# `container restore` (the count goes on,
# pid 1 and the child keep their pids inside, /dev/shm its bytes); `checkpoint
# --leave-running`; `checkpoint --export` to an archive (which holds criu's stats-dump),
# the container removed, `restore --import` from it, and `restore --import --name` of a
# second container from the same archive beside it; `checkpoint --pre-checkpoint`, then
# `--with-previous`, and restore.
# Prints PASS/FAIL lines and a total; one SKIP line where podman cannot run a container.
set -u
name=podman
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$here/out/podman
base=/tmp/criu-test-podman
image=localhost/criu-test-busybox:1
. "$here/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "FAIL podman: run as root"; exit 1; }
[ -x "$root/criu/criu" ] || { echo "FAIL podman: no criu/criu (run make first)"; exit 1; }
for t in podman runc; do
	command -v $t >/dev/null ||
		{ echo "FAIL podman: $t is not installed (scripts/install-deps.sh)"; exit 1; }
done

export CONTAINERS_CONF=$out/containers.conf
export PATH=$out/bin:$PATH
P="podman --root $base/root --runroot $base/run --tmpdir $base/tmp --storage-driver vfs
	--cgroup-manager cgroupfs --events-backend file --runtime runc"

# Every container removed (killed first), the image too, what podman mounted under $base
# unmounted, the containers' cgroups (cgroupfs: libpod_parent/libpod-ID) removed.
cleanup() {
	local id m
	if [ -d "$base" ]; then
		for id in $($P ps -a -q --no-trunc 2>/dev/null); do
			$P rm -f -t 0 "$id" >/dev/null 2>&1
			for m in /sys/fs/cgroup/*/libpod_parent/libpod-"$id"* \
				/sys/fs/cgroup/*/libpod_parent/conmon; do
				[ -d "$m" ] && rmdir "$m" 2>/dev/null
			done
		done
		$P rmi -a -f >/dev/null 2>&1
	fi
	for m in $(awk -v b="$base" 'index($2, b) == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" 2>/dev/null
	done
	rm -rf "$base"
	rmdir /sys/fs/cgroup/*/libpod_parent 2>/dev/null # podman's, once empty
}
mkdir -p "$out"
cleanup
trap cleanup EXIT
trap "exit 1" INT TERM
rm -rf "$out"
mkdir -p "$out/bin" "$base"
ln -s "$root/criu/criu" "$out/bin/criu"
cat >"$CONTAINERS_CONF" <<'EOC'
[containers]
default_ulimits = []
pids_limit = 0
netns = "none"
log_driver = "k8s-file"
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
EOC
build_helpers "$out/helpers" || { echo "FAIL podman: cannot build the helpers"; exit 1; }
make_rootfs "$out/rootfs"
loop_script >"$out/rootfs/loop.sh"
tar -C "$out/rootfs" -cf "$out/rootfs.tar" . &&
	$P import "$out/rootfs.tar" "$image" >"$out/import.out" 2>&1 ||
	{ echo "FAIL podman: podman import: $(tail -1 "$out/import.out")"; exit 1; }

check() {
	why=""
	if "$2"; then
		pass "$1"
	else
		failed_with "$1" "$why"
	fi
}

ct_pid() {
	$P inspect -f '{{.State.Pid}}' "$1" 2>/dev/null
}

ct_status() {
	local st
	st=$($P inspect -f '{{.State.Status}}' "$1" 2>/dev/null)
	echo "${st:-gone}"
}

# run NAME: podman run -d; waits for 5 counts, writes /dev/shm/data. Sets pid, child,
# shm_sum.
run() {
	$P run -d --name "$1" --network none "$image" /bin/sh /loop.sh >"$out/run-$1.out" 2>&1 ||
		{ why="podman run: $(tail -1 "$out/run-$1.out")"; return 1; }
	pid=$(ct_pid "$1")
	wait_lines "/proc/$pid/root/log" 5 || { why="the count did not start"; return 1; }
	child=$(cat "/proc/$pid/root/child.pid")
	head -c 65536 /dev/urandom >"/proc/$pid/root/dev/shm/data"
	shm_sum=$(sha256sum <"/proc/$pid/root/dev/shm/data")
}

# restored NAME COUNT: running again, /log past COUNT counting on with no restart, pid 1
# and the child's pid inside kept, /dev/shm/data its bytes. Sets pid.
restored() {
	[ "$(ct_status "$1")" = running ] ||
		{ why="$1 is $(ct_status "$1") after restore"; return 1; }
	pid=$(ct_pid "$1")
	wait_lines "/proc/$pid/root/log" "$2" ||
		{ why="$1's count did not go on past $2"; return 1; }
	counts_on "/proc/$pid/root/log" >"$out/why" ||
		{ why="$1's /log: $(cat "$out/why")"; return 1; }
	[ "$(ns_pid "$pid")" = 1 ] || { why="$1's pid 1 is pid $(ns_pid "$pid") inside"; return 1; }
	[ -n "$(child_with_nspid "$pid" "$child" "sleep 100000")" ] ||
		{ why="no sleep with pid $child inside $1"; return 1; }
	[ "$(sha256sum <"/proc/$pid/root/dev/shm/data")" = "$shm_sum" ] ||
		{ why="$1's /dev/shm/data has other bytes"; return 1; }
}

if ! $P run --rm --network none "$image" /bin/true >"$out/probe.out" 2>&1; then
	echo "SKIP podman: podman cannot run a container here: $(tail -1 "$out/probe.out")"
	exit 0
fi

t_checkpoint_restore() {
	local count
	run p1 || return 1
	count=$(wc -l <"/proc/$pid/root/log")
	$P container checkpoint --print-stats p1 >"$out/checkpoint.out" 2>&1 ||
		{ why="podman container checkpoint: $(tail -1 "$out/checkpoint.out")"; return 1; }
	# --print-stats: podman reads criu's stats-dump from the work directory.
	grep -q '"frozen_time": [1-9]' "$out/checkpoint.out" ||
		{
			why="--print-stats shows no frozen time: $(last "$out/checkpoint.out" 5)"
			return 1
		}
	[ "$(ct_status p1)" = exited ] ||
		{ why="p1 is $(ct_status p1) after the checkpoint"; return 1; }
	$P container restore p1 >"$out/restore.out" 2>&1 ||
		{ why="podman container restore: $(tail -1 "$out/restore.out")"; return 1; }
	restored p1 "$count"
}
check "container checkpoint, container restore: the count goes on" t_checkpoint_restore

t_leave_running() {
	local n
	$P container checkpoint --leave-running p1 >"$out/checkpoint-R.out" 2>&1 ||
		{
			why="podman container checkpoint -R: $(last "$out/checkpoint-R.out")"
			return 1
		}
	[ "$(ct_status p1)" = running ] && [ "$(ct_pid p1)" = "$pid" ] ||
		{ why="p1 is $(ct_status p1), pid $(ct_pid p1), after --leave-running"; return 1; }
	n=$(wc -l <"/proc/$pid/root/log")
	wait_lines "/proc/$pid/root/log" $((n + 3)) || { why="the count stopped"; return 1; }
}
check "container checkpoint --leave-running: runs on" t_leave_running

t_export_import() {
	local count
	$P container checkpoint --export "$out/p1.tar.zst" p1 >"$out/export.out" 2>&1 ||
		{
			why="podman container checkpoint --export: $(tail -1 "$out/export.out")"
			return 1
		}
	grep -q "level=error" "$out/export.out" &&
		{
			why="checkpoint --export: $(grep level=error "$out/export.out" | head -1)"
			return 1
		}
	tar -tf "$out/p1.tar.zst" | grep -qx 'stats-dump' ||
		{ why="the archive has no stats-dump"; return 1; }
	tar -tf "$out/p1.tar.zst" | grep -q '^checkpoint/pages-' ||
		{ why="the archive has no criu images"; return 1; }
	$P rm -f p1 >/dev/null 2>&1
	$P container restore --import "$out/p1.tar.zst" >"$out/import-restore.out" 2>&1 ||
		{
			why="podman container restore --import: $(last "$out/import-restore.out")"
			return 1
		}
	count=$(wc -l <"/proc/$(ct_pid p1)/root/log")
	restored p1 "$count" || return 1
	$P container restore --import "$out/p1.tar.zst" --name p2 >"$out/import-p2.out" 2>&1 ||
		{
			why="podman container restore --import --name: $(last "$out/import-p2.out")"
			return 1
		}
	[ "$(ct_status p1)" = running ] || { why="p1 is $(ct_status p1) beside p2"; return 1; }
	count=$(wc -l <"/proc/$(ct_pid p2)/root/log")
	restored p2 "$count"
}
check "checkpoint --export, restore --import (and --name: a second container beside it)" \
	t_export_import

# --pre-checkpoint (a pre-dump: the container runs on), then --with-previous (the dump
# against it), then restore: the count goes on.
t_pre_checkpoint() {
	local n count
	pid=$(ct_pid p2)
	$P container checkpoint --pre-checkpoint p2 >"$out/pre.out" 2>&1 ||
		{
			why="podman container checkpoint --pre-checkpoint: $(last "$out/pre.out")"
			return 1
		}
	[ "$(ct_status p2)" = running ] && [ "$(ct_pid p2)" = "$pid" ] ||
		{ why="p2 is $(ct_status p2), pid $(ct_pid p2), after --pre-checkpoint"; return 1; }
	n=$(wc -l <"/proc/$pid/root/log")
	wait_lines "/proc/$pid/root/log" $((n + 3)) || { why="the count stopped"; return 1; }
	count=$(wc -l <"/proc/$pid/root/log")
	$P container checkpoint --with-previous p2 >"$out/with-previous.out" 2>&1 ||
		{ why="checkpoint --with-previous: $(last "$out/with-previous.out")"; return 1; }
	[ "$(ct_status p2)" = exited ] ||
		{ why="p2 is $(ct_status p2) after the checkpoint"; return 1; }
	$P container restore p2 >"$out/restore-p2.out" 2>&1 ||
		{ why="podman container restore: $(last "$out/restore-p2.out")"; return 1; }
	restored p2 "$count"
}
check "checkpoint --pre-checkpoint, then --with-previous, restore" t_pre_checkpoint

total
