#!/bin/bash
# make runtimes (and make test): runc 1.1 checkpoints and restores busybox containers through
# this criu (runc --criu criu/criu: runc runs `criu swrk` and speaks CRIU's RPC to it). Each
# container's pid 1 is a shell counting in a variable (lib.sh loop_script) with a child
# (sleep) and a file in its /dev/shm tmpfs; after each restore the count goes on from where
# it stopped (no restart), pid 1 and the child keep their pids inside, the file its bytes.
# Checks, one line each: checkpoint and restore -d; --leave-running; --file-locks (a flock
# held across, refused without the option); --manage-cgroups-mode soft, full and strict (a
# pids.max the container's cgroup had at dump); a host directory bind-mounted in (runc
# passes it as an external mount) with a file held open on it; --pre-dump then a
# checkpoint with --parent-path; --tcp-established with a live client on loopback talking to
# a server in a container of the host's net namespace; --lazy-pages with --page-server; a
# terminal container (--console-socket), its console restored on a new pty.
# Prints PASS/FAIL lines and a total; exits 1 on a failure. Run as root.
set -u
name=runc
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=$here/out/runc
state=/tmp/criu-test-runc
cgparent=criu-test-runc
. "$here/lib.sh"

[ "$(id -u)" -eq 0 ] || { echo "FAIL runc: run as root"; exit 1; }
[ -x "$root/criu/criu" ] || { echo "FAIL runc: no criu/criu (run make first)"; exit 1; }
command -v runc >/dev/null ||
	{ echo "FAIL runc: runc is not installed (scripts/install-deps.sh)"; exit 1; }
[ -x /bin/busybox ] ||
	{ echo "FAIL runc: busybox-static is not installed (scripts/install-deps.sh)"; exit 1; }

RUNC="runc --root $state"
CRIU_RUNC="$RUNC --criu $root/criu/criu"

