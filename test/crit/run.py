#!/usr/bin/python3
# crit's tests: decode | encode gives back every image byte for byte, truncated or corrupt
# images and bad JSON give one error line and exit 1, never a traceback, and x explains a
# dump. Images come from the JSON in test/crit/dump/ and from the dump directories given.
# Usage (after `make crit`): test/crit/run.py [DUMP_DIR ...]; exit status 1 if a check fails.
import json
import os
import re
import subprocess
import sys
import tempfile

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CRIT = os.path.join(TOP, "crit", "crit")
FIXTURES = os.path.join(TOP, "test", "crit", "dump")
MAGIC_H = os.path.join(TOP, "criu", "include", "magic.h")
# Truncation and corruption are tried at every byte of images up to this size.
EVERY_BYTE_MAX = 4096

sys.path.insert(0, os.path.join(TOP, "crit"))
from pycrit import CritError, explore, image, layouts, magic  # noqa: E402

failures = 0


def report(ok, name, detail=""):
    global failures
    failures += not ok
    why = ": " + detail.strip() if detail and not ok else ""
    print("%s: %s%s" % ("PASS" if ok else "FAIL", name, why))


def crit(*args, stdin=b""):
    """crit's exit status, stdout (bytes) and stderr (text)."""
    p = subprocess.run([CRIT] + list(args), input=stdin, capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def one_error_line(rc, err):
    """What every failure must look like: exit 1 and one "crit: " line, no traceback."""
    return rc == 1 and err.count("\n") == 1 and err.startswith("crit: ")


def check_identity(path, data):
    """decode | encode and show | encode, through the command line, give back data."""
    for verb in (["decode", "-i", path], ["show", path]):
        rc, text, err = crit(*verb)
        if rc != 0:
            return report(False, "%s %s" % (verb[0], path), err.strip())
        rc, back, err = crit("encode", stdin=text)
        same = rc == 0 and back == data
        report(same, "%s | encode gives back %s" % (verb[0], path), err.strip() or "bytes differ")


def header_size(name):
    return 4 if magic.first_word(name) is None else 8


def entry_ends(name, data):
    """Where entries end in an image of plain entries (no payloads): the cuts that leave
    a valid image. None when the image has payloads or a head entry."""
    kind = layouts.layout(name)
    if not isinstance(kind, layouts.Entries) or kind.extra is not None:
        return None
    pos = header_size(name)
    ends = {pos}
    while pos < len(data):
        pos += 4 + int.from_bytes(data[pos:pos + 4], "little")
        ends.add(pos)
    return ends


def decode_outcome(data):
    """'ok' (decodes, encodes back the same), 'changed' (encodes back other bytes),
    'error' (a CritError) or the text of an exception that would be a traceback."""
    try:
        return "ok" if image.encode(image.decode(data)) == data else "changed"
    except CritError:
        return "error"
    except Exception as e:
        return "%s: %s" % (type(e).__name__, e)


def expected_outcomes(cut, header, ends):
    if cut < header:
        return ("error",)
    if ends is None:
        return ("ok", "error")
    return ("ok",) if cut in ends else ("error",)


def check_truncations(path, data):
    """Every cut of the image decodes and encodes back, or is a CritError; plain images
    decode only when cut between entries."""
    name = image.decode(data)["magic"]
    header, ends = header_size(name), entry_ends(name, data)
    bad = []
    for cut in range(len(data)):
        outcome = decode_outcome(data[:cut])
        if outcome not in expected_outcomes(cut, header, ends):
            bad.append("cut at %d: %s" % (cut, outcome))
    report(not bad, "every truncation of %s (%d cuts)" % (path, len(data)), "; ".join(bad[:3]))
    # Inside the first entry's length word: always an error.
    rc, _, err = crit("decode", stdin=data[:min(header + 2, len(data) - 1)])
    report(one_error_line(rc, err), "truncated %s on the command line" % path, err)


def check_corruptions(path, data):
    """Each byte flipped in turn: the image decodes or is a CritError, never a traceback."""
    bad = []
    for pos in range(len(data)):
        flipped = data[:pos] + bytes([data[pos] ^ 0xff]) + data[pos + 1:]
        outcome = decode_outcome(flipped)
        if outcome not in ("ok", "error", "changed"):
            bad.append("byte %d: %s" % (pos, outcome))
    report(not bad, "every byte of %s flipped" % path, "; ".join(bad[:3]))


def check_image(path):
    with open(path, "rb") as f:
        data = f.read()
    if os.path.basename(path).startswith("pages-"):
        rc, _, err = crit("decode", "-i", path)
        return report(one_error_line(rc, err) and "raw page data" in err,
                      "pages image refused: %s" % path, err)
    if os.path.basename(path).startswith(magic.NET_RAW_PREFIXES):
        rc, _, err = crit("decode", "-i", path)
        return report(one_error_line(rc, err) and "raw data of ip" in err,
                      "net raw image refused: %s" % path, err)
    rc, _, err = crit("info", path)
    if rc != 0 and "unsupported image" in err:
        return print("SKIP: %s: %s" % (path, err.strip()))
    check_identity(path, data)
    if len(data) <= EVERY_BYTE_MAX:
        check_truncations(path, data)
        check_corruptions(path, data)


def check_fixture_json(json_path, img_path):
    """An image written from fixture JSON shows as that JSON."""
    with open(json_path) as f:
        want = json.load(f)
    rc, text, err = crit("show", img_path)
    report(rc == 0 and json.loads(text) == want, "show %s equals its JSON" % img_path, err)


def write_fixtures(out_dir):
    for name in sorted(os.listdir(FIXTURES)):
        if not name.endswith(".json"):
            continue
        img_path = os.path.join(out_dir, name[:-len(".json")])
        rc, _, err = crit("encode", "-i", os.path.join(FIXTURES, name), "-o", img_path)
        report(rc == 0, "encode %s" % name, err)
        if rc == 0:
            check_fixture_json(os.path.join(FIXTURES, name), img_path)


EXPECTED_PS = """\
    PID   PGID    SID   COMM
    100    100    100   sh
    101    100    100       cat
"""

EXPECTED_FDS = """\
100
\t      0: TTY.3
\t      1: pipe[4242]
\t      2: /dev/null
\t      5: FIFO.7
\t      6: /tmp/gone (deleted)
\t      7: /tmp/caf\udce9 (not UTF-8)
\t    cwd: /tmp
\t   root: /
101
\t      0: pipe[4242]
\t      1: /dev/null
\t    cwd: /tmp
\t   root: /
"""


def explore_views(dump_dir):
    """x's four views; not rss where the pages went to a page server (no pagemap here)."""
    views = ("ps", "fds", "mems")
    if any(n.startswith("pagemap-") for n in os.listdir(dump_dir)):
        views += ("rss",)
    return views


def check_explore(dump_dir, expected, views):
    for what in views:
        rc, out, err = crit("x", dump_dir, what)
        out = out.decode("utf-8", "surrogateescape")
        ok = rc == 0 and bool(out) and out == expected.get(what, out)
        report(ok, "x %s %s" % (dump_dir, what), err or out)


def check_explore_quick(dump_dir, expected, views):
    """x's views, in this process."""
    for what in views:
        try:
            lines = explore.explore(dump_dir, what)
            report(bool(lines), "x %s %s" % (dump_dir, what), "no output")
        except CritError as e:
            report(False, "x %s %s" % (dump_dir, what), str(e))


# Images plugins write in formats of their own (the AMDGPU plugin's, the test plugins').
PLUGIN_IMAGES = ("amdgpu-", "testdev-", "unixsk-")
# Raw images with no magic that are not page data: a tmpfs's files, as tar --gzip wrote them.
RAW_IMAGES = ("tmpfs-dev-",)


def check_image_quick(path):
    """decode | encode gives back the bytes, in this process, plain and pretty."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        same = all(image.encode(json.loads(json.dumps(image.decode(data, pretty)))) == data
                   for pretty in (False, True))
        report(same, "decode | encode gives back %s" % path, "bytes differ")
    except CritError as e:
        if "unsupported image" in str(e):
            return print("SKIP: %s: %s" % (path, e))
        report(False, "decode %s" % path, str(e))


def check_dump_dir(dump_dir, expected=None, quick=False):
    """Every image of the directory, then x on it; expected: x's exact output, by verb.
    quick: only the in-process identity of each image (for sweeping many dumps)."""
    for name in sorted(os.listdir(dump_dir)):
        path = os.path.join(dump_dir, name)
        if name.startswith(PLUGIN_IMAGES + RAW_IMAGES) or (
                name.startswith(("pages-",) + magic.NET_RAW_PREFIXES) and quick):
            continue
        if os.path.isfile(path) and (name.endswith(".img") or name.startswith("stats-")):
            (check_image_quick if quick else check_image)(path)
    if os.path.exists(os.path.join(dump_dir, "pstree.img")):
        (check_explore_quick if quick else check_explore)(dump_dir, expected or {},
                                                          explore_views(dump_dir))


def le32(n):
    return n.to_bytes(4, "little")


def image_bytes(name, *entries):
    """An image of magic `name` holding the given packed entries."""
    return le32(magic.IMG_COMMON) + le32(magic.IMAGES[name][0]) + b"".join(
        le32(len(e)) + e for e in entries)


def image_json(name, *entries):
    return json.dumps({"magic": name, "entries": list(entries)}).encode()


def check_unknown_fields():
    """A field the schema does not know survives decode | encode."""
    # pstree_entry pid 100, ppid 0, pgid 100, sid 100, threads [100], then field 103 = 42.
    data = image_bytes("PSTREE", bytes.fromhex("08641000186420642864" "b8062a"))
    rc, text, err = crit("decode", stdin=data)
    kept = rc == 0 and "__unknown__" in json.loads(text)["entries"][0]
    report(kept, "unknown field shown under __unknown__", err or text.decode())
    rc, back, err = crit("encode", stdin=text)
    report(rc == 0 and back == data, "unknown field encoded back", err)


def check_forms(fixtures_dir):
    """encode takes numbers as hex or decimal strings too; info and show --nopl print
    as upstream crit does."""
    task = {"pid": "0x64", "ppid": "0", "pgid": 100, "sid": "100"}
    rc, data, err = crit("encode", stdin=image_json("PSTREE", task))
    want = image_bytes("PSTREE", bytes.fromhex("0864100018642064"))
    report(rc == 0 and data == want, "encode takes numbers in strings", err)
    rc, out, err = crit("info", os.path.join(fixtures_dir, "pagemap-100.img"))
    report(rc == 0 and json.loads(out) == {"magic": "PAGEMAP", "count": 3}, "info", err)
    rc, out, err = crit("show", "--nopl", os.path.join(fixtures_dir, "pipes-data.img"))
    nopl = rc == 0 and json.loads(out)["entries"][0]["extra"] == "... <12B>"
    report(nopl, "show --nopl", err or out.decode())


TASK = {"pid": 1, "ppid": 0, "pgid": 1, "sid": 1}

BAD_JSON = [
    ("not JSON", b"\x19\x43\x56\x54"),
    ("unknown magic name", image_json("NOPE")),
    ("entries not a list", b'{"magic": "PSTREE", "entries": {}}'),
    ("unknown field", image_json("PSTREE", dict(TASK, x=1))),
    ("missing required field", image_json("PSTREE", {"pid": 1})),
    ("wrong type", image_json("PSTREE", dict(TASK, pid="one"))),
    ("out of range", image_json("PSTREE", dict(TASK, pid=-1))),
    ("bad enum", image_json("FDINFO", {"id": 1, "flags": 0, "type": "NOPE", "fd": 0})),
    ("bad base64", image_json("PIPES_DATA", {"pipe_id": 1, "bytes": 1, "extra": "!!"})),
    ("payload size mismatch",
     image_json("PIPES_DATA", {"pipe_id": 1, "bytes": 9, "extra": "AA==\n"})),
]

BAD_IMAGES = [
    ("empty input", b""),
    ("unknown magic", b"\x01\x02\x03\x04\x05\x06\x07\x08"),
    ("unknown image magic", le32(magic.IMG_COMMON) + b"\x01\x02\x03\x04"),
    ("wrong first magic", le32(magic.IMG_SERVICE) + le32(magic.IMAGES["CORE"][0])),
    ("entry longer than the file", image_bytes("PSTREE") + b"\xff\xff\xff\x7f\x08"),
    ("garbage entry", image_bytes("PSTREE", b"\xff\xff\xff")),
    ("entry without its required fields", image_bytes("PSTREE", b"\x08\x01")),
]


def check_errors():
    for what, data in BAD_JSON:
        rc, _, err = crit("encode", stdin=data)
        report(one_error_line(rc, err), "encode refuses %s" % what, err)
    for what, data in BAD_IMAGES:
        rc, _, err = crit("decode", stdin=data)
        report(one_error_line(rc, err), "decode refuses %s" % what, err)
    rc, _, err = crit("show", "/nonexistent/core-1.img")
    report(one_error_line(rc, err), "show of a missing file", err)
    rc, _, err = crit("x", "/nonexistent", "ps")
    report(one_error_line(rc, err), "x of a missing directory", err)


def check_magic_h():
    """crit's magic table agrees with criu's, where criu has criu/include/magic.h."""
    if not os.path.exists(MAGIC_H):
        return print("SKIP: %s does not exist" % MAGIC_H)
    with open(MAGIC_H) as f:
        defined = dict(re.findall(r"#define\s+(\w+)_MAGIC\s+(0x[0-9a-fA-F]+)", f.read()))
    ours = dict((name, magic_) for name, (magic_, _) in magic.IMAGES.items())
    ours.update(IMG_COMMON=magic.IMG_COMMON, IMG_SERVICE=magic.IMG_SERVICE)
    wrong = ["%s %s" % (n, v) for n, v in defined.items() if n in ours and ours[n] != int(v, 16)]
    missing = [n for n in defined if n not in ours and int(defined[n], 16) != 2]
    report(not wrong and not missing, "magic table agrees with criu/include/magic.h",
           "differ: %s; not in crit: %s" % (wrong, missing))


def main(args):
    quick = "--quick" in args
    dump_dirs = [a for a in args if a != "--quick"]
    if not os.path.isdir(os.path.join(TOP, "crit", "pb2")):
        print("FAIL: crit/pb2 missing: run `make crit` first")
        return 1
    with tempfile.TemporaryDirectory(prefix="crit-test-") as tmp:
        write_fixtures(tmp)
        check_dump_dir(tmp, {"ps": EXPECTED_PS, "fds": EXPECTED_FDS})
        check_forms(tmp)
    check_unknown_fields()
    check_errors()
    check_magic_h()
    for dump_dir in dump_dirs:
        check_dump_dir(dump_dir, quick=quick)
    print("crit: %d failed" % failures)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
