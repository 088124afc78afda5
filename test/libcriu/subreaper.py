#!/usr/bin/env python3
# Runs PROG ARGS... in a session of its own (as `setsid` would) under this process, a child
# subreaper: what the test orphans (a killed tree's children, the detached criu of a
# self-dump) is reaped here at once rather than left a zombie holding its pid, which a
# restore of that pid would then find taken. Once PROG exits, whatever it left running
# under us is killed and reaped. Exits with PROG's status (128+N if signal N killed it).
import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def children():
    found = []
    for tid in os.listdir('/proc/self/task'):
        with open('/proc/self/task/%s/children' % tid) as f:
            found += [int(p) for p in f.read().split()]
    return found


def main():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
        print('subreaper: prctl: ' + os.strerror(ctypes.get_errno()), file=sys.stderr)
        return 2
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            os.execv(sys.argv[1], sys.argv[1:])
        finally:
            os._exit(127)
    while True:
        reaped, status = os.waitpid(-1, 0)
        if reaped == pid:
            break
    for left in children():
        try:
            os.kill(left, signal.SIGKILL)
            os.waitpid(left, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


if __name__ == '__main__':
    sys.exit(main())