# Every container of the test's runc root killed and deleted, its cgroups removed.
cleanup() {
	local id d
	for id in $($RUNC list -q 2>/dev/null); do
		$RUNC kill "$id" KILL >/dev/null 2>&1
		$RUNC delete -f "$id" >/dev/null 2>&1
	done
	for d in /sys/fs/cgroup/*/"$cgparent"; do
		[ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
	done
	[ -n "${client_pid:-}" ] && kill "$client_pid" 2>/dev/null && wait "$client_pid" 2>/dev/null
	client_pid=
	[ -n "${console_pid:-}" ] && kill "$console_pid" 2>/dev/null &&
		wait "$console_pid" 2>/dev/null
	console_pid=
	# The lazy test's checkpoint (runc, its criu serving pages) and criu lazy-pages daemon.
	[ -n "${ck:-}" ] && kill "$ck" 2>/dev/null && wait "$ck" 2>/dev/null
	ck=
	if [ -s "$out/ck7/lazy.pid" ] &&
		grep -q lazy-pages "/proc/$(cat "$out/ck7/lazy.pid")/cmdline" 2>/dev/null; then
		kill "$(cat "$out/ck7/lazy.pid")"
	fi
	rm -rf "$state"
}
cleanup
trap cleanup EXIT
trap "exit 1" INT TERM
rm -rf "$out"
mkdir -p "$out"
build_helpers "$out/helpers" || { echo "FAIL runc: cannot build the helpers"; exit 1; }

# bundle ID SCRIPT [PYTHON]: $out/ID, a bundle whose process is sh running SCRIPT, with
# no terminal, a writable root, its cgroup under $cgparent; PYTHON edits the spec `s`.
bundle() {
	local b=$out/$1
	mkdir -p "$b"
	make_rootfs "$b/rootfs"
	printf '%s\n' "$2" >"$b/rootfs/loop.sh"
	(cd "$b" && runc spec) || return 1
	python3 - "$b/config.json" "$1" "$cgparent" "${3:-}" <<'PY'
import json, sys
path, cid, parent, extra = sys.argv[1:]
s = json.load(open(path))
s['process']['terminal'] = False
s['process']['args'] = ['/bin/sh', '/loop.sh']
s['root']['readonly'] = False
s['linux']['cgroupsPath'] = '/%s/%s' % (parent, cid)
exec(extra)
json.dump(s, open(path, 'w'), indent=1)
PY
}

# start ID: runc run -d in its bundle, stdio /dev/null (a file of the host would be one no
# container mount reaches, which criu cannot dump); waits for 5 counts and writes
# /dev/shm/data. Sets pid (host pid of pid 1), child (the sleep's pid inside), shm_sum.
start() {
	local b=$out/$1
	(cd "$b" && $RUNC --log "$b/run.log" run -d "$1" </dev/null >/dev/null 2>&1) ||
		{ why="runc run: $(tail -1 "$b/run.log")"; return 1; }
	wait_lines "$b/rootfs/log" 5 || { why="the count did not start"; return 1; }
	pid=$(init_pid "$1")
	child=$(cat "$b/rootfs/child.pid")
	head -c 65536 /dev/urandom >"/proc/$pid/root/dev/shm/data"
	shm_sum=$(sha256sum <"/proc/$pid/root/dev/shm/data")
}

init_pid() {
	$RUNC state "$1" 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])'
}

status() {
	local st
	st=$($RUNC state "$1" 2>/dev/null) || { echo gone; return; }
	echo "$st" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])'
}

# checkpoint ID DIR OPTIONS...: runc checkpoint into DIR/img (work DIR/work, logs there).
checkpoint() {
	local id=$1 dir=$2
	shift 2
	mkdir -p "$dir"
	(cd "$out/$id" && $CRIU_RUNC checkpoint --image-path "$dir/img" --work-path "$dir/work" \
		"$@" "$id" >"$dir/checkpoint.out" 2>&1) ||
		{
			why="runc checkpoint $*: $(tail -2 "$dir/checkpoint.out" | tr '\n' ' ')"
			return 1
		}
}

restore() {
	local id=$1 dir=$2
	shift 2
	(cd "$out/$id" && $CRIU_RUNC restore -d --image-path "$dir/img" --work-path "$dir/work" \
		"$@" "$id" </dev/null >"$dir/restore.out" 2>&1) ||
		{ why="runc restore $*: $(tail -2 "$dir/restore.out" | tr '\n' ' ')"; return 1; }
}

# restored ID COUNT: the container runs again and its state went on: /log passes COUNT and
# counts on with no restart, pid 1 is pid 1 inside, the sleep has its pid inside, and
# /dev/shm/data its bytes. Sets pid.
restored() {
	local b=$out/$1
	[ "$(status "$1")" = running ] || { why="status $(status "$1") after restore"; return 1; }
	wait_lines "$b/rootfs/log" "$2" || { why="the count did not go on past $2"; return 1; }
	counts_on "$b/rootfs/log" >"$out/why" || { why="/log: $(cat "$out/why")"; return 1; }
	pid=$(init_pid "$1")
	[ "$(ns_pid "$pid")" = 1 ] || { why="pid 1 is pid $(ns_pid "$pid") inside"; return 1; }
	[ -n "$(child_with_nspid "$pid" "$child" "sleep 100000")" ] ||
		{ why="no sleep with pid $child inside"; return 1; }
	[ "$(sha256sum <"/proc/$pid/root/dev/shm/data")" = "$shm_sum" ] ||
		{ why="/dev/shm/data has other bytes"; return 1; }
}

# stop ID: the container killed and deleted.
stop() {
	$RUNC kill "$1" KILL >/dev/null 2>&1
	$RUNC delete -f "$1" >/dev/null 2>&1
}

# check NAME FUNCTION: runs FUNCTION (which sets why and returns 1 on a failure), one line.
check() {
	why=""
	if "$2"; then
		pass "$1"
	else
		failed_with "$1" "$why"
	fi
}

t_basic() {
	bundle c1 "$(loop_script)" && start c1 || return 1
	checkpoint c1 "$out/ck1" || return 1
	[ "$(status c1)" = gone ] || { why="status $(status c1) after checkpoint"; return 1; }
	count=$(wc -l <"$out/c1/rootfs/log")
	[ -s "$out/ck1/work/stats-dump" ] || { why="no stats-dump in the work path"; return 1; }
	restore c1 "$out/ck1" && restored c1 "$count" || return 1
	stop c1
}
check "checkpoint, restore -d: the count goes on, pids and /dev/shm kept" t_basic
stop c1

# --leave-running: the container runs on, the same process, counting; the images, restored
# once it is gone, go on from the count they caught (between the counts seen before and
# after the checkpoint), not from 0.
t_leave_running() {
	local b=$out/c2 before after first n
	bundle c2 "$(loop_script)" && start c2 || return 1
	before=$(wc -l <"$b/rootfs/log")
	checkpoint c2 "$out/ck2" --leave-running || return 1
	after=$(wc -l <"$b/rootfs/log")
	[ "$(status c2)" = running ] ||
		{ why="status $(status c2) after --leave-running"; return 1; }
	[ "$(init_pid c2)" = "$pid" ] ||
		{ why="pid 1 is another process after --leave-running"; return 1; }
	wait_lines "$b/rootfs/log" $((after + 5)) ||
		{ why="the count stopped after --leave-running"; return 1; }
	counts_on "$b/rootfs/log" >"$out/why" || { why="/log: $(cat "$out/why")"; return 1; }
	stop c2
	n=$(wc -l <"$b/rootfs/log")
	restore c2 "$out/ck2" || return 1
	wait_lines "$b/rootfs/log" $((n + 3)) ||
		{ why="the restored count did not go on"; return 1; }
	first=$(sed -n "$((n + 1))p" "$b/rootfs/log")
	[ "$first" -gt "$before" ] && [ "$first" -le $((after + 1)) ] ||
		{
			why="the restored count starts at $first, not just after the dump's"
			return 1
		}
	sed -n "$((n + 1)),\$p" "$b/rootfs/log" | awk -v f="$first" '$0 != f + NR - 1 { exit 1 }' ||
		{ why="the restored count does not count on from $first"; return 1; }
	stop c2
}
check "checkpoint --leave-running: runs on; its images go on from their count" t_leave_running
stop c2

# --file-locks: a flock held by a process of the container (flock-hold) is refused without
# the option (the container runs on), and held again after restore: the host cannot take it.
t_file_locks() {
	local b=$out/c3 holder
	bundle c3 "$(loop_script '/bin/flock-hold /lockfile &')" && start c3 || return 1
	wait_lines "$b/rootfs/lockfile.held" 0 ||
		{ why="flock-hold did not take the lock"; return 1; }
	holder=$(cat "$b/rootfs/lockfile.held")
	flock -n "$b/rootfs/lockfile" true &&
		{ why="the host took the lock the container holds"; return 1; }
	if checkpoint c3 "$out/ck3-nolocks"; then
		why="checkpoint without --file-locks succeeded with a lock held"
		return 1
	fi
	grep -q "Error" "$out/ck3-nolocks/work/dump.log" ||
		{ why="no error in the refused dump's log"; return 1; }
	[ "$(status c3)" = running ] ||
		{ why="status $(status c3) after a refused checkpoint"; return 1; }
	checkpoint c3 "$out/ck3" --file-locks || return 1
	flock -n "$b/rootfs/lockfile" true ||
		{ why="the host could not take the lock with the container gone"; return 1; }
	count=$(wc -l <"$b/rootfs/log")
	restore c3 "$out/ck3" --file-locks && restored c3 "$count" || return 1
	[ -n "$(child_with_nspid "$pid" "$holder" "/bin/flock-hold /lockfile")" ] ||
		{ why="no flock-hold with pid $holder inside after restore"; return 1; }
	flock -n "$b/rootfs/lockfile" true &&
		{ why="the lock is not held after restore"; return 1; }
	stop c3
}
check "--file-locks: a flock held across (refused without it)" t_file_locks
stop c3

# --manage-cgroups-mode MODE: criu's dump gets the mode (its log's options line), the
# container comes back in its own cgroups. The pids cgroup had pids.max 77 at dump, its
# spec says 100, which runc writes when it makes the cgroup at restore: runc 1.1.5 sends
# no mode at restore (only manage_cgroups), so criu restores as soft, keeping the
# properties of the cgroups it did not make: 100 in every mode.
t_cgroups() {
	local mode id got cg
	for mode in soft full strict; do
		id=cg-$mode
		bundle "$id" "$(loop_script)" \
			"s['linux']['resources'] = {'pids': {'limit': 100}}" &&
			start "$id" || return 1
		cg=/sys/fs/cgroup/pids/$cgparent/$id
		[ "$(cat "$cg/pids.max")" = 100 ] ||
			{ why="$mode: pids.max $(cat "$cg/pids.max") at start"; return 1; }
		echo 77 >"$cg/pids.max"
		checkpoint "$id" "$out/ck-$mode" --manage-cgroups-mode "$mode" ||
			{ why="$mode: $why"; return 1; }
		grep -q "as options: .*--manage-cgroups $mode" "$out/ck-$mode/work/dump.log" ||
			{ why="$mode: criu's dump did not get --manage-cgroups $mode"; return 1; }
		count=$(wc -l <"$out/$id/rootfs/log")
		restore "$id" "$out/ck-$mode" --manage-cgroups-mode "$mode" &&
			restored "$id" "$count" ||
			{ why="$mode: $why"; return 1; }
		grep -q "^[0-9]*:pids:/$cgparent/$id\$" "/proc/$pid/cgroup" ||
			{ why="$mode: the restored pid 1 is not in its pids cgroup"; return 1; }
		got=$(cat "$cg/pids.max")
		[ "$got" = 100 ] ||
			{ why="$mode: pids.max is $got after restore, not runc's 100"; return 1; }
		stop "$id"
	done
}
check "--manage-cgroups-mode soft, full, strict" t_cgroups
stop cg-soft; stop cg-full; stop cg-strict

# A host directory bind-mounted at /data (runc passes its bind mounts to criu as external
# mounts, ext_mnt /data:/data at dump and /data:SOURCE at restore), with a file the shell
# holds open on it (fd 3) and appends its count to: after restore fd 3 still appends to the
# host's file, and /data is the host directory.
t_bind() {
	local b=$out/c4 host=$out/hostdir
	mkdir -p "$host"
	bundle c4 "exec 3>>/data/held
$(loop_script 'while :; do echo x >&3; sleep 0.1; done &')" \
		"s['mounts'].append({'destination': '/data', 'type': 'bind', 'source': '$host',
		                    'options': ['rbind', 'rw']})" &&
		start c4 || return 1
	wait_lines "$host/held" 3 || { why="nothing in the host's held file"; return 1; }
	checkpoint c4 "$out/ck4" || return 1
	count=$(wc -l <"$b/rootfs/log")
	n=$(wc -l <"$host/held")
	grep -q "as options: .*--ext-mount-map /data:/data" "$out/ck4/work/dump.log" ||
		{ why="runc did not pass /data as an external mount"; return 1; }
	restore c4 "$out/ck4" && restored c4 "$count" || return 1
	wait_lines "$host/held" $((n + 3)) ||
		{ why="fd 3 no longer reaches the host's file"; return 1; }
	echo probe >"$host/probe"
	[ "$(cat "/proc/$pid/root/data/probe")" = probe ] ||
		{ why="/data is not the host directory"; return 1; }
	stop c4
}
check "a host directory bind-mounted (external mount), a file held open on it" t_bind
stop c4

# --pre-dump, then a checkpoint with --parent-path: the container runs on after the
# pre-dump; the final images hold only what changed (fewer pages than the pre-dump's), link
# to their parent, and restore with the count going on.
t_pre_dump() {
	local b=$out/c5 pre full
	bundle c5 "$(loop_script)" && start c5 || return 1
	checkpoint c5 "$out/ck5/pre" --pre-dump || return 1
	[ "$(status c5)" = running ] || { why="status $(status c5) after --pre-dump"; return 1; }
	n=$(wc -l <"$b/rootfs/log")
	wait_lines "$b/rootfs/log" $((n + 3)) ||
		{ why="the count stopped after --pre-dump"; return 1; }
	mkdir -p "$out/ck5/final"
	checkpoint c5 "$out/ck5/final" --parent-path ../../pre/img || return 1
	[ -d "$out/ck5/final/img/parent" ] ||
		{ why="the final images have no parent link"; return 1; }
	pre=$(cat "$out/ck5/pre/img"/pages-*.img | wc -c)
	full=$(cat "$out/ck5/final/img"/pages-*.img | wc -c)
	[ "$full" -lt "$pre" ] ||
		{ why="the final images hold $full bytes of pages, the pre-dump's $pre"; return 1; }
	count=$(wc -l <"$b/rootfs/log")
	restore c5 "$out/ck5/final" && restored c5 "$count" || return 1
	stop c5
}
check "--pre-dump, then checkpoint --parent-path" t_pre_dump
stop c5


# --tcp-established: the container shares the host's net namespace (runc then has no
# network of its own to restore); a server in it (busybox nc -l, which runs cat on the
# connection) echoes what a client on the host sends over loopback. The client's
# connection lives across the checkpoint and the restore: refused without the option (the
# container runs on), then the bytes sent after restore come back, byte for byte, on the
# same socket.
t_tcp() {
	local b=$out/c6 port
	port=$(free_port)
	bundle c6 "$(loop_script "nc -l -p $port -e /bin/cat &")" \
		"s['linux']['namespaces'] = [n for n in s['linux']['namespaces']
		                             if n['type'] != 'network']" &&
		start c6 || return 1
	python3 "$here/tcp-client.py" "$port" "$out/tcp" &
	client_pid=$!
	wait_lines "$out/tcp.ready" 0 ||
		{
			why="the client did not exchange its first bytes: $(last "$out/tcp.result")"
			return 1
		}
	if checkpoint c6 "$out/ck6-refused"; then
		why="checkpoint without --tcp-established succeeded with a connection open"
		return 1
	fi
	[ "$(status c6)" = running ] ||
		{ why="status $(status c6) after a refused checkpoint"; return 1; }
	checkpoint c6 "$out/ck6" --tcp-established || return 1
	count=$(wc -l <"$b/rootfs/log")
	restore c6 "$out/ck6" --tcp-established && restored c6 "$count" || return 1
	touch "$out/tcp.go"
	wait "$client_pid"
	client_pid=
	[ "$(cat "$out/tcp.result" 2>/dev/null)" = ok ] ||
		{ why="the client after restore: $(cat "$out/tcp.result" 2>/dev/null)"; return 1; }
	stop c6
}
check "--tcp-established: a live loopback connection to the container, bytes checked" t_tcp
stop c6

# --lazy-pages with --page-server, as a migration runs it: runc checkpoint --lazy-pages
# --page-server 127.0.0.1:PORT --status-fd: criu dumps all but the memory and serves the
# pages from the dumped tasks on PORT (\\0 on the status fd once it does; the checkpoint
# returns when every page has gone). criu lazy-pages fetches them for runc restore
# --lazy-pages of a copy of the bundle (a second container: the first one is runc's until
# its checkpoint returns), whose memory comes in as it faults: its count goes on.
t_lazy() {
	local b=$out/c7 r=$out/c7r port rc
	port=$(free_port)
	bundle c7 "$(loop_script)" && start c7 || return 1
	mkdir -p "$out/ck7"
	mkfifo "$out/ck7/status"
	(cd "$b" && exec $CRIU_RUNC checkpoint --image-path "$out/ck7/img" \
		--work-path "$out/ck7/work" \
		--lazy-pages --page-server "127.0.0.1:$port" --status-fd 3 c7 \
		3>"$out/ck7/status" >"$out/ck7/checkpoint.out" 2>&1) &
	ck=$!
	[ "$(head -c1 "$out/ck7/status" | od -An -c | tr -d ' ')" = '\0' ] ||
		{
			wait $ck
			ck=
			why="no \\0 on the status fd: $(last "$out/ck7/checkpoint.out" 2)"
			return 1
		}
	count=$(wc -l <"$b/rootfs/log")
	cp -a "$b" "$r"
	python3 - "$r/config.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
s['linux']['cgroupsPath'] = s['linux']['cgroupsPath'] + 'r'
json.dump(s, open(sys.argv[1], 'w'), indent=1)
PY
	"$root/criu/criu" lazy-pages --page-server --address 127.0.0.1 --port "$port" \
		-D "$out/ck7/img" -W "$out/ck7/work" -d --pidfile "$out/ck7/lazy.pid" \
		-o lazy-pages.log -v4 \
		2>"$out/ck7/lazy.err" ||
		{
			kill $ck
			wait $ck
			ck=
			why="criu lazy-pages: $(grep Error "$out/ck7/work/lazy-pages.log" | last -)"
			return 1
		}
	(cd "$r" && $CRIU_RUNC restore -d --lazy-pages --image-path "$out/ck7/img" \
		--work-path "$out/ck7/work" c7r </dev/null >"$out/ck7/restore.out" 2>&1) ||
		{
			kill $ck
			wait $ck
			ck=
			why="runc restore --lazy-pages: $(last "$out/ck7/restore.out" 2)"
			return 1
		}
	wait $ck
	rc=$?
	ck=
	[ $rc -eq 0 ] ||
		{
			why="runc checkpoint --lazy-pages: $(last "$out/ck7/checkpoint.out" 2)"
			return 1
		}
	[ "$(status c7)" = gone ] ||
		{ why="status $(status c7) of the source once its pages went"; return 1; }
	restored c7r "$count" || return 1
	grep -q "every page is in: [1-9][0-9]* tasks served" "$out/ck7/work/lazy-pages.log" ||
		{
			why="criu lazy-pages served no task: $(last "$out/ck7/work/lazy-pages.log")"
			return 1
		}
	stop c7r
}
check "--lazy-pages with --page-server: memory fetched on faults by criu lazy-pages" t_lazy
stop c7; stop c7r

# A terminal container (process.terminal, runc --console-socket): its shell also prints
# its count on the console, whose pty master runc sends to the socket (console-receiver.py
# keeps what each console shows). criu restores the console on a new pty and hands its
# master to runc (orphan_pts_master), which sends it to the socket of runc restore: the
# count goes on there.
t_terminal() {
	local b=$out/c8 n
	python3 "$here/console-receiver.py" "$out/console.sock" "$out/console" &
	console_pid=$!
	bundle c8 "sleep 100000 &
echo \$! > /child.pid
i=0
while :; do
	i=\$((i + 1))
	echo \$i >> /log
	echo count \$i
	sleep 0.1
done" "s['process']['terminal'] = True" || return 1
	for _ in $(seq 300); do
		[ -S "$out/console.sock" ] && break
		sleep 0.1
	done
	(cd "$b" && $RUNC --log "$b/run.log" run -d --console-socket "$out/console.sock" c8 \
		</dev/null >/dev/null 2>&1) || { why="runc run: $(last "$b/run.log")"; return 1; }
	wait_lines "$b/rootfs/log" 5 || { why="the count did not start"; return 1; }
	pid=$(init_pid c8)
	child=$(cat "$b/rootfs/child.pid")
	head -c 65536 /dev/urandom >"/proc/$pid/root/dev/shm/data"
	shm_sum=$(sha256sum <"/proc/$pid/root/dev/shm/data")
	wait_lines "$out/console.1" 3 || { why="nothing on the first console"; return 1; }
	checkpoint c8 "$out/ck8" || return 1
	count=$(wc -l <"$b/rootfs/log")
	restore c8 "$out/ck8" --console-socket "$out/console.sock" && restored c8 "$count" ||
		return 1
	wait_lines "$out/console.2" 3 || { why="nothing on the restored console"; return 1; }
	n=$(awk '{ sub("\r", "") } $1 == "count" { print $2; exit }' "$out/console.2")
	[ -n "$n" ] && [ "$n" -gt "$count" ] ||
		{ why="the restored console's first count is '$n', not past $count"; return 1; }
	stop c8
}
check "a terminal container (--console-socket): its console comes back on a new pty" t_terminal
stop c8

total
