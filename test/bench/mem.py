#!/usr/bin/env python3
"""Ours against upstream criu (make bench, after lazy.py), side by side in one run, three
parts, each in interleaved rounds: ours first in odd rounds, upstream first in even ones
(A B B A ...), the floor after both:

1. dump:  criu dump of a fresh holder of 1 GiB and of 4 GiB by ours and by upstream, and
          the write floor (dumpfloor: as many bytes as our pages images hold, written like
          dd into a file in the same scratch directory, left in page cache as a dump's).
          Goals: ours <= 0.8x upstream and ours <= 1.5x the floor, in every round.
2. tree:  criu dump of a tree of 8 processes (holder -p 8) with 256 MiB of its own each,
          and of one process of 256 MiB alone, by each tool: the dump's time, and the frozen
          time both tools write to stats-dump (one number for the whole tree: both freeze
          every task first and release them all at the end, so it is each task's).
          Goal: the tree dumps faster than 8 dumps of the single process (tree < 8x one).
3. cow:   restore of a tree sharing memory copy-on-write (cowtree: a parent fills 256 MiB
          then forks 4 children that read it; in the second variant each child rewrites 10%
          of the pages first), each tool restoring its own dump: criu restore -d's time and
          the tree's Pss (the sum of Pss in /proc/PID/smaps_rollup over its processes) after
          the restore against before the dump. Goals: Pss ratio <= 1.05; ours <= upstream.

Every dump is of a freshly started subject and is restored (timed in part 3 only) by the
tool that wrote it; the subject then checks every word of its memory in every process, and
a round only counts when that check passes (else the benchmark fails). Both tools run with
the same log level (-v2, BENCH_LOG_LEVEL), write their images into the same scratch
directory, and find the same page cache: before each timed step the step's own images of
the round before are deleted (each writer, the floor too, finds the memory it used last
freed just before, whichever step ran before it) and everything is written back (sync);
nothing is dropped (BENCH_DROP_CACHES=1 drops the page cache before every timed step too,
for both tools alike).

Environment: BENCH_MEM_ROUNDS (default 4), BENCH_MEM_PARTS (default "dump tree cow"),
BENCH_MEM_DUMP_MIB (default "1024 4096"), BENCH_MEM_TREE (processes and MiB each, default
"8 256"), BENCH_MEM_COW (children and MiB, default "4 256"), BENCH_QUICK=1 (2 rounds,
sizes 64 and 256 MiB, a tree of 8 x 32 MiB, 4 children on 64 MiB: to try it out),
BENCH_DIR (as bench.py). Upstream criu is ../shared/upstream-criu/bin/criu; without it the
benchmark says so in one line and runs ours (and the floor) alone.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import bench

CRIT = os.path.normpath(os.path.join(bench.HERE, "..", "..", "crit", "crit"))
COWTREE = os.path.join(bench.HERE, "cowtree")

QUICK = os.environ.get("BENCH_QUICK", "0") not in ("", "0")


def env_ints(name, default, quick):
    return [int(word) for word in os.environ.get(name, quick if QUICK else default).split()]


ROUNDS = env_ints("BENCH_MEM_ROUNDS", "4", "2")[0]
PARTS = os.environ.get("BENCH_MEM_PARTS", "dump tree cow").split()
DUMP_SIZES_MIB = env_ints("BENCH_MEM_DUMP_MIB", "1024 4096", "64 256")
TREE_TASKS, TREE_MIB = env_ints("BENCH_MEM_TREE", "8 256", "8 32")
COW_CHILDREN, COW_MIB = env_ints("BENCH_MEM_COW", "4 256", "4 64")
COW_VARIANTS = [("read only", 0), ("rewrite 10%", 10)]  # (label, % of pages each child rewrites)
LOG_LEVEL = os.environ.get("BENCH_LOG_LEVEL", "2")
DROP_CACHES = os.environ.get("BENCH_DROP_CACHES", "0") not in ("", "0")

GOAL_DUMP_VS_UPSTREAM = 0.8
GOAL_DUMP_VS_FLOOR = 1.5
GOAL_TREE_VS_SINGLES = 1.0
GOAL_PSS_RATIO = 1.05
GOAL_RESTORE_VS_UPSTREAM = 1.0

OURS = ("ours", bench.CRIU)
UPSTREAM = ("upstream", bench.UPSTREAM_CRIU)


def size_text(mib):
    return f"{mib // 1024} GiB" if mib % 1024 == 0 else f"{mib} MiB"


# ------------------------------------------------------------------ the steps ----

def settle_caches():
    """Before every timed step: dirty pages written back; the cache dropped if asked."""
    os.sync()
    if DROP_CACHES:
        with open("/proc/sys/vm/drop_caches", "w") as drop:
            drop.write("3\n")


def run_criu(tool, action, img_dir, *args):
    """One criu command of tool (name, path) on img_dir; its seconds."""
    name, path = tool
    log = f"{action}.log"
    seconds, _ = bench.run_timed([path, action, *args, "-D", img_dir, f"-v{LOG_LEVEL}", "-o", log],
                                 f"{name} criu {action}", os.path.join(img_dir, log))
    return seconds


def start_subject(scratch, name, program, options, size_mib, nr_tasks, live):
    """A fresh holder or cowtree, ready: (its pid, the pids of its tree, its log)."""
    log = os.path.join(scratch, f"{name}.log")
    if os.path.exists(log):
        os.unlink(log)
    pid = bench.spawn_holder(size_mib, log, options, program)
    live.add(pid)
    bench.wait_ready(pid, log)
    pids = bench.tree_pids(pid)
    live.update(pids)
    if len(pids) != nr_tasks:
        raise bench.BenchError(f"{name}: {len(pids)} processes, expected {nr_tasks}")
    return pid, pids, log


def dump_subject(tool, pid, pids, img_dir, live):
    """Timed; the dump kills the tree, whose pids must be free before the restore. The
    images of the step's previous round go first (freeing their page cache), as a re-dump
    does: every writer, the floor included, finds the memory it used last freed just before,
    whatever ran before it."""
    bench.fresh_dir(img_dir)
    settle_caches()
    seconds = run_criu(tool, "dump", img_dir, "-t", str(pid))
    bench.wait_tree_gone(pids)
    live.difference_update(pids)
    return seconds


def restore_subject(tool, pid, pids, img_dir, live):
    """criu restore -d by the tool that dumped; its seconds, once the same pids run again."""
    settle_caches()
    live.update(pids)  # before: interrupted, the benchmark still kills what came back
    seconds = run_criu(tool, "restore", img_dir, "-d")
    restored = bench.tree_pids(pid) if os.path.exists(f"/proc/{pid}") else []
    if sorted(restored) != sorted(pids):
        raise bench.BenchError(f"{tool[0]} restore: tree {sorted(restored)}, dumped {sorted(pids)}")
    return seconds


def remove_images(scratch):
    """A part's image directories, once its rounds are done: the next part starts clean."""
    for entry in os.scandir(scratch):
        if entry.is_dir():
            shutil.rmtree(entry.path)


