#!/usr/bin/env python3
"""Dump/restore benchmark (make bench), two tables of medians:

1. Trees and threads: criu dump and criu restore -d of a tree of 8 processes with 256 MiB
   each, and of one process with 16 threads and 256 MiB, the two cases interleaved round by
   round; every round starts a fresh holder and stops it after the restore, and it checks
   every word of every process (each thread its own slice), so each restore is verified.
2. Sizes: criu dump, the reference criu's dump (../shared/upstream-criu/bin/criu, "absent"
   when not there; restored by ours, untimed), the dump floor (as many bytes as our pages
   images hold, written like dd in 1 MiB writes into the scratch directory), criu restore
   -d and the restore floor (the same page images preadv'd into fresh anonymous memory by
   one thread) for a holder process of each size, interleaved round by round. Each writer
   first deletes what it wrote the round before, so each gets memory freed just before, as
   a re-dump does (on this VM, memory untouched for a while costs several times more to
   fill). The holder checks every word of its memory when it is finally stopped, so a
   wrong restore fails the benchmark.
3. Incremental: criu pre-dump of a holder of BENCH_INCR_MIB, which then changes 64 MiB,
   then the final dump with --prev-images-dir: their times and the final dump's page bytes;
   restored and checked word by word like the others.

Environment: BENCH_SIZES_MIB (default "1024 4096"; empty: no size table), BENCH_ROUNDS
(default 3), BENCH_INCR_MIB (default 4096; 0: no incremental row), BENCH_DIR (parent of
the scratch directory, default /tmp; removed at the end).
"""
import ctypes
import glob
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CRIU = os.path.normpath(os.path.join(HERE, "..", "..", "criu", "criu"))
HOLDER = os.path.join(HERE, "holder")
FLOOR = os.path.join(HERE, "floor")
DUMP_FLOOR = os.path.join(HERE, "dumpfloor")
UPSTREAM_CRIU = os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "upstream-criu",
                                              "bin", "criu"))

SIZES_MIB = [int(s) for s in os.environ.get("BENCH_SIZES_MIB", "1024 4096").split()]
# (label, holder options, processes, MiB per process) of the trees-and-threads table
TREE_CASES = [
    ("8 processes x 256 MiB", ["-p", "8"], 8, 256),
    ("1 process, 16 threads, 256 MiB", ["-t", "16"], 1, 256),
]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
INCR_MIB = int(os.environ.get("BENCH_INCR_MIB", "4096"))
INCR_DIRTY_MIB = 64
SCRATCH_PARENT = os.environ.get("BENCH_DIR", "/tmp")

PR_SET_CHILD_SUBREAPER = 36
HOLDER_READY_TIMEOUT_S = 120
HOLDER_CHECK_TIMEOUT_S = 60
CRIU_TIMEOUT_S = 300


class BenchError(Exception):
    pass


def become_subreaper():
    """criu restore -d exits once the holder runs again; the holder is then reparented to us,
    so we can reap it and read its exit status (its verdict)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
        raise BenchError("prctl(PR_SET_CHILD_SUBREAPER): " + os.strerror(ctypes.get_errno()))


def check_memory_mib(need_mib, what):
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    avail_mib = int(fields["MemAvailable"].split()[0]) // 1024
    if avail_mib < need_mib:
        raise BenchError(f"{what} needs about {need_mib} MiB free memory, "
                         f"{avail_mib} MiB available")


def check_memory(size_mib):
    """The holder, its page images in page cache (ours, upstream's, the dump floor's) and the
    floor's copy live at once."""
    check_memory_mib(5 * size_mib + 512, f"{size_mib} MiB case")


