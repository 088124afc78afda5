#!/usr/bin/env python3
"""GPU restore benchmark (make bench-gpu): serial vs parallel AMDGPU BO restore.

A holder (gpu_holder.c) with H MiB of host memory and G MiB of VRAM BOs on the KFD EMULATOR
(test/gpu: an emulator, not a GPU; its "VRAM" is memfds in RAM) is dumped once; the same
images are then restored serially (AMDGPU_PARALLEL_RESTORE=0: the task fills its BOs before
it maps host memory) and in parallel (criu's worker fills them while the task restores host
memory), with the images in page cache and after dropping caches, interleaved round by round.
Every restore is verified: the restored holder checks every host word and every BO byte on
SIGTERM. The breakdown comes from criu's -v4 log timestamps and --display-stats.

Environment: BENCH_GPU_HOST_MIB, BENCH_GPU_DEV_MIB (default 2048 each), BENCH_GPU_ROUNDS
(default 5), BENCH_GPU_COLD (default 1; 0 skips the dropped-cache runs), BENCH_GPU_DIR
(parent of the scratch directory, default /tmp; removed at the end unless a run failed).
"""
import ctypes
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CRIU = os.path.join(ROOT, "criu", "criu")
PLUGIN_DIR = os.path.join(ROOT, "plugins", "amdgpu")
KFD_EMU = os.path.join(ROOT, "test", "gpu", "kfd-emu")
HOLDER = os.path.join(HERE, "gpu_holder")

HOST_MIB = int(os.environ.get("BENCH_GPU_HOST_MIB", "2048"))
DEV_MIB = int(os.environ.get("BENCH_GPU_DEV_MIB", "2048"))
ROUNDS = int(os.environ.get("BENCH_GPU_ROUNDS", "5"))
COLD = os.environ.get("BENCH_GPU_COLD", "1") != "0"
SCRATCH_PARENT = os.environ.get("BENCH_GPU_DIR", "/tmp")

PR_SET_CHILD_SUBREAPER = 36
READY_TIMEOUT_S = 180
CHECK_TIMEOUT_S = 120
CRIU_TIMEOUT_S = 300
MODES = ("serial", "parallel")
COLUMNS = ("fork", "files", "host", "device", "wait", "total")

LOG_LINE = re.compile(r"^\((\d+\.\d+)\) (?:(\d+): )?(.*)$")
STATS_LINE = re.compile(r"Restore stats: fork ([\d.]+) s, restore ([\d.]+) s, total ([\d.]+) s")
FILLED = re.compile(r"amdgpu: (worker: )?task \d+: \d+ BOs \(\d+ bytes\) filled .* in ([\d.]+) s")


class BenchError(Exception):
    pass


def become_subreaper():
    """criu restore -d exits once the holder runs; the holder is then reparented to us, so
    we can reap it and read its verdict."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
        raise BenchError("prctl(PR_SET_CHILD_SUBREAPER): " + os.strerror(ctypes.get_errno()))


def check_memory():
    """Holder (host + device), the images in page cache and the restored copy at once."""
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    avail_mib = int(fields["MemAvailable"].split()[0]) // 1024
    need_mib = 2 * (HOST_MIB + DEV_MIB) + 1024
    if avail_mib < need_mib:
        raise BenchError(f"needs about {need_mib} MiB free memory, {avail_mib} MiB available")


def start_emulator(emu_dir):
    """Our own KFD EMULATOR daemon; the pid file appears once it accepts connections."""
    os.mkdir(emu_dir)
    sock, pidfile = os.path.join(emu_dir, "sock"), os.path.join(emu_dir, "pid")
    emu = subprocess.Popen([KFD_EMU, "-s", sock, "-t", os.path.join(emu_dir, "topology"),
                            "-p", pidfile, "-l", os.path.join(emu_dir, "log")],
                           stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while not os.path.exists(pidfile):
        if emu.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"the KFD emulator did not start (see {emu_dir}/log)")
        time.sleep(0.01)
    return emu


def stop_emulator(emu):
    emu.terminate()
    try:
        emu.wait(10)
    except subprocess.TimeoutExpired:
        emu.kill()
        emu.wait()


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def spawn_holder(log_path, env):
    """In its own session, fds only on files criu can dump. posix_spawn, not subprocess:
    Popen may waitpid() a pid it thinks is its own, and the restored holder reuses it."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    pid = os.posix_spawn(HOLDER, [HOLDER, str(HOST_MIB), str(DEV_MIB)], env,
                         file_actions=actions, setsid=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "ready" not in read_text(log_path):
        done_pid, status = os.waitpid(pid, os.WNOHANG)
        if done_pid:
            raise BenchError(f"holder exited before it was ready (status {status:#x}): "
                             + read_text(log_path).strip())
        if time.monotonic() > deadline:
            raise BenchError(f"holder {pid} not ready after {READY_TIMEOUT_S} s")
        time.sleep(0.05)
    return pid


