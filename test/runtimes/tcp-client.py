#!/usr/bin/env python3
# tcp-client.py PORT BASE: the runtime tests' client of an echo server in a container.
# Connects to 127.0.0.1:PORT, sends 64 KiB and reads them back, then writes BASE.ready and
# waits for BASE.go (the test checkpoints and restores the container meanwhile), sends
# 64 KiB more on the same connection and reads them back. BASE.result: "ok", or what went
# wrong. Bytes are a fixed pseudo-random sequence; 60 s bounds each wait for a stuck
# container, not a timing.
import os
import random
import socket
import sys
import time


def exchange(sock, data):
    sock.sendall(data)
    got = b''
    while len(got) < len(data):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError('connection closed after %d of %d bytes' % (len(got), len(data)))
        got += chunk
    if got != data:
        first = next(i for i in range(len(data)) if got[i] != data[i])
        raise RuntimeError('byte %d differs' % first)


def main():
    port, base = int(sys.argv[1]), sys.argv[2]
    rnd = random.Random(21)
    result = 'ok'
    try:
        sock = None
        deadline = time.monotonic() + 60
        while sock is None:
            try:
                sock = socket.create_connection(('127.0.0.1', port), timeout=60)
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        exchange(sock, rnd.randbytes(65536))
        open(base + '.ready', 'w').write('1\n')
        while not os.path.exists(base + '.go'):
            if time.monotonic() > deadline + 60:
                raise RuntimeError('no go after 120 s')
            time.sleep(0.05)
        exchange(sock, rnd.randbytes(65536))
        sock.close()
    except Exception as e:  # the test reads the reason
        result = 'failed: %s' % e
    open(base + '.result', 'w').write(result)


if __name__ == '__main__':
    main()
