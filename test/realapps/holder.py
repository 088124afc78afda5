#!/usr/bin/python3
"""The root of a dumped tree: starts each command (commands separated by "--") as its
child and waits for them all, so that one `criu dump -t` of this process takes them
together. Says on stdout how each child ended."""
import os
import sys


def main():
    cmds = [[]]
    for arg in sys.argv[1:]:
        if arg == "--":
            cmds.append([])
        else:
            cmds[-1].append(arg)
    for argv in cmds:
        if os.fork() == 0:
            try:
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return
        print(f"holder: child {pid} ended with wait status {status:#x}", flush=True)


main()
