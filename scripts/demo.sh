#!/bin/bash
# make demo: start a small counting process, checkpoint it with criu dump, show it is gone,
# restore it with criu restore, and show it carrying on with its counter and memory intact.
# Run as root from the source tree after make; everything it creates lives in one temp dir.
set -euo pipefail

SRC_DIR="$(cd "$(dirname "$0")/.." && pwd)"
CRIU="$SRC_DIR/criu/criu"
COUNTER="$SRC_DIR/test/demo/counter"
MEM_MIB=64

# Step titles in bold on a terminal, plain in a log.
if [ -t 1 ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD='' PLAIN=''; fi
step() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
say() { printf '   %s\n' "$*"; }
die() { printf 'demo: FAILED: %s\n' "$*" >&2; exit 1; }
# Poll instead of sleeping blind: the counter prints every 0.5 s.
wait_for_lines() { # LOG COUNT
	for _ in $(seq 100); do
		[ "$(wc -l < "$1")" -ge "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
pid_alive() { kill -0 "$1" 2>/dev/null; }
# What ps would say, read from /proc so the demo needs nothing beyond bash and coreutils.
show_proc() { # PID
	local state rss
	state=$(sed -n 's/^State:[[:space:]]*//p' "/proc/$1/status")
	rss=$(sed -n 's/^VmRSS:[[:space:]]*//p' "/proc/$1/status")
	say "  pid $1  state $state  rss $rss  cmd $(tr '\0' ' ' < "/proc/$1/cmdline")"
}

[ "$(id -u)" -eq 0 ] || die "run as root (criu needs it)"
[ -x "$CRIU" ] || die "$CRIU not built; run make first"
make -s -C "$SRC_DIR/test/demo" counter

WORK_DIR="$(mktemp -d /tmp/criu-demo.XXXXXX)"
IMG_DIR="$WORK_DIR/images"
LOG="$WORK_DIR/counter.log"
mkdir "$IMG_DIR"
PID=
cleanup() {
	# Leave nothing running; keep the logs only when something went wrong.
	if [ -n "$PID" ] && pid_alive "$PID"; then
		kill -KILL "$PID" 2>/dev/null || true
	fi
	if [ "${DEMO_OK:-0}" = 1 ]; then
		rm -rf "$WORK_DIR"
	else
		echo "demo: logs kept in $WORK_DIR" >&2
	fi
}
trap cleanup EXIT

step "1. Start a process that counts and checks ${MEM_MIB} MiB of memory every 0.5 s"
"$COUNTER" "$MEM_MIB" < /dev/null >> "$LOG" 2>&1 &
PID=$!
# Not a job: bash would announce "Killed" when the dump ends it. bash still reaps it.
disown "$PID"
wait_for_lines "$LOG" 5 || die "counter did not start; see $LOG"
say "started pid $PID, writing to $LOG:"
tail -n 3 "$LOG" | sed 's/^/     /'
show_proc "$PID"

step "2. Checkpoint it: criu dump -t $PID -D $IMG_DIR -v4 -o dump.log"
"$CRIU" dump -t "$PID" -D "$IMG_DIR" -v4 -o dump.log ||
	die "criu dump failed; see $IMG_DIR/dump.log"
say "images written:"
for img in "$IMG_DIR"/*.img; do
	printf '     %-20s %s\n' "${img##*/}" "$(du -h "$img" | cut -f1)"
done
say "pstree.img decoded with criu show (or scripts/crit show):"
"$CRIU" show "$IMG_DIR/pstree.img" | sed 's/^/     /' || die "criu show pstree.img failed"

step "3. The process is gone"
# The dump killed it; once reaped its pid is free for the restore to take again.
for _ in $(seq 50); do
	pid_alive "$PID" || break
	sleep 0.1
done
pid_alive "$PID" && die "pid $PID still exists after dump"
LINES_AT_DUMP=$(wc -l < "$LOG")
sleep 1
[ "$(wc -l < "$LOG")" -eq "$LINES_AT_DUMP" ] || die "the log still grows after dump"
say "pid $PID does not exist; its log stopped at:"
tail -n 1 "$LOG" | sed 's/^/     /'

step "4. Restore it: criu restore -D $IMG_DIR -d -v4 -o restore.log"
"$CRIU" restore -D "$IMG_DIR" -d -v4 -o restore.log ||
	die "criu restore failed; see $IMG_DIR/restore.log"
pid_alive "$PID" || die "pid $PID is not running after restore"
say "pid $PID is back:"
show_proc "$PID"

step "5. It carries on from where it stopped, same pid, same memory"
wait_for_lines "$LOG" $((LINES_AT_DUMP + 4)) || die "no output after restore; see $LOG"
say "last line before the dump, then the lines since the restore:"
sed -n "${LINES_AT_DUMP}p" "$LOG" | sed 's/^/     /'
say "   --- checkpoint / restore ---"
tail -n +$((LINES_AT_DUMP + 1)) "$LOG" | sed 's/^/     /'
grep -q "memory BAD" "$LOG" && die "the counter found its memory changed"

step "6. Stop it cleanly (SIGTERM: it checks its memory one last time)"
kill -TERM "$PID"
for _ in $(seq 100); do
	pid_alive "$PID" || break
	sleep 0.1
done
pid_alive "$PID" && die "pid $PID did not stop"
tail -n 2 "$LOG" | sed 's/^/     /'
grep -q "stopped by SIGTERM" "$LOG" || die "the counter did not stop cleanly; see $LOG"

DEMO_OK=1
step "Done: the process was checkpointed, killed, restored and kept running intact."