def run_criu(args, env, log_path):
    start = time.monotonic()
    proc = subprocess.run([CRIU] + args, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=env, timeout=CRIU_TIMEOUT_S)
    elapsed = time.monotonic() - start
    if proc.returncode:
        raise BenchError(f"criu {args[0]} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip() or proc.stdout.strip()} (see {log_path})")
    return elapsed, proc.stdout


def dump(pid, img_dir, env):
    os.mkdir(img_dir)
    seconds, _ = run_criu(["dump", "-t", str(pid), "-D", img_dir, "-v4", "-o", "dump.log",
                           "-L", PLUGIN_DIR], env, os.path.join(img_dir, "dump.log"))
    # The dump killed the holder; its pid must be free before a restore can take it again.
    os.waitpid(pid, 0)
    # Written back now, so no restore competes with writeback.
    os.sync()
    return seconds


def warm_cache(img_dir):
    """Read every image, so a page-cache run does not depend on what the last run left."""
    for name in os.listdir(img_dir):
        with open(os.path.join(img_dir, name), "rb") as img:
            while img.read(16 << 20):
                pass


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as knob:
        knob.write("3\n")


def log_times(log_path):
    """First timestamp of each message of interest in a -v4 restore log."""
    wanted = {"forked task": "forked", "restoring the fds of task": "files_start",
              "preparing the restorer": "files_end",
              "jumping into the restorer": "restorer",
              "RESUME_DEVICES_LATE ->": "resumed"}
    times, filled = {}, None
    for line in read_text(log_path).splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        for needle, key in wanted.items():
            if needle in match.group(3) and key not in times:
                times[key] = float(match.group(1))
        fill = FILLED.search(line)
        if fill:
            filled = (bool(fill.group(1)), float(fill.group(2)))
    missing = set(wanted.values()) - set(times)
    if missing or filled is None:
        raise BenchError(f"{log_path}: no {sorted(missing) or 'BO fill'} line")
    return times, filled


def breakdown(mode, log_path, stats_out, wall_s):
    """fork: criu's fork of the tree; files: the task's fds, the in-task plugin part
    included (serial: the whole BO fill); host: restorer jump to the task's ready report;
    device: the BO fill (task or worker); wait: RESUME_DEVICES_LATE past the ready report
    (parallel: waiting for the worker); total: wall time of criu restore."""
    stats = STATS_LINE.search(stats_out)
    if not stats:
        raise BenchError(f"criu restore --display-stats printed no stats: {stats_out!r}")
    times, (by_worker, fill_s) = log_times(log_path)
    if by_worker != (mode == "parallel"):
        raise BenchError(f"{log_path}: BOs were not filled on the {mode} path")
    # --display-stats times ready - forked; the log names the fork: that places "ready".
    ready = times["forked"] + float(stats.group(2))
    return {"fork": float(stats.group(1)),
            "files": times["files_end"] - times["files_start"],
            "host": ready - times["restorer"],
            "device": fill_s,
            "wait": max(0.0, times["resumed"] - ready),
            "total": wall_s}


