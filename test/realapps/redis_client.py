#!/usr/bin/python3
"""A long-lived redis client, part of the dumped tree: it holds one connection to the
server for its whole life and, every 10 ms, sends CLIENT ID and INCR of its own key on it.
The id must never change (the same connection) and the counter must be the client's own
round number (the server's state went on). Each round appends "ROUND ID" to the status
file; a broken expectation appends "ERR why" and exits 1.
Usage: redis_client.py SOCKET KEY STATUS"""
import sys
import time

from lib import connect_unix


def command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a.encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def integer_reply(f):
    line = f.readline()
    if not line.startswith(b":"):
        raise RuntimeError(f"expected an integer reply, got {line!r}")
    return int(line[1:])


def main():
    path, key, status_path = sys.argv[1:]
    status = open(status_path, "a", buffering=1)
    try:
        s = connect_unix(path)
        f = s.makefile("rb")
        s.sendall(command("CLIENT", "ID"))
        client_id = integer_reply(f)
        n = 0
        while True:
            n += 1
            s.sendall(command("CLIENT", "ID") + command("INCR", key))
            got_id = integer_reply(f)
            got_n = integer_reply(f)
            if got_id != client_id:
                raise RuntimeError(f"round {n}: CLIENT ID {got_id}, was {client_id}")
            if got_n != n:
                raise RuntimeError(f"round {n}: INCR {key} gave {got_n}")
            status.write(f"{n} {client_id}\n")
            time.sleep(0.01)
    except Exception as e:
        status.write(f"ERR {type(e).__name__}: {e}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
