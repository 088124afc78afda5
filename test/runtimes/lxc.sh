#!/bin/bash
# make runtimes (and make test): LXC 5.0 checkpoints and restores a container through this
# criu, as a user runs it: lxc-checkpoint finds criu in PATH (a directory with a criu that
# runs criu/criu, keeping its arguments, comes first) and runs its command line with LXC's
# own options. The container is Debian's busybox template in an lxcpath of the test's own
# under /tmp, with no network and no ttys; its init is a shell loop that counts in a
# variable and appends each value to /log, with a child (sleep) and a file in its /dev/shm
# tmpfs. After restore:
# the count goes on from where it stopped (/log is 1, 2, ... N with no restart), init is
# pid 1 and the child has its pid inside, the tmpfs file has its bytes. Then AppArmor:
# with lxc.apparmor.profile set, LXC asks for --lsm-profile apparmor:PROFILE, which this
# kernel cannot give (no AppArmor): the restore is refused with one line naming it, the
# container stays stopped, and the same images restore once the profile is unset.
# Prints "PASS lxc" or "FAIL lxc: why"; one line "SKIP lxc: ..." only where lxc-start
# cannot start a container on this machine. Run as root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lxcpath=/tmp/criu-test-lxc
name=c1
rootfs=$lxcpath/$name/rootfs
out=$here/out/lxc

fail() {
	echo "FAIL lxc: $*"
	exit 1
}

[ "$(id -u)" -eq 0 ] || fail "run as root"
[ -x "$root/criu/criu" ] || fail "no criu/criu (run make first)"
command -v lxc-create >/dev/null || fail "lxc is not installed (scripts/install-deps.sh)"
[ -x /bin/busybox ] || fail "busybox-static is not installed (scripts/install-deps.sh)"

# LXC's own pid of the container's init, or nothing once it is stopped.
init_pid() {
	lxc-info -P "$lxcpath" -n "$name" -pH 2>/dev/null
}

state() {
	lxc-info -P "$lxcpath" -n "$name" -sH 2>/dev/null
}

cleanup() {
	if [ -d "$lxcpath/$name" ]; then
		lxc-stop -P "$lxcpath" -n "$name" -k >/dev/null 2>&1
		lxc-destroy -P "$lxcpath" -n "$name" >/dev/null 2>&1
	fi
	rm -rf "$lxcpath"
}
cleanup
trap cleanup EXIT
rm -rf "$out"
mkdir -p "$out/bin" "$lxcpath"
# The criu LXC finds: ours, through a wrapper that keeps each command line LXC gives it.
printf '#!/bin/sh\necho "$*" >>"%s/criu-args"\nexec "%s" "$@"\n' "$out" "$root/criu/criu" \
	>"$out/bin/criu"
chmod 755 "$out/bin/criu"
export PATH="$out/bin:$PATH"

# LXC reads criu --version: "Version: X" with X at least 2.0.
version=$(criu --version | sed -n 's/^Version: //p')
[ "$(printf '%s\n2.0\n' "$version" | sort -V | head -1)" = 2.0 ] ||
	fail "criu --version says '$version', LXC needs 2.0 or greater"

printf 'lxc.net.0.type = empty\n' >"$out/create.conf"
lxc-create -P "$lxcpath" -n "$name" -t busybox -f "$out/create.conf" >"$out/create.log" 2>&1 ||
	fail "lxc-create -t busybox: $(tail -1 "$out/create.log")"
# The template's ttys and console go; the init is the loop (the last setting wins).
cat >>"$lxcpath/$name/config" <<'EOF'
lxc.tty.max = 0
lxc.pty.max = 16
lxc.console.path = none
lxc.init.cmd = /bin/sh /loop.sh
EOF
cat >"$rootfs/loop.sh" <<'EOF'
sleep 100000 &
echo $! > /child.pid
i=0
while :; do
	i=$((i + 1))
	echo $i >> /log
	sleep 0.1
done
EOF

start() {
	lxc-start -P "$lxcpath" -n "$name" -d -l INFO -o "$out/start.log" 2>"$out/start.err"
}

# Until /log has more than $1 lines (LXC runs the loop; 20 s is far more than it needs).
wait_count() {
	for _ in $(seq 200); do
		[ "$(wc -l <"$rootfs/log" 2>/dev/null || echo 0)" -gt "$1" ] && return 0
		sleep 0.1
	done
	fail "the container's count did not pass $1 (state $(state))"
}

# /log is 1, 2, ... with no gap and no restart: the shell's variable went on.
check_log() {
	awk '$0 != NR { print "line " NR " is " $0; exit 1 }' "$rootfs/log" >"$out/log.check" ||
		fail "/log does not count on: $(cat "$out/log.check")"
}

