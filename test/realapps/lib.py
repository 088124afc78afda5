"""Shared by the real-application tests (test/realapps/*_test.py): start a process tree as
a session of its own, dump it with criu/criu, restore it detached, time both, wait for
conditions, and kill and reap every process the test left, by PID.

The test process makes itself a child subreaper, so every process of the tree it started
(tmux's server, which daemonizes; the tree criu restore -d leaves behind) is its
descendant: cleanup kills exactly its own descendants and reaps them, never anything else.
"""
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CRIU = os.path.join(ROOT, "criu", "criu")
OUT = os.path.join(HERE, "out")
PYTHON = "/usr/bin/python3"

PR_SET_CHILD_SUBREAPER = 36
# sun_path holds 108 bytes with the terminating NUL.
UNIX_PATH_MAX = 107


class Fail(Exception):
    """The reason an application's test failed, as its FAIL line gives it."""


def wait_for(cond, what, timeout=10.0):
    """Polls cond() until it returns something true; returns that, or fails naming what."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise Fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def connect_unix(path, timeout=10.0):
    """A stream connection to path (a Unix socket's, or "HOST:PORT" for TCP), retried while
    the server (started at the same time by the holder) has not bound or is not listening
    yet."""
    deadline = time.monotonic() + timeout
    while True:
        tcp = not path.startswith("/")
        s = socket.socket(socket.AF_INET if tcp else socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect((path.rsplit(":", 1)[0], int(path.rsplit(":", 1)[1])) if tcp else path)
            return s
        except (FileNotFoundError, ConnectionRefusedError):
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def children(pid):
    """The children of pid (of all its threads), from /proc; [] once it is gone."""
    kids = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                kids += [int(p) for p in f.read().split()]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return kids


def descendants(pid):
    found = []
    todo = children(pid)
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children(p)
    return found


def alive(pid):
    """True while pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class App:
    """One application's run: its directory under out/, its tree, its dump and restore."""

    def __init__(self, name):
        self.name = name
        self.dir = os.path.join(OUT, name)
        self.img = os.path.join(self.dir, "img")
        self.times = {}
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.img)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0):
            raise Fail(f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(ctypes.get_errno())}")

    def path(self, name):
        return os.path.join(self.dir, name)

    def sock_path(self, name):
        p = self.path(name)
        if len(p) > UNIX_PATH_MAX:
            raise Fail(f"socket path {p} is longer than a socket address holds")
        return p

    def spawn(self, argv, log):
        """Starts argv as a new session in the app's directory: stdin /dev/null, stdout
        and stderr appended to log, no other fd (the tree must hold nothing of ours, such
        as make's pipes, or its dump would take a pipe whose other end it lacks)."""
        log_path = self.path(log)
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                null = os.open("/dev/null", os.O_RDONLY)
                out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(null, 0)
                os.dup2(out, 1)
                os.dup2(out, 2)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                os.chdir(self.dir)
                os.execv(argv[0], argv)
            finally:
                os._exit(127)
        return pid

    def spawn_holder(self, cmds):
        """Starts holder.py with each command (an argv) as its child; returns its pid."""
        argv = [PYTHON, os.path.join(HERE, "holder.py")]
        for k, cmd in enumerate(cmds):
            argv += ["--"] * (k > 0) + cmd
        return self.spawn(argv, "holder.log")

    def check_holder(self):
        """The holder says something only when one of its children ends."""
        lines = read_lines(self.path("holder.log"))
        if lines:
            raise Fail(f"a child of the holder ended: {lines[0]}")

    def run(self, argv, what, input=None, timeout=30):
        """Runs a short command (a client, criu) and returns its stdout; fails on a
        non-zero exit with its last line of stderr."""
        try:
            r = subprocess.run(argv, input=input, capture_output=True, timeout=timeout,
                               cwd=self.dir)
        except subprocess.TimeoutExpired:
            raise Fail(f"{what}: still running after {timeout} s") from None
        if r.returncode:
            err = r.stderr.decode(errors="replace").strip().splitlines()
            raise Fail(f"{what}: exit status {r.returncode}: {err[-1] if err else ''}")
        return r.stdout.decode(errors="replace")

    def criu(self, action, args, log):
        argv = [CRIU, action, "-D", self.img, "-o", log, "-v4"] + args
        start = time.monotonic()
        try:
            self.run(argv, f"criu {action}", timeout=60)
        except Fail as e:
            raise Fail(f"{e} (see {os.path.join(self.img, log)})") from None
        self.times[action] = time.monotonic() - start

    def dump(self, root, extra=()):
        """Dumps (and so kills) the tree of root, then reaps all of it: its pids must be
        free for restore to take them again."""
        self.criu("dump", ["-t", str(root)] + list(extra), "dump.log")
        self.reap_all(kill=False)

    def restore(self, root):
        """Restores the tree detached; its root must have its dumped pid."""
        pidfile = self.path("restored.pid")
        self.criu("restore", ["-d", "--pidfile", pidfile], "restore.log")
        with open(pidfile) as f:
            restored = int(f.read())
        if restored != root:
            raise Fail(f"the restored root is {restored}, the dumped one {root}")

    @staticmethod
    def tree(root):
        """The pids of root's tree, sorted."""
        return sorted([root] + descendants(root))

    def reap_all(self, kill, timeout=10.0):
        """Reaps every descendant; with kill, SIGKILLs them (by PID) first, until none is
        left. Orphans of the tree come back to us (we are a subreaper) and are reaped too."""
        deadline = time.monotonic() + timeout
        while True:
            if kill:
                for pid in descendants(os.getpid()):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                return
            if time.monotonic() > deadline:
                left = descendants(os.getpid())
                raise Fail(f"processes {left} still running after {timeout:.0f} s")
            time.sleep(0.02)

    def main(self, test):
        """Runs test(self), cleans up, prints the times and the verdict line; exits 0 or 1."""
        reason = None
        try:
            test(self)
        except Fail as e:
            reason = str(e)
        except Exception as e:  # a bug or an OSError of the test: still a FAIL line
            reason = f"{type(e).__name__}: {e}"
        try:
            self.reap_all(kill=True)
        except Fail as e:
            reason = reason or f"cleanup: {e}"
        times = ", ".join(f"{k} {v:.3f} s" for k, v in self.times.items())
        if times:
            print(f"{self.name}: {times}", flush=True)
        print(f"FAIL {self.name}: {reason}" if reason else f"PASS {self.name}", flush=True)
        sys.exit(1 if reason else 0)
