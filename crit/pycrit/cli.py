# crit's command line: decode, encode, show, info and x, spelled as upstream crit spells
# them. Every failure is one "crit: ..." line on stderr and exit status 1.
import argparse
import json
import os
import sys

from . import VERSION, CritError, explore, image, magic


def _read_input(path):
    if path is None:
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise CritError(e.strerror)


def _write_output(path, data):
    if path is None:
        out = sys.stdout if isinstance(data, str) else sys.stdout.buffer
        out.write(data)
        out.flush()
        return
    try:
        with open(path, "w" if isinstance(data, str) else "wb") as f:
            f.write(data)
    except OSError as e:
        raise CritError("%s: %s" % (path, e.strerror))


def _read_image(path):
    if path is not None and os.path.basename(path).startswith(magic.NET_RAW_PREFIXES):
        raise CritError("raw data of ip, iptables-save or nft with no magic; "
                        "crit decodes only protobuf images")
    if path is not None and os.path.basename(path).startswith("pages-"):
        raise CritError("pages images hold raw page data with no magic; "
                        "crit decodes only protobuf images")
    if path is not None and os.path.basename(path).startswith("tmpfs-dev-"):
        raise CritError("tmpfs-dev images hold a tmpfs's files as tar --gzip wrote them; "
                        "crit decodes only protobuf images")
    return _read_input(path)


def _decode_image(path, **opts):
    try:
        return image.decode(_read_image(path), **opts)
    except CritError as e:
        raise CritError("%s: %s" % (path or "stdin", e))


def cmd_decode(args):
    img = _decode_image(args.input, pretty=args.pretty, nopl=args.nopl)
    text = json.dumps(img, indent=4 if args.pretty else None)
    _write_output(args.output, text + "\n" if args.output is None else text)


def _encode_json(path):
    try:
        img = json.loads(_read_input(path).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise CritError("not JSON (encode takes what decode prints): %s" % e)
    return image.encode(img)


def cmd_encode(args):
    try:
        data = _encode_json(args.input)
    except CritError as e:
        raise CritError("%s: %s" % (args.input or "stdin", e))
    _write_output(args.output, data)


def cmd_info(args):
    try:
        summary = image.info(_read_image(args.input))
    except CritError as e:
        raise CritError("%s: %s" % (args.input, e))
    print(json.dumps(summary, indent=4))


def cmd_explore(args):
    for line in explore.explore(args.dir, args.what):
        print(line)


def _with_help(parser):
    """-h/--help worded our way: argparse's own line is what every argparse tool prints."""
    parser.add_argument("-h", "--help", action="help", help="print this help and exit")
    return parser


def _command(sub, name, summary, description):
    return _with_help(sub.add_parser(name, help=summary, description=description,
                                     add_help=False))


def _parser():
    p = _with_help(argparse.ArgumentParser(
        prog="crit", add_help=False,
        description="Read and write the image files criu dump leaves behind: print an "
                    "image as JSON, build an image from such JSON, or explain a whole "
                    "dump directory.",
        epilog="Each command takes -h for its own options, e.g. crit show -h."))
    p.add_argument("--version", action="version", version="crit " + VERSION,
                   help="print crit's version and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    d = _command(sub, "decode", "image to JSON (one line; --pretty indents it)",
                 "Print the entries of an image file as JSON. What it prints, given "
                 "to encode, gives back the image byte for byte.")
    d.add_argument("--pretty", action="store_true",
                   help="indent the JSON and spell some numbers for people: addresses and "
                        "flags in hex, signal masks and capability sets as lists")
    d.add_argument("-i", "--in", dest="input", metavar="IMAGE",
                   help="the image file to read; standard input when left out")
    d.add_argument("-o", "--out", dest="output", metavar="JSON",
                   help="the file the JSON goes to; standard output when left out")
    d.set_defaults(func=cmd_decode, nopl=False)
    e = _command(sub, "encode", "JSON (as decode prints it) back to an image",
                 "Write the image file that JSON from decode or show describes; "
                 "either form of it is taken.")
    e.add_argument("-i", "--in", dest="input", metavar="JSON",
                   help="the JSON file to read; standard input when left out")
    e.add_argument("-o", "--out", dest="output", metavar="IMAGE",
                   help="the image file to write; standard output when left out")
    e.set_defaults(func=cmd_encode)
    i = _command(sub, "info", "an image's type and how many entries it holds",
                 "Print, as JSON, the type of an image file and its number of entries "
                 "(a pagemap's header entry is not counted).")
    i.add_argument("input", metavar="IMAGE", help="the image file to read")
    i.set_defaults(func=cmd_info)
    x = _command(sub, "x", "explain a dump directory (ps, fds, mems or rss)",
                 "Explain a directory criu dumped into, one view at a time.")
    x.add_argument("dir", metavar="DIR", help="the directory the images lie in")
    x.add_argument("what", metavar="VIEW", choices=sorted(explore.EXPLORERS),
                   help="ps: the process tree (PID, PGID, SID, command); fds: each task's "
                        "descriptors, cwd and root; mems: each task's memory map; "
                        "rss: which pages of each mapping were dumped")
    x.set_defaults(func=cmd_explore)
    s = _command(sub, "show", "image to indented JSON, as decode --pretty",
                 "Print the entries of an image file as indented JSON on standard "
                 "output, numbers spelled as decode --pretty spells them.")
    s.add_argument("input", metavar="IMAGE", help="the image file to read")
    s.add_argument("--nopl", action="store_true",
                   help="print only the size of the raw bytes that follow some entries "
                        "(a pipe's queued data, a ghost file's contents), not the bytes")
    s.set_defaults(func=cmd_decode, pretty=True, output=None)
    return p


def main(argv):
    # Names that are not UTF-8 (kept as surrogate escapes) print as the bytes they were.
    sys.stdout.reconfigure(errors="surrogateescape")
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("crit: error: no command given; crit -h lists them", file=sys.stderr)
        return 1
    try:
        args.func(args)
    except CritError as e:
        print("crit: %s" % e, file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (crit show ... | head): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except KeyboardInterrupt:
        return 130
    return 0