# The pid namespace's pid of host pid $1 (the last of NSpid).
ns_pid() {
	awk '/^NSpid:/ { print $NF }' "/proc/$1/status"
}

if ! start; then
	echo "SKIP lxc: lxc-start cannot start a container here: $(tail -1 "$out/start.err")"
	exit 0
fi
wait_count 5
pid=$(init_pid)
child=$(cat "$rootfs/child.pid")
head -c 65536 /dev/urandom >"/proc/$pid/root/dev/shm/data"
shm_sum=$(sha256sum <"/proc/$pid/root/dev/shm/data")

lxc-checkpoint -P "$lxcpath" -n "$name" -s -v -D "$out/ck" -l DEBUG -o "$out/lxc.log" \
	>"$out/dump.out" 2>&1 || fail "lxc-checkpoint -s: $(tail -3 "$out/dump.out")"
[ "$(state)" = STOPPED ] || fail "the container is $(state) after lxc-checkpoint -s"
count=$(wc -l <"$rootfs/log")
check_log
# What LXC asked of criu.
for opt in "--enable-fs hugetlbfs" "--enable-external-sharing" "--enable-external-masters" \
	"--ext-mount-map auto" "--manage-cgroups=full" "--cgroup-root" "--freeze-cgroup"; do
	grep -q -- "^dump .*$opt" "$out/criu-args" || fail "LXC's dump did not pass $opt"
done

lxc-checkpoint -P "$lxcpath" -n "$name" -r -v -D "$out/ck" -l DEBUG -o "$out/lxc.log" \
	>"$out/restore.out" 2>&1 || fail "lxc-checkpoint -r: $(grep -v '^$' "$out/restore.out" | tail -3)"
[ "$(state)" = RUNNING ] || fail "the container is $(state) after lxc-checkpoint -r"
wait_count "$count"
check_log
pid=$(init_pid)
[ "$(ns_pid "$pid")" = 1 ] || fail "the restored init is pid $(ns_pid "$pid") inside, not 1"
found=""
for p in $(cat "/proc/$pid/task/$pid/children"); do
	[ "$(ns_pid "$p")" = "$child" ] && [ "$(tr '\0' ' ' <"/proc/$p/cmdline")" = "sleep 100000 " ] &&
		found=$p
done
[ -n "$found" ] || fail "no sleep with pid $child inside the restored container"
[ "$(sha256sum <"/proc/$pid/root/dev/shm/data")" = "$shm_sum" ] ||
	fail "/dev/shm/data (a tmpfs criu restores) has other bytes after restore"

# AppArmor: only where this kernel does not run it (elsewhere LXC loads a profile of its own).
if [ "$(cat /sys/module/apparmor/parameters/enabled 2>/dev/null)" != Y ]; then
	lxc-checkpoint -P "$lxcpath" -n "$name" -s -D "$out/ck2" -l INFO -o "$out/lxc2.log" \
		>"$out/dump2.out" 2>&1 || fail "second lxc-checkpoint -s: $(tail -3 "$out/dump2.out")"
	count=$(wc -l <"$rootfs/log")
	sums=$(cd "$out/ck2" && sha256sum -- *.img)
	for profile in generated unconfined; do
		cp "$lxcpath/$name/config" "$out/config.saved"
		echo "lxc.apparmor.profile = $profile" >>"$lxcpath/$name/config"
		lxc-checkpoint -P "$lxcpath" -n "$name" -r -D "$out/ck2" -l INFO -o "$out/lxc2.log" \
			>"$out/restore-aa.out" 2>&1 && fail "restore with lxc.apparmor.profile = $profile succeeded"
		grep -q -- "--lsm-profile apparmor:$profile: this kernel does not run AppArmor" \
			"$out/restore-aa.out" ||
			fail "restore with lxc.apparmor.profile = $profile: $(grep -v '^$' "$out/restore-aa.out" | tail -3)"
		[ "$(state)" = STOPPED ] || fail "the container is $(state) after a refused restore"
		cp "$out/config.saved" "$lxcpath/$name/config"
	done
	[ "$(cd "$out/ck2" && sha256sum -- *.img)" = "$sums" ] || fail "a refused restore changed the images"
	lxc-checkpoint -P "$lxcpath" -n "$name" -r -D "$out/ck2" -l INFO -o "$out/lxc2.log" \
		>"$out/restore2.out" 2>&1 || fail "restore without the profile: $(tail -3 "$out/restore2.out")"
	wait_count "$count"
	check_log
fi
echo "PASS lxc"