def stop_holder(pid, log_path):
    """SIGTERM: the holder checks all its memory; exit 0 means every byte is intact."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + CHECK_TIMEOUT_S
    while True:
        done_pid, status = os.waitpid(pid, os.WNOHANG)
        if done_pid:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"holder {pid} did not finish its check within {CHECK_TIMEOUT_S} s")
        time.sleep(0.05)
    last = read_text(log_path).strip().splitlines()[-1]
    if os.waitstatus_to_exitcode(status) != 0 or "PASS" not in last:
        raise BenchError(f"holder {pid} check failed after restore (status {status:#x}): {last}")


def restore(pid, img_dir, env, mode, tag, live, holder_log):
    log_name = f"restore-{tag}.log"
    env = dict(env, AMDGPU_PARALLEL_RESTORE="1" if mode == "parallel" else "0")
    wall_s, out = run_criu(["restore", "-D", img_dir, "-d", "-v4", "-o", log_name,
                            "--display-stats", "-L", PLUGIN_DIR], env,
                           os.path.join(img_dir, log_name))
    live.add(pid)
    result = breakdown(mode, os.path.join(img_dir, log_name), out, wall_s)
    stop_holder(pid, holder_log)
    live.discard(pid)
    return result


def fmt_row(label, row):
    return f"{label:<26}" + "".join(f"{row[c]:>9.3f}" for c in COLUMNS)


def print_table(results):
    print()
    print(f"medians of {ROUNDS} interleaved runs, seconds; host {HOST_MIB} MiB, device "
          f"{DEV_MIB} MiB on the KFD EMULATOR (2 emulated GPUs)")
    print(f"{'case':<26}" + "".join(f"{c:>9}" for c in COLUMNS))
    medians = {}
    for (cache, mode), runs in results.items():
        medians[cache, mode] = {c: statistics.median(r[c] for r in runs) for c in COLUMNS}
        print(fmt_row(f"{mode}, {cache}", medians[cache, mode]))
    bound = 100.0 * min(HOST_MIB, DEV_MIB) / (HOST_MIB + DEV_MIB)
    print(f"bound for a perfect overlap: -{bound:.1f}% (1 - max(H,G)/(H+G))")
    for cache in ("dropped caches", "page cache") if COLD else ("page cache",):
        serial = medians[cache, "serial"]["total"]
        parallel = medians[cache, "parallel"]["total"]
        reduction = 100.0 * (serial - parallel) / serial
        # A reduction prints as -P%; a parallel restore that came out slower as +P%.
        print(f"parallel vs serial ({cache}): {-reduction:+.1f}%")


def run_rounds(pid, img_dir, env, live, holder_log):
    results = {}
    caches = ("page cache", "dropped caches") if COLD else ("page cache",)
    for round_nr in range(1, ROUNDS + 1):
        # Alternate which mode goes first, so neither always inherits the other's leftovers.
        modes = MODES if round_nr % 2 else MODES[::-1]
        for cache in caches:
            for mode in modes:
                if cache == "page cache":
                    warm_cache(img_dir)
                else:
                    drop_caches()
                tag = f"{round_nr}-{mode}-{'cold' if cache != 'page cache' else 'cached'}"
                row = restore(pid, img_dir, env, mode, tag, live, holder_log)
                results.setdefault((cache, mode), []).append(row)
                print(f"round {round_nr} " + fmt_row(f"{mode}, {cache}", row), flush=True)
    return results


def kill_leftovers(live):
    for pid in live:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def bench(scratch, live):
    check_memory()
    emu = start_emulator(os.path.join(scratch, "emu"))
    try:
        env = dict(os.environ, KFDEMU_SOCKET=os.path.join(scratch, "emu", "sock"),
                   AMDGPU_TOPOLOGY_DIR=os.path.join(scratch, "emu", "topology"))
        holder_log = os.path.join(scratch, "holder.log")
        img_dir = os.path.join(scratch, "images")
        start = time.monotonic()
        pid = spawn_holder(holder_log, env)
        live.add(pid)
        print(f"holder {pid} ready in {time.monotonic() - start:.1f} s", flush=True)
        dump_s = dump(pid, img_dir, env)
        live.discard(pid)
        print(f"dumped in {dump_s:.1f} s (once; every run restores these images)", flush=True)
        print(f"{'':<8}{'':<26}" + "".join(f"{c:>9}" for c in COLUMNS))
        return run_rounds(pid, img_dir, env, live, holder_log)
    finally:
        kill_leftovers(live)
        stop_emulator(emu)


def main():
    if os.geteuid() != 0:
        print("bench-gpu: must run as root (criu and drop_caches need it)", file=sys.stderr)
        return 1
    for prog in (CRIU, KFD_EMU, HOLDER, os.path.join(PLUGIN_DIR, "amdgpu_plugin.so")):
        if not os.access(prog, os.R_OK):
            print(f"bench-gpu: {prog} is missing; run make first", file=sys.stderr)
            return 1
    scratch = tempfile.mkdtemp(prefix="criu-bench-gpu-", dir=SCRATCH_PARENT)
    live = set()
    print(f"GPU restore benchmark on the KFD EMULATOR (not a GPU): host {HOST_MIB} MiB, device "
          f"{DEV_MIB} MiB, {ROUNDS} rounds, page cache{' and dropped caches' if COLD else ''}, "
          f"scratch {scratch}", flush=True)
    try:
        become_subreaper()
        results = bench(scratch, live)
    except (BenchError, subprocess.TimeoutExpired, OSError) as err:
        print(f"bench-gpu: FAIL: {err}", file=sys.stderr)
        # Keep the logs for whoever debugs this, not gigabytes of pages.
        img_dir = os.path.join(scratch, "images")
        for name in os.listdir(img_dir) if os.path.isdir(img_dir) else ():
            if "pages-" in name:
                os.unlink(os.path.join(img_dir, name))
        print(f"bench-gpu: logs kept in {scratch}", file=sys.stderr)
        return 1
    shutil.rmtree(scratch)
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