def stop_subject(pid, pids, log, live):
    """The subject checks every word in every process: a round counts only if it passes."""
    bench.stop_holder(pid, log)
    bench.wait_tree_gone(pids)
    live.difference_update(pids)


def frozen_ms(img_dir):
    """The frozen time the dump wrote to stats-dump (both tools: the whole tree's)."""
    proc = subprocess.run([CRIT, "decode", "-i", os.path.join(img_dir, "stats-dump")],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise bench.BenchError(f"crit decode {img_dir}/stats-dump: {proc.stderr.strip()}")
    return json.loads(proc.stdout)["entries"][0]["dump"]["frozen_time"] / 1000


def tree_pss_mib(pids):
    """The sum of Pss over the processes, from their smaps_rollup."""
    total_kib = 0
    for pid in pids:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            total_kib += sum(int(line.split()[1]) for line in rollup if line.startswith("Pss:"))
    return total_kib / 1024


def run_rounds(label, blocks, tail=()):
    """blocks: each tool's steps [(key, function returning a dict)], ours first. Odd rounds
    run the blocks in this order, even ones in reverse (upstream first), a block's steps
    always in the same order, and the tail (the floor) after them. So no step follows
    itself from one round to the next, and each tool's step follows the same steps as the
    other's over two rounds. Returns one {key: dict} per round."""
    rounds = []
    for round_nr in range(1, ROUNDS + 1):
        ordered = blocks if round_nr % 2 else blocks[::-1]
        order = [step for block in ordered for step in block] + list(tail)
        results = {key: step() for key, step in order}
        rounds.append(results)
        shown = ", ".join(f"{key} " + " ".join(f"{field} {value:.3f}"
                                                 for field, value in results[key].items())
                          for key, _ in order)
        print(f"{label} round {round_nr}: {shown}", flush=True)
    return rounds


# ------------------------------------------------------------ goals and ranges ----

def ratios(rounds, num, den):
    """Per round num(round) / den(round)."""
    return [num(r) / den(r) for r in rounds]


def range_text(values):
    return f"{min(values):.2f}-{max(values):.2f}"


def goal_text(values, limit):
    """'yes' when every round's ratio is within limit, else 'no (K/N)': within it in K of N."""
    met = sum(v <= limit for v in values)
    return "yes" if met == len(values) else f"no ({met}/{len(values)})"


def median(rounds, key, field):
    return statistics.median(r[key][field] for r in rounds)


# -------------------------------------------------------------------- 1. dump ----

def bench_dump(tools, scratch, live):
    results = []
    for size_mib in DUMP_SIZES_MIB:
        # the holder, and the images of ours, upstream and the floor kept till their next turn
        bench.check_memory_mib(4 * size_mib + 1024, f"the {size_mib} MiB dump")
        floor_bytes = [0]  # our pages images' size this round, what the floor writes

        def dump_step(tool, size_mib=size_mib, floor_bytes=floor_bytes):
            pid, pids, log = start_subject(scratch, f"holder-{tool[0]}", bench.HOLDER, (),
                                           size_mib, 1, live)
            img_dir = os.path.join(scratch, f"{tool[0]}-{size_mib}M")
            seconds = dump_subject(tool, pid, pids, img_dir, live)
            if tool == OURS:
                floor_bytes[0] = sum(os.path.getsize(p) for p in bench.pages_images(img_dir))
            restore_subject(tool, pid, pids, img_dir, live)
            stop_subject(pid, pids, log, live)
            return {"s": seconds}

        def floor_step(floor_bytes=floor_bytes):
            """After ours in every round (the tail of the round)."""
            floor_dir = os.path.join(scratch, "dumpfloor")
            bench.fresh_dir(floor_dir)
            settle_caches()
            _, out = bench.run_timed([bench.DUMP_FLOOR, os.path.join(floor_dir, "pages.img"),
                                      str(floor_bytes[0])], "dump floor", floor_dir)
            return {"s": float(out)}

        blocks = [[(tool[0], lambda tool=tool: dump_step(tool))] for tool in tools]
        results.append((size_mib, run_rounds(f"dump {size_text(size_mib)}", blocks,
                                             [("floor", floor_step)])))
        remove_images(scratch)
    return results


def print_dump(results, tools):
    up = UPSTREAM in tools
    print()
    print(f"{'dump':>8} {'ours s':>7} {'upstream s':>10} {'floor s':>7} {'ours/upstream':>13} "
          f"{'<=0.8 all':>9} {'ours/floor':>10} {'<=1.5 all':>9}")
    for size_mib, rounds in results:
        vs_floor = ratios(rounds, lambda r: r["ours"]["s"], lambda r: r["floor"]["s"])
        up_s = vs_up_range = vs_up_goal = "absent"
        if up:
            vs_up = ratios(rounds, lambda r: r["ours"]["s"], lambda r: r["upstream"]["s"])
            up_s = f"{median(rounds, 'upstream', 's'):.3f}"
            vs_up_range, vs_up_goal = range_text(vs_up), goal_text(vs_up, GOAL_DUMP_VS_UPSTREAM)
        print(f"{size_text(size_mib):>8} {median(rounds, 'ours', 's'):7.3f} {up_s:>10} "
              f"{median(rounds, 'floor', 's'):7.3f} {vs_up_range:>13} {vs_up_goal:>9} "
              f"{range_text(vs_floor):>10} {goal_text(vs_floor, GOAL_DUMP_VS_FLOOR):>9}")


# -------------------------------------------------------------------- 2. tree ----

def bench_tree(tools, scratch, live):
    # the tree, and the images of each tool's tree and single process
    bench.check_memory_mib((3 * TREE_TASKS + 2) * TREE_MIB + 1024, "the tree dump")
    cases = [("tree", ["-p", str(TREE_TASKS)], TREE_TASKS), ("one", [], 1)]

    def step(tool, case, options, nr_tasks):
        pid, pids, log = start_subject(scratch, f"holder-{tool[0]}", bench.HOLDER, options,
                                       TREE_MIB, nr_tasks, live)
        img_dir = os.path.join(scratch, f"{tool[0]}-{case}")
        seconds = dump_subject(tool, pid, pids, img_dir, live)
        frozen = frozen_ms(img_dir)
        restore_subject(tool, pid, pids, img_dir, live)
        stop_subject(pid, pids, log, live)
        return {"s": seconds, "frozen ms": frozen}

    blocks = [[(f"{tool[0]} {case}",
                lambda tool=tool, case=case, options=options, n=n: step(tool, case, options, n))
               for case, options, n in cases] for tool in tools]
    rounds = run_rounds(f"tree {TREE_TASKS} x {TREE_MIB} MiB", blocks)
    remove_images(scratch)
    return rounds


def print_tree(rounds, tools):
    print()
    header = f"{'dump':<12}"
    for tool in tools:
        header += f" {tool[0] + ' s':>10} {tool[0] + ' frozen ms':>18}"
    if UPSTREAM in tools:
        header += f" {'ours/upstream':>13}"
    print(header)
    for case, label in (("tree", f"{TREE_TASKS} x {TREE_MIB} MiB"), ("one", f"1 x {TREE_MIB} MiB")):
        line = f"{label:<12}"
        for tool in tools:
            key = f"{tool[0]} {case}"
            line += f" {median(rounds, key, 's'):10.3f} {median(rounds, key, 'frozen ms'):18.1f}"
        if UPSTREAM in tools:
            vs_up = ratios(rounds, lambda r: r[f"ours {case}"]["s"],
                           lambda r: r[f"upstream {case}"]["s"])
            line += f" {range_text(vs_up):>13}"
        print(line)
    print("(frozen ms: stats-dump's frozen time, the whole tree's, so every task's)")
    for tool in tools:
        vs_singles = ratios(rounds, lambda r: r[f"{tool[0]} tree"]["s"],
                            lambda r: TREE_TASKS * r[f"{tool[0]} one"]["s"])
        goal = f", goal <= 1 in every round: {goal_text(vs_singles, GOAL_TREE_VS_SINGLES)}" \
            if tool == OURS else ""
        print(f"{tool[0]}: tree / ({TREE_TASKS} x one) = {range_text(vs_singles)}{goal}")


# --------------------------------------------------------------------- 3. cow ----

def bench_cow(tools, scratch, live):
    # the tree, its images, and a restore that may copy every child's share
    bench.check_memory_mib((COW_CHILDREN + 3) * COW_MIB + 1024, "the copy-on-write tree")

    def step(tool, percent):
        options = ["-w", str(percent), str(COW_CHILDREN)]
        pid, pids, log = start_subject(scratch, f"cowtree-{tool[0]}", COWTREE, options, COW_MIB,
                                       COW_CHILDREN + 1, live)
        pss_dumped = tree_pss_mib(pids)
        img_dir = os.path.join(scratch, f"{tool[0]}-cow-{percent}")
        dump_s = dump_subject(tool, pid, pids, img_dir, live)
        restore_s = restore_subject(tool, pid, pids, img_dir, live)
        pss_restored = tree_pss_mib(pids)
        stop_subject(pid, pids, log, live)
        return {"dump s": dump_s, "restore s": restore_s, "Pss MiB": pss_dumped,
                "restored Pss MiB": pss_restored}

    blocks = [[(f"{tool[0]} {label}", lambda tool=tool, percent=percent: step(tool, percent))
               for label, percent in COW_VARIANTS] for tool in tools]
    rounds = run_rounds(f"cow {COW_CHILDREN} children on {COW_MIB} MiB", blocks)
    remove_images(scratch)
    return rounds


def print_cow(rounds, tools):
    print()
    print(f"{'restore':<12} {'tool':<8} {'dump s':>7} {'restore s':>9} {'dumped Pss':>10} "
          f"{'restored Pss':>12} {'Pss ratio':>9} {'<=1.05 all':>10}")
    for label, _ in COW_VARIANTS:
        for tool in tools:
            key = f"{tool[0]} {label}"
            pss_ratio = ratios(rounds, lambda r: r[key]["restored Pss MiB"],
                               lambda r: r[key]["Pss MiB"])
            print(f"{label:<12} {tool[0]:<8} {median(rounds, key, 'dump s'):7.3f} "
                  f"{median(rounds, key, 'restore s'):9.3f} "
                  f"{median(rounds, key, 'Pss MiB'):10.1f} "
                  f"{median(rounds, key, 'restored Pss MiB'):12.1f} "
                  f"{range_text(pss_ratio):>9} {goal_text(pss_ratio, GOAL_PSS_RATIO):>10}")
    print(f"(Pss in MiB, summed over the tree's {COW_CHILDREN + 1} processes: before the dump and "
          "after the restore)")
    if UPSTREAM in tools:
        for label, _ in COW_VARIANTS:
            vs_up = ratios(rounds, lambda r: r[f"ours {label}"]["restore s"],
                           lambda r: r[f"upstream {label}"]["restore s"])
            print(f"{label}: restore ours/upstream = {range_text(vs_up)}, goal <= 1 in every "
                  f"round: {goal_text(vs_up, GOAL_RESTORE_VS_UPSTREAM)}")


# -------------------------------------------------------------------- the run ----

def main():
    if os.geteuid() != 0:
        print("mem: must run as root (criu needs it)", file=sys.stderr)
        return 1
    for prog in (bench.CRIU, bench.HOLDER, bench.DUMP_FLOOR, COWTREE, CRIT):
        if not os.access(prog, os.X_OK):
            print(f"mem: {prog} is missing; run make first", file=sys.stderr)
            return 1
    tools = [OURS]
    if os.access(UPSTREAM[1], os.X_OK):
        tools.append(UPSTREAM)
    else:
        print(f"mem: no upstream criu at {UPSTREAM[1]}: ours and the floor only")
    scratch = tempfile.mkdtemp(prefix="criu-bench-mem-", dir=bench.SCRATCH_PARENT)
    live = set()
    printers = []
    ok = False
    try:
        bench.become_subreaper()
        print(f"ours against upstream: parts {' '.join(PARTS)}, {ROUNDS} rounds each (ours "
              f"first in odd rounds, upstream first in even ones), -v{LOG_LEVEL}, images "
              f"under {scratch}, page cache {'dropped' if DROP_CACHES else 'kept'} before "
              "each timed step", flush=True)
        for part, run, show in (("dump", bench_dump, print_dump), ("tree", bench_tree, print_tree),
                                ("cow", bench_cow, print_cow)):
            if part not in PARTS:
                continue
            start = time.monotonic()
            results = run(tools, scratch, live)
            printers.append(lambda show=show, results=results: show(results, tools))
            print(f"{part}: {time.monotonic() - start:.0f} s at load "
                  f"{os.getloadavg()[0]:.1f} (1-minute load average)", flush=True)
        ok = True
    except (bench.BenchError, subprocess.TimeoutExpired, OSError) as err:
        print(f"mem: FAIL: {err}", file=sys.stderr)
    finally:
        bench.kill_leftovers(live)
    if not ok:
        for pages in bench.glob.glob(os.path.join(scratch, "*", "pages-*.img")):
            os.unlink(pages)
        print(f"mem: logs kept in {scratch}", file=sys.stderr)
        return 1
    shutil.rmtree(scratch)
    for printer in printers:
        printer()
    print(f"(times: medians of {ROUNDS} rounds; ratios: the range of the per-round ratios; "
          "'all': whether the goal held in every round, else in how many)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
