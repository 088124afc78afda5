#!/usr/bin/env python3
"""Lazy restore benchmark (make bench, after bench.py's tables): for a holder of each size,
round by round, a full restore and a lazy one (criu lazy-pages + restore --lazy-pages) of
the same dump, and a remote lazy one (dump --lazy-pages serving the frozen holder's pages
on a loopback port, criu lazy-pages --page-server + restore --lazy-pages) of a second
holder, the init of a pid namespace of its own (its restore gets its pids back while the
dumped holder is still there), each measured as

  time to run: from starting criu restore to the holder running its own code again, on
               CLOCK_MONOTONIC as the holder itself reads it (holder -r prints when it
               wakes after a long gap);
  total:       from starting criu restore to every page present: criu restore's exit for
               the full restore, the lazy-pages daemon's exit for the lazy ones.

The holder checks every word of its memory once it is stopped at the end, so each restore
of it is verified. Environment: BENCH_LAZY_SIZES_MIB (default "1024 4096 8192"),
BENCH_ROUNDS (default 3), BENCH_DIR (as bench.py).
"""
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import bench

SIZES_MIB = [int(s) for s in os.environ.get("BENCH_LAZY_SIZES_MIB", "1024 4096 8192").split()]
RESUME_TIMEOUT_S = 60


def resume_stamps(log_path):
    """Every "resumed at NS" the holder printed, in order."""
    return [int(line.split()[-2]) for line in bench.read_log(log_path).splitlines()
            if " resumed at " in line]


def wait_resumed(log_path, seen):
    """The holder's stamp for the restore just done: the first one after the seen ones."""
    deadline = time.monotonic() + RESUME_TIMEOUT_S
    while True:
        stamps = resume_stamps(log_path)
        if len(stamps) > seen:
            return stamps[seen]
        if time.monotonic() > deadline:
            raise bench.BenchError(f"the holder did not run within {RESUME_TIMEOUT_S} s "
                                   "of its restore")
        time.sleep(0.01)


def restore(pid, img_dir, live, lazy):
    """One restore; returns (start ns, ns when every page is present)."""
    daemon = None
    argv = [bench.CRIU, "restore", "-D", img_dir, "-d", "-o", "restore.log"]
    if lazy:
        daemon = subprocess.Popen([bench.CRIU, "lazy-pages", "-D", img_dir, "-o", "lazy-pages.log"],
                                  stdin=subprocess.DEVNULL)
        argv.append("--lazy-pages")
    start = time.monotonic_ns()
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=bench.CRIU_TIMEOUT_S)
        done = time.monotonic_ns()
        if proc.returncode:
            raise bench.BenchError(f"criu restore{' --lazy-pages' if lazy else ''} failed: "
                                   f"{proc.stderr.strip()} (see {img_dir}/restore.log)")
        live.add(pid)
        if daemon:
            if daemon.wait(timeout=bench.CRIU_TIMEOUT_S):
                raise bench.BenchError(f"criu lazy-pages failed (see {img_dir}/lazy-pages.log)")
            done = time.monotonic_ns()
            daemon = None
    finally:
        if daemon:
            daemon.kill()
            daemon.wait()
    return start, done


def spawn_ns_holder(size_mib, log_path):
    """The holder as the init of a new pid namespace, leading a session there (CRIU dumps no
    session leader outside the namespace): (the unshare launcher, the holder's pid here)."""
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    launcher = os.posix_spawnp("unshare", ["unshare", "--pid", "--fork", "setsid", bench.HOLDER,
                                           "-r", str(size_mib)], os.environ,
                               file_actions=actions, setsid=True)
    children = f"/proc/{launcher}/task/{launcher}/children"
    deadline = time.monotonic() + bench.HOLDER_READY_TIMEOUT_S
    while True:
        with open(children) as f:
            pids = f.read().split()
        if pids:
            return launcher, int(pids[0])
        if time.monotonic() > deadline:
            raise bench.BenchError("unshare started no holder")
        time.sleep(0.01)


