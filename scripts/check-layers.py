#!/usr/bin/env python3
"""Checks that criu's layers only call down (Documentation/design.md §2.1).

Reads the symbols each object of criu/ and compel/ defines and uses (nm), so that every
call or data reference between two files is an edge, and checks each edge against the
layer it lies in (its folder of criu/: command, pipelines, kinds, base; compel/ is base): a
file may use its own layer and the layers under it, never one above.
Files of one layer may call each other, but a loop among them (files that reach each
other, a strongly connected set) must lie inside one wing: a set of files that are one
concern (WINGS). Prints each edge that goes up and each loop that is not inside a wing,
and exits 1 if there is one; --graph prints every edge and every loop.
"""
import collections
import glob
import os
import subprocess
import sys

# Top first: the folders of criu/ (compel/ is base).
LAYERS = ["command", "pipelines", "kinds", "base"]

# Loops allowed inside a layer: each names files that are one concern.
WINGS = {
    # the commands and the option table: --help lists the commands; the RPC service is a
    # command whose requests go through the table (opts_apply())
    "command": {"crtools", "config", "cr-service"},
    # the restore pipeline: its tasks' table and steps, their sessions, their release
    "restore": {"cr-restore", "restore-sessions", "restore-release"},
    # the fd engine and its sharing planner
    "fd engine": {"files", "files-plan"},
    # regular files: the kind, its deleted files (ghosts), its remaps (links, dead /proc)
    "regular files": {"files-reg", "files-ghost", "files-remap"},
    # the tree, its pids and its namespaces: a task's pid is read through its namespaces
    "tree": {"pstree", "ns-pid", "namespaces"},
    # memory and its transport: pages dumped, stored, deduplicated, served and sent; a
    # memfd is shared memory with a name, whose pages the same writer stores
    "memory": {"mem", "mem-lazy", "shmem", "task-image", "dedup", "files-memfd",
               "page-server", "page-server-images", "page-server-lazy", "page-xfer",
               "page-splice", "uffd-task"},
    # compel's infection: remote syscalls, and the parasite they load, which cure() stops
    "infection": {"infect", "infect-parasite"},
    # a net namespace's devices, tun/tap ones among them
    "net devices": {"ns-net", "files-tun", "net-rtnl", "net-links", "net-sysctl", "net-tables"},
    # a mount namespace: its tree, how it is built again, propagation, tmpfs contents
    "mounts": {"ns-mnt", "mnt-build", "mnt-propagation", "mnt-tmpfs"},
    # INET sockets and the TCP connections among them
    "inet": {"sk-inet", "sk-tcp"},
}


def layer_of(name):
    """The rank (0: top) and the name of the layer of a file, named FOLDER/FILE."""
    layer = name.split("/")[0]
    return LAYERS.index(layer), layer


def read_edges(root):
    defined, used = {}, collections.defaultdict(set)
    objs = [(layer, obj) for layer in LAYERS
            for obj in sorted(glob.glob(os.path.join(root, "criu", layer, "*.o")))]
    objs += [("base", obj) for obj in sorted(glob.glob(os.path.join(root, "compel/*.o")))]
    if not objs:
        sys.exit("check-layers: no objects under criu/ and compel/: run make first")
    for layer, obj in objs:
        name = layer + "/" + os.path.basename(obj)[:-2]
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) == 3 and f[1] in "TDBRCV":
                defined[f[2]] = name
            elif len(f) == 2 and f[0] == "U":
                used[name].add(f[1])
    edges = collections.defaultdict(set)
    for src, syms in used.items():
        for sym in syms:
            dst = defined.get(sym)
            if dst and dst != src:
                edges[(src, dst)].add(sym)
    return edges


def loops(nodes, edges):
    """Tarjan's strongly connected components of size > 1."""
    succ = collections.defaultdict(set)
    for s, d in edges:
        if s in nodes and d in nodes:
            succ[s].add(d)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    edges = read_edges(root)
    up = [(s, d, syms) for (s, d), syms in sorted(edges.items()) if layer_of(d)[0] < layer_of(s)[0]]
    if "--graph" in sys.argv:
        for (s, d), syms in sorted(edges.items()):
            print(f"{s} ({layer_of(s)[1]}) -> {d} ({layer_of(d)[1]}): {' '.join(sorted(syms))}")
        names = {n for e in edges for n in e}
        for rank, layer in enumerate(LAYERS):
            for comp in loops({n for n in names if layer_of(n)[0] == rank}, edges):
                print(f"loop in {layer} ({len(comp)} files): {' '.join(comp)}")
    for s, d, syms in up:
        print(f"check-layers: {s} ({layer_of(s)[1]}) calls up into {d} ({layer_of(d)[1]}): "
              f"{' '.join(sorted(syms))}")
    names = {n for e in edges for n in e}
    stray = []
    for rank in range(len(LAYERS)):
        for comp in loops({n for n in names if layer_of(n)[0] == rank}, edges):
            files = {name.split("/")[1] for name in comp}
            if not any(files <= wing for wing in WINGS.values()):
                stray.append(comp)
                print(f"check-layers: a loop outside any wing: {' '.join(comp)}")
    if up or stray:
        sys.exit(1)
    print(f"check-layers: {len(edges)} edges between files, none up across layers, "
          f"every loop inside one wing")


main()