def spawn_holder(size_mib, log_path, options=(), program=HOLDER):
    """Start the holder (or another subject program taking its size last) in its own
    session, fds only on files criu can dump."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    # posix_spawn, not subprocess: Popen may waitpid() a pid it thinks is its own, and the
    # restored holder reuses that pid.
    return os.posix_spawn(program, [program, *options, str(size_mib)], os.environ,
                          file_actions=actions, setsid=True)


def read_log(log_path):
    with open(log_path) as log:
        return log.read()


def wait_ready(pid, log_path):
    deadline = time.monotonic() + HOLDER_READY_TIMEOUT_S
    while "ready" not in read_log(log_path):
        done_pid, status = os.waitpid(pid, os.WNOHANG)
        if done_pid:
            raise BenchError(f"holder {pid} exited before it was ready (status {status:#x}): "
                             + read_log(log_path).strip())
        if time.monotonic() > deadline:
            raise BenchError(f"holder {pid} not ready after {HOLDER_READY_TIMEOUT_S} s")
        time.sleep(0.05)


def run_timed(argv, what, log_hint):
    start = time.monotonic()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=CRIU_TIMEOUT_S)
    elapsed = time.monotonic() - start
    if proc.returncode:
        raise BenchError(f"{what} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip() or proc.stdout.strip()} (see {log_hint})")
    return elapsed, proc.stdout


def fresh_dir(path):
    """Old images go first: deleting them also frees their page cache."""
    shutil.rmtree(path, ignore_errors=True)
    os.mkdir(path)


def dump(pid, img_dir, criu=CRIU):
    fresh_dir(img_dir)
    seconds, _ = run_timed([criu, "dump", "-t", str(pid), "-D", img_dir, "-o", "dump.log"],
                           f"criu dump -t {pid}", os.path.join(img_dir, "dump.log"))
    # The dump killed the holder; its pid must be free before restore can reuse it.
    os.waitpid(pid, 0)
    # Write the dirty images back now, outside any timing, so that restore and floor both
    # read clean page cache instead of competing with writeback. Nothing is dropped.
    os.sync()
    return seconds


def restore(pid, img_dir, live):
    seconds, _ = run_timed([CRIU, "restore", "-D", img_dir, "-d", "-o", "restore.log"],
                           "criu restore -d", os.path.join(img_dir, "restore.log"))
    live.add(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise BenchError(f"holder {pid} is not running after restore") from None
    return seconds


def pages_images(img_dir):
    pages = sorted(glob.glob(os.path.join(img_dir, "pages-*.img")))
    if not pages:
        raise BenchError(f"no pages-*.img in {img_dir}")
    return pages


def floor(img_dir):
    _, out = run_timed([FLOOR] + pages_images(img_dir), "floor", img_dir)
    return float(out)


def dump_floor(img_dir, floor_dir):
    """As many bytes as the dump's pages images, written like dd into a fresh directory."""
    nr_bytes = sum(os.path.getsize(p) for p in pages_images(img_dir))
    fresh_dir(floor_dir)
    _, out = run_timed([DUMP_FLOOR, os.path.join(floor_dir, "pages.img"), str(nr_bytes)],
                       "dump floor", floor_dir)
    os.sync()
    return float(out)


def upstream_dump(pid, up_dir, live):
    """The reference criu's dump (None: absent), restored by ours, untimed, so that the
    holder runs on and its final check covers this restore too."""
    if not os.access(UPSTREAM_CRIU, os.X_OK):
        return None
    seconds = dump(pid, up_dir, UPSTREAM_CRIU)
    live.discard(pid)
    restore(pid, up_dir, live)
    return seconds


