#!/usr/bin/python3
"""A client of asyncio_server.py, part of the dumped tree: one connection for its whole
life; every 10 ms it sends BURST messages at once, then reads their replies and checks them:
its own name and sequence number echoed, the connection's message count equal to the
sequence number (the server's per-connection state went on), the server's counter rising.
Each message appends "SEQ COUNTER" to the status file; a broken expectation appends
"ERR why" and exits 1.
Usage: asyncio_client.py SOCKET NAME BURST STATUS"""
import sys
import time

from lib import connect_unix


def main():
    path, name, burst, status_path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    status = open(status_path, "a", buffering=1)
    try:
        s = connect_unix(path)
        f = s.makefile("rb")
        seq = 0
        last_counter = 0
        while True:
            s.sendall(b"".join(f"MSG {name} {seq + k + 1}\n".encode() for k in range(burst)))
            for _ in range(burst):
                seq += 1
                line = f.readline()
                words = line.decode().split()
                if len(words) != 5 or words[0] != "REPLY" or words[3:] != [name, str(seq)]:
                    raise RuntimeError(f"message {seq}: reply {line!r}")
                counter, conn_msgs = int(words[1]), int(words[2])
                if conn_msgs != seq or counter <= last_counter:
                    raise RuntimeError(f"message {seq}: reply {line!r} after counter "
                                       f"{last_counter}")
                last_counter = counter
                status.write(f"{seq} {counter}\n")
            time.sleep(0.01)
    except Exception as e:
        status.write(f"ERR {type(e).__name__}: {e}\n")
        sys.exit(1)


main()
