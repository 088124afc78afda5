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


def _parser():
    p = argparse.ArgumentParser(prog="crit", description="CRiu Image Tool")
    p.add_argument("--version", action="version", version="crit " + VERSION)
    sub = p.add_subparsers(dest="command", metavar="{decode,encode,info,x,show}",
                           help="Use crit CMD --help for command-specific help")
    d = sub.add_parser("decode", help="convert criu image from binary type to json")
    d.add_argument("--pretty", action="store_true",
                   help="Multiline with indents and some numerical fields in "
                        "field-specific format")
    d.add_argument("-i", "--in", dest="input",
                   help="criu image in binary format to be decoded (stdin by default)")
    d.add_argument("-o", "--out", dest="output",
                   help="where to put criu image in json format (stdout by default)")
    d.set_defaults(func=cmd_decode, nopl=False)
    e = sub.add_parser("encode", help="convert criu image from json type to binary")
    e.add_argument("-i", "--in", dest="input",
                   help="criu image in json format to be encoded (stdin by default)")
    e.add_argument("-o", "--out", dest="output",
                   help="where to put criu image in binary format (stdout by default)")
    e.set_defaults(func=cmd_encode)
    i = sub.add_parser("info", help="show info about image")
    i.add_argument("input", metavar="in")
    i.set_defaults(func=cmd_info)
    x = sub.add_parser("x", help="explore image dir")
    x.add_argument("dir")
    x.add_argument("what", choices=sorted(explore.EXPLORERS))
    x.set_defaults(func=cmd_explore)
    s = sub.add_parser("show", help="convert criu image from binary to human-readable json")
    s.add_argument("input", metavar="in")
    s.add_argument("--nopl", action="store_true", help="do not show entry payload (if exists)")
    s.set_defaults(func=cmd_decode, pretty=True, output=None)
    return p


def main(argv):
    # Names that are not UTF-8 (kept as surrogate escapes) print as the bytes they were.
    sys.stdout.reconfigure(errors="surrogateescape")
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("crit: error: too few arguments", file=sys.stderr)
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
