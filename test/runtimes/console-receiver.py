#!/usr/bin/env python3
# console-receiver.py SOCKET OUT: runc's --console-socket for the runtime tests (Debian's
# runc has no recvtty). Listens on the Unix socket SOCKET; each connection brings a pty
# master (SCM_RIGHTS), as runc run and runc restore send the container's console; what
# the container writes on the Nth console is appended to OUT.N. Runs until killed.
import os
import socket
import sys
import threading


def drain(fd, path):
    with open(path, 'ab', buffering=0) as out:
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:  # EIO once the pty's other side is gone
                return
            if not data:
                return
            out.write(data)


def main():
    path, out = sys.argv[1:]
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    n = 0
    while True:
        conn, _ = srv.accept()
        _, fds, _, _ = socket.recv_fds(conn, 4096, 4)
        conn.close()
        for fd in fds:
            n += 1
            threading.Thread(target=drain, args=(fd, '%s.%d' % (out, n)), daemon=True).start()


if __name__ == '__main__':
    main()
