# Shared by the runtime tests (runc.sh, containerd.sh, podman.sh), sourced: the busybox root
# they build (no registry is reachable here), PASS/FAIL lines and their total, and checks of
# a container's state. Each test sets $name (its word in the lines) before sourcing this.
passed=0
failed=0

# One check's verdict: "PASS NAME: what" or "FAIL NAME: what: why".
pass() {
	echo "PASS $name $1"
	passed=$((passed + 1))
}

failed_with() {
	echo "FAIL $name $1: $2"
	failed=$((failed + 1))
}

# The last line: the total, and the exit status make reads.
total() {
	echo "$name: $passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}

# make_rootfs DIR: a root of busybox-static's applets, with the directories a runtime
# mounts on and the test's static helpers (flock-hold) in /bin.
make_rootfs() {
	local dir=$1 a
	mkdir -p "$dir"/bin "$dir"/dev "$dir"/proc "$dir"/sys "$dir"/tmp "$dir"/etc "$dir"/data
	cp /bin/busybox "$dir/bin/busybox"
	for a in $(/bin/busybox --list); do
		[ "$a" = busybox ] || ln -sf busybox "$dir/bin/$a"
	done
	[ -x "$helpers/flock-hold" ] && cp "$helpers/flock-hold" "$dir/bin/"
	echo "root:x:0:0:root:/:/bin/sh" >"$dir/etc/passwd"
	echo "root:x:0:" >"$dir/etc/group"
}

# build_helpers OUT: the static helpers the containers run (busybox has no flock).
build_helpers() {
	helpers=$1
	mkdir -p "$helpers"
	cc -static -O2 -Wall -Werror -o "$helpers/flock-hold" "$here/flock-hold.c"
}

# The container's counting loop: pid 1 is a shell that counts in a variable and appends
# each value to /log (reopened each time), with a child (sleep) whose pid it writes to
# /child.pid. $1: more shell text run before the loop (in the background, say).
loop_script() {
	cat <<EOS
sleep 100000 &
echo \$! > /child.pid
${1:-}
i=0
while :; do
	i=\$((i + 1))
	echo \$i >> /log
	sleep 0.1
done
EOS
}

# wait_lines FILE N: until FILE has more than N lines (the loop writes 10 a second; 30 s is
# a bound for a stuck container, not a timing). 0, or 1 with nothing more.
wait_lines() {
	local _
	for _ in $(seq 300); do
		[ "$(wc -l 2>/dev/null <"$1" || echo 0)" -gt "$2" ] && return 0
		sleep 0.1
	done
	return 1
}

# counts_on FILE: FILE is 1, 2, ... with no gap and no restart (the count went on from
# where it stopped); else says which line is not.
counts_on() {
	awk '$0 != NR { print "line " NR " is " $0; bad = 1; exit } END { exit bad }' "$1"
}

# last FILE [N]: its last N lines (1) on one line, for a FAIL line's reason.
last() {
	tail -n "${2:-1}" "$1" 2>/dev/null | tr '\n' ' '
}

# A TCP port of 127.0.0.1 nobody listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# ns_pid PID: its pid in its own pid namespace (the last of NSpid).
ns_pid() {
	awk '/^NSpid:/ { print $NF }' "/proc/$1/status"
}

# child_with_nspid PID NSPID CMDLINE: the host pid of PID's child whose pid inside is
# NSPID and whose command line is CMDLINE (words joined by spaces), or nothing.
child_with_nspid() {
	local p
	for p in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
		if [ "$(ns_pid "$p")" = "$2" ] &&
			[ "$(tr '\0' ' ' <"/proc/$p/cmdline")" = "$3 " ]; then
			echo "$p"
			return
		fi
	done
}