def wait_cpu(proc):
    """Waits for a criu process of ours: (its exit code, its CPU seconds, user and system,
    its threads' included)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime


def remote_restore(pid, img_dir, parent):
    """dump --lazy-pages of the holder, then its remote lazy restore; returns (start ns, ns
    when every page is present, the restored holder's pid here, the CPU seconds the source
    and the daemon took). parent: the child of ours that goes with the dumped holder (the
    launcher, or the holder itself once restored)."""
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = str(sk.getsockname()[1])
    bench.fresh_dir(img_dir)
    ready_r, ready_w = os.pipe()
    source = subprocess.Popen([bench.CRIU, "dump", "-t", str(pid), "-D", img_dir, "--lazy-pages",
                               "--address", "127.0.0.1", "--port", port, "--status-fd",
                               str(ready_w), "-o", "dump.log"],
                              stdin=subprocess.DEVNULL, pass_fds=[ready_w])
    os.close(ready_w)
    daemon = None
    try:
        ready = (select.select([ready_r], [], [], bench.CRIU_TIMEOUT_S)[0] and
                 os.read(ready_r, 1))
        if ready != b"\0":
            raise bench.BenchError(f"criu dump --lazy-pages failed (see {img_dir}/dump.log)")
        daemon = subprocess.Popen([bench.CRIU, "lazy-pages", "-D", img_dir, "--page-server",
                                   "--address", "127.0.0.1", "--port", port,
                                   "-o", "lazy-pages.log"], stdin=subprocess.DEVNULL)
        pidfile = os.path.join(img_dir, "restored.pid")
        start = time.monotonic_ns()
        proc = subprocess.run([bench.CRIU, "restore", "-D", img_dir, "-d", "--lazy-pages",
                               "--pidfile", pidfile, "-o", "restore.log"],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=bench.CRIU_TIMEOUT_S)
        if proc.returncode:
            raise bench.BenchError(f"criu restore --lazy-pages failed: {proc.stderr.strip()} "
                                   f"(see {img_dir}/restore.log)")
        code, daemon_cpu = wait_cpu(daemon)
        if code:
            raise bench.BenchError(f"criu lazy-pages failed (see {img_dir}/lazy-pages.log)")
        done = time.monotonic_ns()
        daemon = None
        code, source_cpu = wait_cpu(source)
        if code:
            raise bench.BenchError(f"criu dump --lazy-pages failed (see {img_dir}/dump.log)")
        source = None
        os.waitpid(parent, 0)
        with open(pidfile) as f:
            return start, done, int(f.read().split()[0]), source_cpu, daemon_cpu
    finally:
        os.close(ready_r)
        for proc in (daemon, source):
            if proc:
                proc.kill()
                proc.wait()


def bench_remote(size_mib, scratch, live):
    """The remote lazy columns of each round, for one holder restored again and again."""
    img_dir = os.path.join(scratch, f"remote-{size_mib}M")
    log_path = os.path.join(scratch, f"remote-holder-{size_mib}M.log")
    launcher, pid = spawn_ns_holder(size_mib, log_path)
    live.add(pid)
    bench.wait_ready(launcher, log_path)
    rounds = []
    for round_nr in range(1, bench.ROUNDS + 1):
        seen = len(resume_stamps(log_path))
        start, all_in, restored, source_cpu, daemon_cpu = remote_restore(pid, img_dir,
                                                                         launcher or pid)
        live.discard(pid)
        pid, launcher = restored, None
        live.add(pid)
        resumed = wait_resumed(log_path, seen)
        rounds.append([(resumed - start) / 1e6, (all_in - start) / 1e6, source_cpu, daemon_cpu])
        print(f"{size_mib:6d} MiB round {round_nr}: remote lazy: runs after "
              f"{rounds[-1][0]:.1f} ms, all in {rounds[-1][1]:.1f} ms, CPU s: source "
              f"{source_cpu:.2f}, daemon {daemon_cpu:.2f}", flush=True)
    bench.stop_holder(pid, log_path)
    live.discard(pid)
    return rounds


def bench_size(size_mib, scratch, live):
    # the holder and its page images in page cache at once, plus headroom
    bench.check_memory_mib(2 * size_mib + 512, f"{size_mib} MiB lazy case")
    img_dir = os.path.join(scratch, f"lazy-{size_mib}M")
    log_path = os.path.join(scratch, f"lazy-holder-{size_mib}M.log")
    pid = bench.spawn_holder(size_mib, log_path, ["-r"])
    live.add(pid)
    bench.wait_ready(pid, log_path)
    rounds = []
    for round_nr in range(1, bench.ROUNDS + 1):
        row = []
        for lazy in (False, True):
            bench.dump(pid, img_dir)
            live.discard(pid)
            seen = len(resume_stamps(log_path))
            start, all_in = restore(pid, img_dir, live, lazy)
            resumed = wait_resumed(log_path, seen)
            row += [(resumed - start) / 1e6, (all_in - start) / 1e6]
        rounds.append(row)
        print(f"{size_mib:6d} MiB round {round_nr}: full restore: runs after {row[0]:.1f} ms, "
              f"all in {row[1]:.1f} ms; lazy: runs after {row[2]:.1f} ms, all in {row[3]:.1f} ms",
              flush=True)
    bench.stop_holder(pid, log_path)
    live.discard(pid)
    return rounds


def print_table(results):
    print()
    print(f"{'size':>8} {'full: run ms':>13} {'full: all ms':>13} {'lazy: run ms':>13} "
          f"{'lazy: all ms':>13} {'remote: run ms':>15} {'remote: all ms':>15} "
          f"{'src cpu s':>10} {'daemon cpu s':>13}")
    for size_mib, rounds in results:
        cols = [statistics.median(r[i] for r in rounds) for i in range(8)]
        size = f"{size_mib // 1024} GiB" if size_mib % 1024 == 0 else f"{size_mib} MiB"
        print(f"{size:>8} " + " ".join(f"{c:13.1f}" for c in cols[:4]) +
              "".join(f" {c:15.1f}" for c in cols[4:6]) + f" {cols[6]:10.2f} {cols[7]:13.2f}")
    print(f"(medians of {bench.ROUNDS} rounds, full and lazy restore of the same dump "
          "interleaved, remote lazy of a holder in a pid namespace after them; run: the "
          "holder's own clock; every restore checked word by word; cpu s: the CPU seconds "
          "of the remote source (dump --lazy-pages) and of its daemon, which share this "
          "machine's CPUs)")


def main():
    if os.geteuid() != 0:
        print("lazy bench: must run as root (criu needs it)", file=sys.stderr)
        return 1
    scratch = tempfile.mkdtemp(prefix="criu-lazy-bench-", dir=bench.SCRATCH_PARENT)
    live, results, ok = set(), [], False
    try:
        bench.become_subreaper()
        print(f"criu lazy restore benchmark: sizes {SIZES_MIB} MiB, {bench.ROUNDS} rounds each, "
              f"images in page cache under {scratch}", flush=True)
        for size_mib in SIZES_MIB:
            local = bench_size(size_mib, scratch, live)
            bench.shutil.rmtree(os.path.join(scratch, f"lazy-{size_mib}M"))
            remote = bench_remote(size_mib, scratch, live)
            bench.shutil.rmtree(os.path.join(scratch, f"remote-{size_mib}M"))
            results.append((size_mib, [l + r for l, r in zip(local, remote)]))
        ok = True
    except (bench.BenchError, subprocess.TimeoutExpired, OSError) as err:
        print(f"lazy bench: FAIL: {err}", file=sys.stderr)
    finally:
        bench.kill_leftovers(live)
    if not ok:
        for pages in bench.glob.glob(os.path.join(scratch, "*", "pages-*.img")):
            os.unlink(pages)
        print(f"lazy bench: logs kept in {scratch}", file=sys.stderr)
        return 1
    bench.shutil.rmtree(scratch)
    print_table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
