#!/usr/bin/python3
# crit's help is written in our own words: no line of `crit [COMMAND] --help` (nor of
# Documentation/crit.1.txt) repeats upstream crit's help, line by line or rewrapped.
# Usage: test/crit/help.py; exit status 1 if a text is shared. The reference crit is
# ../shared/upstream-criu/bin/crit (or $CRIT_REFERENCE); where it is absent, the script says
# so in one line, checks nothing and exits 0.
import os
import re
import subprocess
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CRIT = os.path.join(TOP, "crit", "crit")
UPSTREAM = os.environ.get("CRIT_REFERENCE") or os.path.join(
    os.path.dirname(TOP), "shared", "upstream-criu", "bin", "crit")
MAN = os.path.join(TOP, "Documentation", "crit.1.txt")
COMMANDS = [[], ["decode"], ["encode"], ["info"], ["x"], ["show"]]
# A line this long, or this many words in a row, found in both texts is a copy.
MIN_LINE = 20
RUN_WORDS = 5
# argparse's own section titles, the same in every argparse tool: not crit's text.
HEADINGS = {"positional arguments:", "options:", "optional arguments:"}

failures = 0


def report(ok, name, detail=""):
    global failures
    failures += not ok
    print("%s: %s%s" % ("PASS" if ok else "FAIL", name, ": " + detail if not ok else ""))


def help_text(crit, command):
    """The --help of crit COMMAND, wrapped at a fixed width; None if it did not print one."""
    env = dict(os.environ, COLUMNS="80")
    p = subprocess.run([crit] + command + ["--help"], capture_output=True, env=env)
    if p.returncode != 0 or not p.stdout:
        return None
    return p.stdout.decode(errors="replace")


def described(text):
    """The text without its usage block: that one is argparse's spelling of the option
    names, which crit keeps as upstream's for compatibility."""
    lines, in_usage = [], False
    for line in text.splitlines():
        if line.startswith("usage:"):
            in_usage = True
        elif not line.strip():
            in_usage = False
        if not in_usage:
            lines.append(line)
    return lines


def long_lines(lines):
    return {" ".join(line.split()) for line in lines
            if len(line.strip()) > MIN_LINE and line.strip() not in HEADINGS}


def word_runs(lines):
    """Every RUN_WORDS words in a row, over line breaks: catches a copy rewrapped."""
    text = " ".join(line for line in lines if line.strip() not in HEADINGS)
    words = re.findall(r"[a-z0-9']+", text.lower())
    return {" ".join(words[i:i + RUN_WORDS]) for i in range(len(words) - RUN_WORDS + 1)}


def main():
    if not os.access(UPSTREAM, os.X_OK):
        print("crit help: no reference crit at %s, help texts not compared" % UPSTREAM)
        return 0
    theirs_lines, theirs_runs = set(), set()
    for command in COMMANDS:
        name = " ".join(["crit"] + command + ["--help"])
        text = help_text(UPSTREAM, command)
        if text is None:
            report(False, "reference " + name, "printed no help")
            continue
        theirs_lines |= long_lines(described(text))
        theirs_runs |= word_runs(described(text))
    # The reference's help holds a dozen long lines: fewer means it was not read, and every
    # check below would pass on nothing.
    report(len(theirs_lines) >= 10, "reference crit's help read",
           "%d long lines" % len(theirs_lines))

    texts = []
    for command in COMMANDS:
        name = " ".join(["crit"] + command + ["--help"])
        text = help_text(CRIT, command)
        if text is None:
            report(False, name, "printed no help")
            continue
        texts.append((name, described(text)))
    with open(MAN) as f:
        texts.append(("Documentation/crit.1.txt", f.read().splitlines()))

    for name, lines in texts:
        same_lines = sorted(long_lines(lines) & theirs_lines)
        same_runs = sorted(word_runs(lines) & theirs_runs)
        report(not same_lines and not same_runs, name + " in its own words",
               "; ".join(["line %r" % s for s in same_lines] +
                         ["words %r" % s for s in same_runs]))
    print("crit help: %d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
