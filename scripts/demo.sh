#!/bin/bash
# make demo: start a small counting process, checkpoint it with criu dump, show it is gone,
# restore it with criu restore, and show it carrying on with its counter and memory intact.
# Then the GPU path: a program with host memory and BOs on the KFD EMULATOR (test/gpu; an
# emulator, not a GPU) is dumped once and restored serially and in parallel, verified each time.
# Run as root from the source tree after make; everything it creates lives in one temp dir.
set -euo pipefail

SRC_DIR="$(cd "$(dirname "$0")/.." && pwd)"
CRIU="$SRC_DIR/criu/criu"
COUNTER="$SRC_DIR/test/demo/counter"
MEM_MIB=64
KFD_EMU="$SRC_DIR/test/gpu/kfd-emu"
GPU_HOLDER="$SRC_DIR/test/bench-gpu/gpu_holder"
# The AMDGPU plugin's test build: the one with the KFD EMULATOR backend (make gpu-emu).
AMDGPU_PLUGIN_DIR="$SRC_DIR/test/gpu/plugin"
GPU_HOST_MIB=512
GPU_DEV_MIB=512

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
make -s -C "$SRC_DIR/test/bench-gpu" gpu_holder
# What `make demo` builds first; run directly after a plain `make`, the demo builds it.
[ -x "$KFD_EMU" ] && [ -e "$AMDGPU_PLUGIN_DIR/amdgpu_plugin.so" ] || make -s -C "$SRC_DIR" gpu-emu

WORK_DIR="$(mktemp -d /tmp/criu-demo.XXXXXX)"
IMG_DIR="$WORK_DIR/images"
LOG="$WORK_DIR/counter.log"
mkdir "$IMG_DIR"
PID=
GPU_PID=
EMU_PID=
cleanup() {
	# Leave nothing running; keep the logs only when something went wrong.
	for pid in "$PID" "$GPU_PID"; do
		if [ -n "$pid" ] && pid_alive "$pid"; then
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
	if [ -n "$EMU_PID" ]; then
		kill -TERM "$EMU_PID" 2>/dev/null || true
		wait "$EMU_PID" 2>/dev/null || true
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
say "the tree, decoded by crit (crit x DIR ps):"
"$SRC_DIR/crit/crit" x "$IMG_DIR" ps | sed 's/^/     /' || die "crit x ps failed"

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

# --- GPU: host memory + BOs on the KFD EMULATOR, restored serially and in parallel ---------
GPU_DIR="$WORK_DIR/gpu"
GPU_IMG="$GPU_DIR/images"
GPU_LOG="$GPU_DIR/gpu_holder.log"
mkdir -p "$GPU_IMG"

# Restores the GPU images with AMDGPU_PARALLEL_RESTORE=$1, shows the time and how the BOs
# were filled, then has the holder check every byte (SIGTERM) and waits for its verdict.
gpu_restore() { # 0|1 NAME
	local log="restore-$2.log" start end passes
	passes=$(grep -c PASS "$GPU_LOG" || true)
	start=$(date +%s%N)
	AMDGPU_PARALLEL_RESTORE=$1 "$CRIU" restore -D "$GPU_IMG" -d -v4 -o "$log" \
		--display-stats -L "$AMDGPU_PLUGIN_DIR" | sed 's/^/     /' ||
		die "criu restore ($2) failed; see $GPU_IMG/$log"
	end=$(date +%s%N)
	pid_alive "$GPU_PID" || die "pid $GPU_PID is not running after the $2 restore"
	grep -o 'amdgpu: .*filled.*' "$GPU_IMG/$log" | sed 's/^/     /'
	eval "GPU_${2^^}_MS=$(((end - start) / 1000000))"
	say "$2 restore: $(((end - start) / 1000000)) ms; the holder now checks all its memory:"
	kill -TERM "$GPU_PID"
	for _ in $(seq 600); do
		pid_alive "$GPU_PID" || break
		sleep 0.1
	done
	pid_alive "$GPU_PID" && die "pid $GPU_PID did not finish its check"
	[ "$(grep -c PASS "$GPU_LOG")" -gt "$passes" ] ||
		die "the holder found its memory changed: $(tail -n 1 "$GPU_LOG")"
	tail -n 1 "$GPU_LOG" | sed 's/^/     /'
}

step "7. GPU: start the KFD EMULATOR (a user-space stand-in for AMD's KFD driver, not a GPU)"
"$KFD_EMU" -s "$GPU_DIR/emu.sock" -t "$GPU_DIR/topology" -p "$GPU_DIR/emu.pid" \
	-l "$GPU_DIR/emu.log" < /dev/null &
EMU_PID=$!
for _ in $(seq 100); do
	[ -e "$GPU_DIR/emu.pid" ] && break
	sleep 0.1
done
[ -e "$GPU_DIR/emu.pid" ] || die "the KFD emulator did not start; see $GPU_DIR/emu.log"
export KFDEMU_SOCKET="$GPU_DIR/emu.sock" AMDGPU_TOPOLOGY_DIR="$GPU_DIR/topology"
say "emulator pid $EMU_PID, 2 emulated GPUs, topology in $AMDGPU_TOPOLOGY_DIR"

step "8. GPU: a process with $GPU_HOST_MIB MiB host memory and $GPU_DEV_MIB MiB of emulated VRAM"
setsid "$GPU_HOLDER" "$GPU_HOST_MIB" "$GPU_DEV_MIB" < /dev/null >> "$GPU_LOG" 2>&1 &
GPU_PID=$!
disown "$GPU_PID"
for _ in $(seq 300); do
	grep -q ready "$GPU_LOG" && break
	pid_alive "$GPU_PID" || die "gpu_holder failed: $(tail -n 1 "$GPU_LOG")"
	sleep 0.1
done
grep -q ready "$GPU_LOG" || die "gpu_holder did not get ready; see $GPU_LOG"
tail -n 1 "$GPU_LOG" | sed 's/^/     /'

step "9. GPU: criu dump -t $GPU_PID -L test/gpu/plugin (the AMDGPU plugin, its emulator build)"
"$CRIU" dump -t "$GPU_PID" -D "$GPU_IMG" -v4 -o dump.log -L "$AMDGPU_PLUGIN_DIR" ||
	die "criu dump failed; see $GPU_IMG/dump.log"
for _ in $(seq 50); do
	pid_alive "$GPU_PID" || break
	sleep 0.1
done
pid_alive "$GPU_PID" && die "pid $GPU_PID still exists after dump"
for img in "$GPU_IMG"/pages-*.img "$GPU_IMG"/amdgpu-*.img; do
	printf '     %-24s %s\n' "${img##*/}" "$(du -h "$img" | cut -f1)"
done

step "10. GPU: restore serially (AMDGPU_PARALLEL_RESTORE=0: the task fills its BOs, then its memory)"
gpu_restore 0 serial

step "11. GPU: restore in parallel (criu's worker fills the BOs while the task restores its memory)"
gpu_restore 1 parallel

step "GPU restore times on the KFD EMULATOR: serial $GPU_SERIAL_MS ms, parallel $GPU_PARALLEL_MS ms"

DEMO_OK=1
step "Done: both processes were checkpointed, killed, restored and found their state intact."
