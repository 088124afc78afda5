#!/usr/bin/env python3
"""GPU restore benchmark (make bench-gpu): serial vs parallel AMDGPU BO restore.

A holder (gpu_holder.c) with H MiB of host memory and G MiB of VRAM BOs on the KFD EMULATOR
(test/gpu: an emulator, not a GPU; its "VRAM" is memfds in RAM, its copy engine a thread
per GPU in the emulator daemon) is dumped once; the same images are then restored serially
(AMDGPU_PARALLEL_RESTORE=0: the task fills its BOs, one thread per GPU as upstream's serial
path does, before it maps host memory) and in parallel (criu's worker fills them, one lane
per GPU, while the task restores host memory), with the images in page cache and after
dropping caches, interleaved round by round. A second holder of 4 processes (a launcher
and 3 workers) is benchmarked the same way in page cache. Every restore is verified: the
restored holders check every host word and every BO word on SIGTERM.

Per case: the breakdown from criu's -v4 log and --display-stats, and the CPU time used by
criu (rusage of the criu command), by the restored tasks (/proc/PID/stat right after the
restore) and by the emulator daemon (its /proc stat; on hardware this would be the SDMA
engines', not the CPUs'). From the serial case in page cache:
  overlap bound B = max(host memory restore alone, device fill alone, CPU time / cores)
  overlap efficiency E = B / parallel total    (1.00: a perfect overlap on this machine)
and the most an overlap can save, serial total - B. E is also given round by round, and the
spread of each case's totals, because on a shared machine the noise can exceed that saving
(E above 1.00 says so).

Environment: BENCH_GPU_HOST_MIB, BENCH_GPU_DEV_MIB (default 2048 each), BENCH_GPU_ROUNDS
(default 5), BENCH_GPU_COLD (default 1; 0 skips the dropped-cache runs), BENCH_GPU_PROCS
(processes of the tree case, default 4; 0 skips it), BENCH_GPU_TREE_MIB (host and device
MiB per process of the tree, default 512), BENCH_GPU_DIR (parent of the scratch
directory, default /tmp; removed at the end unless a run failed).
"""
import ctypes
import os
import re
import resource
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
# The plugin's test build: the one with the emulator backend (make gpu-emu).
PLUGIN_DIR = os.path.join(ROOT, "test", "gpu", "plugin")
KFD_EMU = os.path.join(ROOT, "test", "gpu", "kfd-emu")
HOLDER = os.path.join(HERE, "gpu_holder")

HOST_MIB = int(os.environ.get("BENCH_GPU_HOST_MIB", "2048"))
DEV_MIB = int(os.environ.get("BENCH_GPU_DEV_MIB", "2048"))
ROUNDS = int(os.environ.get("BENCH_GPU_ROUNDS", "5"))
COLD = os.environ.get("BENCH_GPU_COLD", "1") != "0"
TREE_PROCS = int(os.environ.get("BENCH_GPU_PROCS", "4"))
TREE_MIB = int(os.environ.get("BENCH_GPU_TREE_MIB", "512"))
SCRATCH_PARENT = os.environ.get("BENCH_GPU_DIR", "/tmp")

PR_SET_CHILD_SUBREAPER = 36
READY_TIMEOUT_S = 300
CHECK_TIMEOUT_S = 300
CRIU_TIMEOUT_S = 300
MODES = ("serial", "parallel")
COLUMNS = ("fork", "files", "host", "device", "wait", "total", "cpu:criu", "cpu:task", "cpu:emu")
CLK_TCK = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count()

LOG_LINE = re.compile(r"^\((\d+\.\d+)\) (?:(\d+): )?(.*)$")
STATS_LINE = re.compile(r"Restore stats: fork ([\d.]+) s, restore ([\d.]+) s, total ([\d.]+) s")
FILLED = re.compile(r"amdgpu: (worker: )?task \d+: \d+ BOs \(\d+ bytes\) filled .* in ([\d.]+) s")


class BenchError(Exception):
    pass


class Holder:
    """One benchmark subject: its images, its log, its processes."""

    def __init__(self, scratch, name, host_mib, dev_mib, procs):
        self.name, self.host_mib, self.dev_mib, self.procs = name, host_mib, dev_mib, procs
        self.img_dir = os.path.join(scratch, name + "-images")
        self.log = os.path.join(scratch, name + ".log")
        self.pid = None
        self.tree = []


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
    need_mib = 2 * max(HOST_MIB + DEV_MIB, 2 * TREE_PROCS * TREE_MIB) + 1024
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


