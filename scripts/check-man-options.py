#!/usr/bin/python3
# Checks criu(8) against the CLI: every command and option `criu --help` prints (it prints
# every entry of the option table in criu/command/config.c) must be documented in the man page's
# source, and every option or command the page documents must exist. The Makefile runs it
# before rendering criu(8), so the page cannot drift from --help; `make test` runs it too.
#
# Usage: check-man-options.py CRIU_BINARY Documentation/criu.8.txt
import re
import subprocess
import sys


def help_sections(criu):
    """The --help text as {section title: [lines]}: a title is a line that ends with ':'."""
    text = subprocess.run([criu, "--help"], check=True, capture_output=True, text=True).stdout
    sections, title = {}, None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            title = line
            sections[title] = []
        elif title and line.strip():
            sections[title].append(line)
    return sections


def section(sections, prefix):
    for title, lines in sections.items():
        if title.startswith(prefix):
            return lines
    sys.exit("check-man-options: criu --help has no section '%s...'" % prefix)


def cli_facts(criu):
    """Commands, accepted options and refused options (name -> reason) of criu --help."""
    sections = help_sections(criu)
    commands = [line.split()[0] for line in section(sections, "Commands")]
    options = []
    for line in section(sections, "Options"):
        m = re.match(r"\s+(?:-\w\|)?--(?:\[no-\])?([a-z0-9-]+)", line)
        if m:
            options.append(m.group(1))
    refused = {}
    for line in section(sections, "Refused"):
        m = re.match(r"\s+--([a-z0-9-]+)\s*(.*)", line)
        if m:
            refused[m.group(1)] = m.group(2)
    return commands, options, refused


def man_sections(path):
    """The page's source as {SECTION TITLE: text}; titles are underlined with dashes."""
    lines = open(path, encoding="utf-8").read().splitlines()
    sections, title = {}, None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and re.fullmatch(r"-{3,}", lines[i + 1]) and line.isupper():
            title = line
            sections[title] = []
        elif title:
            sections[title].append(line)
    return {t: "\n".join(body) for t, body in sections.items()}


def terms(text):
    """The terms of an asciidoc labelled list: the lines that end with '::'."""
    return [line for line in text.splitlines() if line.rstrip().endswith("::")]


def option_names(text):
    """--NAME and --[no-]NAME; not the bare --no- of "--no-NAME" in the prose."""
    return set(re.findall(r"--(?:\[no-\])?([a-z][a-z0-9-]*[a-z0-9])(?![a-z0-9-])", text))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: check-man-options.py CRIU_BINARY MAN_SOURCE")
    criu, man = sys.argv[1:]
    commands, options, refused = cli_facts(criu)
    page = man_sections(man)
    for title in ("COMMANDS", "OPTIONS", "REFUSED OPTIONS"):
        if title not in page:
            sys.exit("check-man-options: %s has no %s section" % (man, title))
    documented_options = option_names("\n".join(terms(page["OPTIONS"])))
    documented_refused = option_names(page["REFUSED OPTIONS"])
    documented_commands = set(re.findall(r"\*([a-z-]+)\*", "\n".join(terms(page["COMMANDS"]))))
    errors = []
    for name in options:
        if name not in documented_options:
            errors.append("option --%s (criu --help) has no entry in OPTIONS" % name)
    for name, reason in refused.items():
        if name not in documented_refused:
            errors.append("refused option --%s is not listed in REFUSED OPTIONS" % name)
        if not reason:
            errors.append("refused option --%s has no reason in criu --help "
                          "(criu/command/config.c, refusals)" % name)
    for name in commands:
        if name not in documented_commands:
            errors.append("command %s (criu --help) has no entry in COMMANDS" % name)
    known = set(options) | set(refused)
    for name in sorted((documented_options | documented_refused) - known):
        errors.append("the page documents --%s, which criu does not know" % name)
    for name in sorted(documented_commands - set(commands)):
        errors.append("the page documents command %s, which criu does not know" % name)
    for e in errors:
        print("check-man-options: %s: %s" % (man, e), file=sys.stderr)
    if errors:
        return 1
    print("check-man-options: %s documents the %d commands and %d options of criu --help"
          % (man, len(commands), len(options) + len(refused)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