def stop_holder(pid, log_path):
    """SIGTERM makes the holder check its whole memory; exit 0 means every word is intact."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + HOLDER_CHECK_TIMEOUT_S
    while True:
        done_pid, status = os.waitpid(pid, os.WNOHANG)
        if done_pid:
            break
        if time.monotonic() > deadline:
            raise BenchError(f"holder {pid} did not finish its memory check within "
                             f"{HOLDER_CHECK_TIMEOUT_S} s of SIGTERM")
        time.sleep(0.05)
    if os.waitstatus_to_exitcode(status) != 0 or "PASS" not in read_log(log_path):
        raise BenchError(f"holder {pid} memory check failed (status {status:#x}): "
                         + read_log(log_path).strip().splitlines()[-1])


def bench_size(size_mib, scratch, live):
    check_memory(size_mib)
    img_dir = os.path.join(scratch, f"images-{size_mib}M")
    up_dir = os.path.join(scratch, f"upstream-{size_mib}M")
    floor_dir = os.path.join(scratch, f"dumpfloor-{size_mib}M")
    log_path = os.path.join(scratch, f"holder-{size_mib}M.log")
    pid = spawn_holder(size_mib, log_path)
    live.add(pid)
    wait_ready(pid, log_path)
    rounds = []
    # Each round dumps the holder that the previous round restored, so the final memory
    # check covers every restore.
    for round_nr in range(1, ROUNDS + 1):
        dump_s = dump(pid, img_dir)
        live.discard(pid)
        # The floor runs while the holder is dead, as restore does: with the restored
        # holder still resident the floor needs memory the host has reclaimed, and its
        # first touch then cost 3-4x more here (4 GiB: 14 s instead of 3.5 s).
        floor_s = floor(img_dir)
        restore_s = restore(pid, img_dir, live)
        up_s = upstream_dump(pid, up_dir, live)
        dump_floor_s = dump_floor(img_dir, floor_dir)
        rounds.append((dump_s, restore_s, floor_s, up_s, dump_floor_s))
        up_text = "absent" if up_s is None else f"{up_s:.3f} s"
        print(f"{size_mib:6d} MiB round {round_nr}: dump {dump_s:.3f} s, upstream dump {up_text}, "
              f"dump floor {dump_floor_s:.3f} s, restore {restore_s:.3f} s, "
              f"floor {floor_s:.3f} s", flush=True)
    stop_holder(pid, log_path)
    live.discard(pid)
    for path in (img_dir, up_dir, floor_dir):
        shutil.rmtree(path, ignore_errors=True)
    return rounds


def wait_log(log_path, text, what):
    deadline = time.monotonic() + HOLDER_READY_TIMEOUT_S
    while text not in read_log(log_path):
        if time.monotonic() > deadline:
            raise BenchError(f"holder: no '{text}' after {what}")
        time.sleep(0.01)


def incremental_round(scratch, live):
    """Pre-dump, 64 MiB changed, final dump on top; returns (pre-dump s, dump s, bytes)."""
    pre_dir = os.path.join(scratch, "incr-pre")
    img_dir = os.path.join(scratch, "incr-final")
    log_path = os.path.join(scratch, "holder-incr.log")
    if os.path.exists(log_path):
        os.unlink(log_path)
    pid = spawn_holder(INCR_MIB, log_path, ["-d", str(INCR_DIRTY_MIB)])
    live.add(pid)
    wait_ready(pid, log_path)
    fresh_dir(pre_dir)
    pre_s, _ = run_timed([CRIU, "pre-dump", "-t", str(pid), "-D", pre_dir, "-o", "pre-dump.log"],
                         f"criu pre-dump -t {pid}", os.path.join(pre_dir, "pre-dump.log"))
    os.sync()
    os.kill(pid, signal.SIGUSR1)
    wait_log(log_path, "dirtied", "SIGUSR1")
    fresh_dir(img_dir)
    dump_s, _ = run_timed([CRIU, "dump", "-t", str(pid), "-D", img_dir, "-o", "dump.log",
                           "--prev-images-dir", "../" + os.path.basename(pre_dir)],
                          f"criu dump -t {pid} --prev-images-dir", os.path.join(img_dir, "dump.log"))
    os.waitpid(pid, 0)
    live.discard(pid)
    os.sync()
    nr_bytes = sum(os.path.getsize(p) for p in pages_images(img_dir))
    restore(pid, img_dir, live)
    stop_holder(pid, log_path)
    live.discard(pid)
    shutil.rmtree(img_dir)
    shutil.rmtree(pre_dir)
    return pre_s, dump_s, nr_bytes


def bench_incremental(scratch, live):
    # the holder, the pre-dump's images and the restore's reads, plus headroom
    check_memory_mib(2 * INCR_MIB + 512, f"{INCR_MIB} MiB incremental case")
    rounds = []
    for round_nr in range(1, ROUNDS + 1):
        pre_s, dump_s, nr_bytes = incremental_round(scratch, live)
        rounds.append((pre_s, dump_s, nr_bytes))
        print(f"incremental {INCR_MIB} MiB round {round_nr}: pre-dump {pre_s:.3f} s, "
              f"{INCR_DIRTY_MIB} MiB changed, final dump {dump_s:.3f} s, "
              f"{nr_bytes / 2**20:.1f} MiB of pages, verified", flush=True)
    return rounds


def print_incremental(rounds):
    pre_s = statistics.median(r[0] for r in rounds)
    dump_s = statistics.median(r[1] for r in rounds)
    mib = statistics.median(r[2] for r in rounds) / 2**20
    size = f"{INCR_MIB // 1024} GiB" if INCR_MIB % 1024 == 0 else f"{INCR_MIB} MiB"
    print()
    print(f"{'incremental':>12} {'pre-dump s':>10} {'changed':>8} {'dump s':>8} {'pages MiB':>10}")
    print(f"{size:>12} {pre_s:10.3f} {str(INCR_DIRTY_MIB) + ' MiB':>8} {dump_s:8.3f} {mib:10.1f}")
    print(f"(medians of {ROUNDS} rounds; the final dump with --prev-images-dir stores only the "
          "pages written since the pre-dump)")


def print_table(results):
    print()
    print(f"{'size':>8} {'dump s':>8} {'upstream s':>10} {'dfloor s':>8} {'dump/up':>8} "
          f"{'dump/dfloor':>11} {'restore s':>10} {'floor s':>8} {'restore/floor':>14}")
    for size_mib, rounds in results:
        med = [statistics.median(r[i] for r in rounds) for i in (0, 1, 2, 4)]
        dump_s, restore_s, floor_s, dump_floor_s = med
        ratio = statistics.median(r[1] / r[2] for r in rounds)
        dump_floor_ratio = statistics.median(r[0] / r[4] for r in rounds)
        if rounds[0][3] is None:
            up_text, up_ratio = "absent", "-"
        else:
            up_text = f"{statistics.median(r[3] for r in rounds):.3f}"
            up_ratio = f"{statistics.median(r[0] / r[3] for r in rounds):.2f}"
        size = f"{size_mib // 1024} GiB" if size_mib % 1024 == 0 else f"{size_mib} MiB"
        print(f"{size:>8} {dump_s:8.3f} {up_text:>10} {dump_floor_s:8.3f} {up_ratio:>8} "
              f"{dump_floor_ratio:11.2f} {restore_s:10.3f} {floor_s:8.3f} {ratio:14.2f}")
    print(f"(medians of {ROUNDS} interleaved rounds; the ratios are medians of the per-round "
          "ratios; dfloor: the dump floor)")
    print(f"restore/floor = {statistics.median(r[1] / r[2] for r in results[-1][1]):.2f}")


def tree_pids(root):
    """root and its descendants, through every thread's children list."""
    pids, todo = [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        for children in glob.glob(f"/proc/{pid}/task/*/children"):
            try:
                with open(children) as children_file:
                    todo += [int(child) for child in children_file.read().split()]
            except FileNotFoundError:
                pass
    return pids


def reap_orphans():
    """Children of a killed tree are reparented to us, the subreaper: reap them."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def wait_tree_gone(pids):
    """criu dump kills the whole tree; its pids must be free before restore reuses them."""
    deadline = time.monotonic() + HOLDER_CHECK_TIMEOUT_S
    while any(os.path.exists(f"/proc/{pid}") for pid in pids):
        reap_orphans()
        if time.monotonic() > deadline:
            raise BenchError(f"processes of the dumped tree {pids} are still there")
        time.sleep(0.01)


def tree_round(case, scratch, live):
    """Fresh holder, dump, restore, full check; returns (dump s, restore s)."""
    label, options, nr_procs, size_mib = case
    img_dir = os.path.join(scratch, "images-tree")
    log_path = os.path.join(scratch, "holder-tree.log")
    if os.path.exists(log_path):
        os.unlink(log_path)
    pid = spawn_holder(size_mib, log_path, options)
    live.add(pid)
    wait_ready(pid, log_path)
    pids = tree_pids(pid)
    if len(pids) != nr_procs:
        raise BenchError(f"{label}: the holder tree has {len(pids)} processes")
    live.update(pids)
    dump_s = dump(pid, img_dir)
    wait_tree_gone(pids)
    live.difference_update(pids)
    restore_s = restore(pid, img_dir, live)
    restored = tree_pids(pid)
    live.update(restored)
    if sorted(restored) != sorted(pids):
        raise BenchError(f"{label}: restored tree {sorted(restored)}, dumped {sorted(pids)}")
    stop_holder(pid, log_path)
    wait_tree_gone(pids)
    live.difference_update(pids)
    shutil.rmtree(img_dir)
    return dump_s, restore_s


def bench_trees(scratch, live):
    """The cases interleaved round by round; returns [(case, [(dump s, restore s)])]."""
    for _, _, nr_procs, size_mib in TREE_CASES:
        # the holder tree and its page images (page cache) at once, plus headroom
        check_memory_mib(2 * nr_procs * size_mib + 512, f"{nr_procs} x {size_mib} MiB case")
    results = [(case, []) for case in TREE_CASES]
    for round_nr in range(1, ROUNDS + 1):
        for case, rounds in results:
            dump_s, restore_s = tree_round(case, scratch, live)
            rounds.append((dump_s, restore_s))
            print(f"{case[0]} round {round_nr}: dump {dump_s:.3f} s, "
                  f"restore {restore_s:.3f} s, verified", flush=True)
    return results


def print_tree_table(results):
    print()
    print(f"{'case':<32} {'dump s':>8} {'restore s':>10}")
    for case, rounds in results:
        dump_s = statistics.median(r[0] for r in rounds)
        restore_s = statistics.median(r[1] for r in rounds)
        print(f"{case[0]:<32} {dump_s:8.3f} {restore_s:10.3f}")
    print(f"(medians of {ROUNDS} interleaved rounds, each restore checked word by word)")


def kill_leftovers(live):
    """Whole trees: the root first, then whatever of its tree came to us meanwhile."""
    for pid in live:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in live:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
    reap_orphans()


def main():
    if os.geteuid() != 0:
        print("bench: must run as root (criu needs it)", file=sys.stderr)
        return 1
    for prog in (CRIU, HOLDER, FLOOR, DUMP_FLOOR):
        if not os.access(prog, os.X_OK):
            print(f"bench: {prog} is missing; run make first", file=sys.stderr)
            return 1
    scratch = tempfile.mkdtemp(prefix="criu-bench-", dir=SCRATCH_PARENT)
    live = set()
    results = []
    tree_results = []
    incr_results = []
    ok = False
    try:
        become_subreaper()
        print(f"criu dump/restore benchmark: trees and threads, sizes {SIZES_MIB} MiB, "
              f"{ROUNDS} rounds each, images in page cache under {scratch}", flush=True)
        tree_results = bench_trees(scratch, live)
        for size_mib in SIZES_MIB:
            results.append((size_mib, bench_size(size_mib, scratch, live)))
        if INCR_MIB:
            incr_results = bench_incremental(scratch, live)
        ok = True
    except (BenchError, subprocess.TimeoutExpired, OSError) as err:
        print(f"bench: FAIL: {err}", file=sys.stderr)
    finally:
        kill_leftovers(live)
    if not ok:
        # Keep the logs for whoever debugs this, not gigabytes of pages.
        for pages in glob.glob(os.path.join(scratch, "*", "pages-*.img")):
            os.unlink(pages)
        print(f"bench: logs kept in {scratch}", file=sys.stderr)
        return 1
    shutil.rmtree(scratch)
    print_tree_table(tree_results)
    if results:
        print_table(results)
    if incr_results:
        print_incremental(incr_results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