def cpu_seconds(pid):
    """utime + stime of a process so far."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_pids(root):
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as children:
                todo += [int(c) for c in children.read().split()]
        except FileNotFoundError:
            pass
    return pids


def spawn_holder(holder, env):
    """In its own session, fds only on files criu can dump. posix_spawn, not subprocess:
    Popen may waitpid() a pid it thinks is its own, and the restored holder reuses it."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, holder.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    argv = [HOLDER, str(holder.host_mib), str(holder.dev_mib), str(holder.procs)]
    pid = os.posix_spawn(HOLDER, argv, env, file_actions=actions, setsid=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while "processes ready" not in read_text(holder.log):
        done_pid, status = os.waitpid(pid, os.WNOHANG)
        if done_pid:
            raise BenchError(f"holder exited before it was ready (status {status:#x}): "
                             + read_text(holder.log).strip())
        if time.monotonic() > deadline:
            raise BenchError(f"holder {pid} not ready after {READY_TIMEOUT_S} s")
        time.sleep(0.05)
    holder.pid = pid
    holder.tree = tree_pids(pid)


def run_criu(args, env, log_path):
    """criu's wall time and its CPU time (rusage of the children we reap: criu only)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    proc = subprocess.run([CRIU] + args, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=env, timeout=CRIU_TIMEOUT_S)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise BenchError(f"criu {args[0]} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip() or proc.stdout.strip()} (see {log_path})")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, proc.stdout


def dump(holder, env):
    os.mkdir(holder.img_dir)
    seconds, _, _ = run_criu(["dump", "-t", str(holder.pid), "-D", holder.img_dir, "-v4", "-o",
                              "dump.log", "-L", PLUGIN_DIR], env,
                             os.path.join(holder.img_dir, "dump.log"))
    # The dump killed the holders; their pids must be free before a restore takes them.
    os.waitpid(holder.pid, 0)
    deadline = time.monotonic() + 30
    while any(os.path.exists(f"/proc/{p}") for p in holder.tree):
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            pass
        if time.monotonic() > deadline:
            raise BenchError("the dumped holders did not go away")
        time.sleep(0.01)
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
    """First timestamp of each message of interest in a -v4 restore log, and the longest
    BO fill (and by whom)."""
    wanted = {"forked task": "forked", "restoring the fds of task": "files_start",
              "preparing the restorer": "files_end",
              "jumping into the restorer": "restorer",
              "RESUME_DEVICES_LATE ->": "resumed"}
    times, fills = {}, []
    for line in read_text(log_path).splitlines():
        match = LOG_LINE.match(line)
        if not match:
            continue
        for needle, key in wanted.items():
            if needle in match.group(3) and key not in times:
                times[key] = float(match.group(1))
        fill = FILLED.search(line)
        if fill:
            fills.append((bool(fill.group(1)), float(fill.group(2))))
    missing = set(wanted.values()) - set(times)
    if missing or not fills:
        raise BenchError(f"{log_path}: no {sorted(missing) or 'BO fill'} line")
    return times, fills


def breakdown(holder, mode, log_path, stats_out, wall_s, cpu):
    """fork: criu's fork of the tree; files: the root task's fds, the in-task plugin part
    included (serial: the whole BO fill); host: restorer jump to the tree's ready report;
    device: the longest BO fill (a task's or the worker's); wait: RESUME_DEVICES_LATE past
    the ready report (parallel: waiting for the worker); total: wall time of criu restore;
    cpu: CPU seconds of criu, of the restored tasks and of the emulator daemon."""
    stats = STATS_LINE.search(stats_out)
    if not stats:
        raise BenchError(f"criu restore --display-stats printed no stats: {stats_out!r}")
    times, fills = log_times(log_path)
    if len(fills) != holder.procs or any(by_worker != (mode == "parallel")
                                         for by_worker, _ in fills):
        raise BenchError(f"{log_path}: BOs were not filled on the {mode} path: {fills}")
    # --display-stats times ready - forked; the log names the fork: that places "ready".
    ready = times["forked"] + float(stats.group(2))
    row = {"fork": float(stats.group(1)),
           "files": times["files_end"] - times["files_start"],
           "host": ready - times["restorer"],
           "device": max(s for _, s in fills),
           "wait": max(0.0, times["resumed"] - ready),
           "total": wall_s}
    row.update(cpu)
    return row


def stop_holder(holder):
    """SIGTERM: the holders check all their memory; exit 0 means every byte is intact."""
    os.kill(holder.pid, signal.SIGTERM)
    deadline = time.monotonic() + CHECK_TIMEOUT_S
    while True:
        done_pid, status = os.waitpid(holder.pid, os.WNOHANG)
        if done_pid:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"holder {holder.pid} did not finish its check within "
                             f"{CHECK_TIMEOUT_S} s")
        time.sleep(0.05)
    last = read_text(holder.log).strip().splitlines()[-1]
    if os.waitstatus_to_exitcode(status) != 0 or "all PASS" not in last:
        raise BenchError(f"holder {holder.pid} check failed after restore "
                         f"(status {status:#x}): {last}")


def restore(holder, env, emu_pid, mode, tag, live):
    log_name = f"restore-{tag}.log"
    env = dict(env, AMDGPU_PARALLEL_RESTORE="1" if mode == "parallel" else "0")
    emu_before = cpu_seconds(emu_pid)
    wall_s, criu_cpu, out = run_criu(["restore", "-D", holder.img_dir, "-d", "-v4", "-o",
                                      log_name, "--display-stats", "-L", PLUGIN_DIR], env,
                                     os.path.join(holder.img_dir, log_name))
    cpu = {"cpu:criu": criu_cpu, "cpu:emu": cpu_seconds(emu_pid) - emu_before,
           "cpu:task": sum(cpu_seconds(p) for p in tree_pids(holder.pid))}
    live.add(holder.pid)
    result = breakdown(holder, mode, os.path.join(holder.img_dir, log_name), out, wall_s, cpu)
    stop_holder(holder)
    live.discard(holder.pid)
    return result


def fmt_row(label, row):
    return f"{label:<32}" + "".join(f"{row[c]:>9.3f}" for c in COLUMNS)


def print_header():
    print(f"{'':<8}{'':<32}" + "".join(f"{c:>9}" for c in COLUMNS), flush=True)


def reduction_line(label, medians, serial_key, parallel_key):
    serial, parallel = medians[serial_key]["total"], medians[parallel_key]["total"]
    reduction = 100.0 * (serial - parallel) / serial
    # A reduction prints as -P%; a parallel restore that came out slower as +P%.
    print(f"parallel vs serial ({label}): {-reduction:+.1f}%")


def overlap_bound(serial):
    """The time a perfect overlap reaches on this machine, from a serial run: the two
    restores one after the other, or the CPUs busy with all the work, whichever is longer."""
    cpu = serial["cpu:criu"] + serial["cpu:task"] + serial["cpu:emu"]
    return max(serial["host"], serial["device"], cpu / CORES), cpu


def print_overlap(medians, results):
    serial = medians["page cache", "serial"]
    bound, cpu = overlap_bound(serial)
    efficiency = bound / medians["page cache", "parallel"]["total"]
    saving = serial["total"] - bound
    print(f"overlap bound (page cache): {bound:.3f} s (max of host memory restore alone "
          f"{serial['host']:.3f} s, device fill alone {serial['device']:.3f} s, serial CPU time "
          f"{cpu:.3f} s / {CORES} cores = {cpu / CORES:.3f} s)")
    print(f"most an overlap can save (page cache): {saving:.3f} s "
          f"({100.0 * saving / serial['total']:.1f}% of the serial total)")
    # The same ratio round by round (each round's own serial run gives its bound), so the
    # reader sees how far the machine's noise moves it.
    rounds = [overlap_bound(s)[0] / p["total"]
              for s, p in zip(results["page cache", "serial"], results["page cache", "parallel"])]
    print(f"overlap efficiency (page cache): {efficiency:.2f} "
          f"(round by round {min(rounds):.2f}..{max(rounds):.2f})")
    if efficiency > 1.0:
        print("  above 1.00: the parallel runs beat the bound taken from the serial runs, so "
              "run-to-run noise (see the spreads) is larger than what the overlap can save")


def print_spreads(results):
    for (cache, mode), runs in results.items():
        totals = [r["total"] for r in runs]
        print(f"spread of totals ({mode}, {cache}): {min(totals):.3f}..{max(totals):.3f} s")


def print_table(results):
    print()
    tree = (f"; {TREE_PROCS} processes: {TREE_MIB} MiB host and {TREE_MIB} MiB device each"
            if TREE_PROCS > 1 else "")
    print(f"medians of {ROUNDS} interleaved runs, seconds; 1 process: host {HOST_MIB} MiB, "
          f"device {DEV_MIB} MiB{tree}; on the KFD EMULATOR (2 emulated GPUs), {CORES} cores")
    print(f"{'case':<32}" + "".join(f"{c:>9}" for c in COLUMNS))
    medians = {}
    for (cache, mode), runs in results.items():
        medians[cache, mode] = {c: statistics.median(r[c] for r in runs) for c in COLUMNS}
        print(fmt_row(f"{mode}, {cache}", medians[cache, mode]))
    print_spreads(results)
    print_overlap(medians, results)
    for cache in ("page cache", "dropped caches", f"{TREE_PROCS} processes, page cache"):
        if (cache, "serial") in medians:
            reduction_line(cache, medians, (cache, "serial"), (cache, "parallel"))


def run_rounds(cases, env, emu_pid, live):
    results = {}
    for round_nr in range(1, ROUNDS + 1):
        # Alternate which mode goes first, so neither always inherits the other's leftovers.
        modes = MODES if round_nr % 2 else MODES[::-1]
        for holder, cache in cases:
            for mode in modes:
                if cache.endswith("page cache"):
                    warm_cache(holder.img_dir)
                else:
                    drop_caches()
                tag = f"{round_nr}-{mode}-{'cold' if 'dropped' in cache else 'cached'}"
                row = restore(holder, env, emu_pid, mode, tag, live)
                results.setdefault((cache, mode), []).append(row)
                print(f"round {round_nr} " + fmt_row(f"{mode}, {cache}", row), flush=True)
    return results


def kill_leftovers(live):
    for pid in live:
        for member in tree_pids(pid):
            try:
                os.kill(member, signal.SIGKILL)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                time.sleep(0.05)
        except ChildProcessError:
            break


def prepare(holder, env, live):
    start = time.monotonic()
    spawn_holder(holder, env)
    live.add(holder.pid)
    print(f"{holder.name}: {holder.procs} process(es) ready in {time.monotonic() - start:.1f} s",
          flush=True)
    dump_s = dump(holder, env)
    live.discard(holder.pid)
    print(f"{holder.name}: dumped in {dump_s:.1f} s (once; every run restores these images)",
          flush=True)


def bench(scratch, live):
    check_memory()
    emu = start_emulator(os.path.join(scratch, "emu"))
    try:
        env = dict(os.environ, KFDEMU_SOCKET=os.path.join(scratch, "emu", "sock"),
                   AMDGPU_TOPOLOGY_DIR=os.path.join(scratch, "emu", "topology"))
        single = Holder(scratch, "holder", HOST_MIB, DEV_MIB, 1)
        prepare(single, env, live)
        cases = [(single, "page cache")] + ([(single, "dropped caches")] if COLD else [])
        if TREE_PROCS > 1:
            tree = Holder(scratch, "tree", TREE_MIB, TREE_MIB, TREE_PROCS)
            prepare(tree, env, live)
            cases.append((tree, f"{TREE_PROCS} processes, page cache"))
        print_header()
        return run_rounds(cases, env, emu.pid, live)
    finally:
        kill_leftovers(live)
        stop_emulator(emu)


def main():
    if os.geteuid() != 0:
        print("bench-gpu: must run as root (criu and drop_caches need it)", file=sys.stderr)
        return 1
    for prog in (CRIU, KFD_EMU, HOLDER, os.path.join(PLUGIN_DIR, "amdgpu_plugin.so")):
        if not os.access(prog, os.R_OK):
            print(f"bench-gpu: {prog} is missing; run make bench-gpu (it builds it)",
                  file=sys.stderr)
            return 1
    scratch = tempfile.mkdtemp(prefix="criu-bench-gpu-", dir=SCRATCH_PARENT)
    live = set()
    print(f"GPU restore benchmark on the KFD EMULATOR (not a GPU): host {HOST_MIB} MiB, device "
          f"{DEV_MIB} MiB, {ROUNDS} rounds, page cache{' and dropped caches' if COLD else ''}"
          f"{f', a tree of {TREE_PROCS} processes' if TREE_PROCS > 1 else ''}, "
          f"scratch {scratch}", flush=True)
    try:
        become_subreaper()
        results = bench(scratch, live)
    except (BenchError, subprocess.TimeoutExpired, OSError) as err:
        print(f"bench-gpu: FAIL: {err}", file=sys.stderr)
        # Keep the logs for whoever debugs this, not gigabytes of pages.
        for entry in os.listdir(scratch):
            img_dir = os.path.join(scratch, entry)
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
