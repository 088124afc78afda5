#!/usr/bin/python3
"""A tmux session checkpointed and restored: its server, its pane's shell and the shell's
background job.

tmux new-session -d forks a server that daemonizes (a session of its own; we are a child
subreaper, so it comes back to us as a child). Its pane runs bash, in which the test sets
a variable, prints SCROLL_LINES lines of scrollback and starts a loop that writes a rising
count into a file. The test dumps the server's tree (criu dump -t SERVER), restores it
detached, and checks through new tmux clients: the same server, shell and loop pids; the
pane's history as before the dump; the loop counting on from where it was; and a new
command in the shell seeing its variable, its pid and its job."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import App, Fail, alive, wait_for  # noqa: E402

TMUX = "/usr/bin/tmux"
SCROLL_LINES = 300
# Counts the loop must add after the restore (one per 50 ms) before the test trusts it.
COUNTS_AFTER = 10


class Tmux:
    def __init__(self, app):
        self.app = app
        self.sock = app.sock_path("tmux.sock")

    def cmd(self, *args):
        return self.app.run([TMUX, "-S", self.sock, "-f", "/dev/null"] + list(args),
                            f"tmux {args[0]}")

    def display(self, fmt):
        return self.cmd("display-message", "-p", fmt).strip()

    def history(self):
        """The pane's whole history and screen, without the empty lines at its end."""
        return self.cmd("capture-pane", "-p", "-S", "-", "-E", "-").rstrip("\n").splitlines()

    def type(self, line):
        self.cmd("send-keys", "-l", line)
        self.cmd("send-keys", "Enter")

    def run_shell(self, line, expect):
        """Types line into the pane's shell and waits for a line of output equal to expect
        (typed text shows the unexpanded line, so only the command's output matches)."""
        self.type(line)
        wait_for(lambda: expect in self.history(), f"{expect!r} in the pane")


def read_count(path):
    """The loop's count; 0 while the file is missing or between its truncation and write."""
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except FileNotFoundError:
        return 0


def test(app):
    tmux = Tmux(app)
    count_file = app.path("count")
    tmux.cmd("new-session", "-d", "-x", "100", "-y", "30", "bash --norc --noprofile")
    server = int(tmux.display("#{pid}"))
    shell = int(tmux.display("#{pane_pid}"))
    tmux.run_shell("MYVAR=state-$((40 + 2)); echo set-$MYVAR", "set-state-42")
    tmux.run_shell(f"for i in $(seq 1 {SCROLL_LINES}); do echo scroll-$i; done",
                   f"scroll-{SCROLL_LINES}")
    tmux.type(f"(n=0; while :; do n=$((n + 1)); echo $n > {count_file}; sleep 0.05; done) &")
    tmux.type("echo loop-is-$!")
    line = wait_for(lambda: [x for x in tmux.history() if x.startswith("loop-is-")],
                    "the loop's pid in the pane")
    loop = int(line[0][len("loop-is-"):])
    wait_for(lambda: read_count(count_file) >= 5, "the loop's first counts")
    before = tmux.history()

    count_at_dump = wait_for(lambda: read_count(count_file), "the loop's count")
    app.dump(server)
    app.restore(server)
    for pid, what in ((shell, "the pane's shell"), (loop, "the loop")):
        if not alive(pid):
            raise Fail(f"{what} (pid {pid}) is not running after the restore")

    if int(tmux.display("#{pid}")) != server or int(tmux.display("#{pane_pid}")) != shell:
        raise Fail("tmux reports another server or pane pid after the restore")
    after = tmux.history()
    for k, line in enumerate(before):
        if k >= len(after) or after[k] != line:
            raise Fail(f"pane history line {k + 1} was {line!r}, is now "
                       f"{after[k] if k < len(after) else None!r}")
    first = wait_for(lambda: read_count(count_file), "the loop's count after the restore")
    if first < count_at_dump:
        raise Fail(f"the loop counts {first} after the restore, {count_at_dump} before")
    wait_for(lambda: read_count(count_file) >= count_at_dump + COUNTS_AFTER,
             "the loop's counts after the restore")
    tmux.run_shell('echo "after-$MYVAR-$$-$(expr 6 \\* 7)-$(jobs -p)"',
                   f"after-state-42-{shell}-42-{loop}")
    print(f"tmux: count {count_at_dump} at the dump, {read_count(count_file)} after; "
          f"{len(before)} lines of history kept; shell {shell} and loop {loop} go on",
          flush=True)


if not os.access(TMUX, os.X_OK):
    print("FAIL tmux: tmux is not installed (scripts/install-deps.sh)")
    sys.exit(1)
App("tmux").main(test)
