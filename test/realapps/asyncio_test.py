#!/usr/bin/python3
"""An asyncio server (asyncio_server.py) and two clients holding connections to it on a
Unix socket, checkpointed and restored in the middle of their exchange.

A holder starts the server and the clients (one message at a time, and bursts of 16) as
its children; the test dumps the tree while they talk, restores it detached, and checks:
the same pids; each client carried on on its connection (its sequence numbers and the
server's per-connection count contiguous across the dump); every message got its own value
of the server's counter, none skipped; and, through a new connection, that the server's
counter matches the clients' messages and that it has accepted only the clients'
connections and this one."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import HERE, PYTHON, App, Fail, read_lines, wait_for  # noqa: E402

CLIENTS = {"one": 1, "burst": 16}  # name: messages sent at once
# Messages each client must exchange after the restore before the test trusts it.
MSGS_AFTER = 50


def client_msgs(app, name):
    """The client's (SEQ, COUNTER) pairs so far, checked: sequence numbers from 1 on."""
    msgs = []
    for line in read_lines(app.path(f"{name}.status")):
        if line.startswith("ERR"):
            raise Fail(f"client {name}: {line}")
        seq, counter = (int(w) for w in line.split())
        if seq != len(msgs) + 1:
            raise Fail(f"client {name}: status line {len(msgs) + 1} is {line!r}")
        msgs.append((seq, counter))
    return msgs


def check_counters(app):
    """Every message got its own value of the server's counter, across the dump: the
    counters the clients saw are distinct and, up to the lowest of their last ones (above
    it, replies may still be on their way), are 1, 2, 3... with none missing. Returns the
    number of messages the clients have seen answered."""
    msgs = {name: client_msgs(app, name) for name in CLIENTS}
    counters = sorted(c for m in msgs.values() for _, c in m)
    if len(set(counters)) != len(counters):
        raise Fail("two messages got the same value of the server's counter")
    low = min(m[-1][1] for m in msgs.values())
    if counters[:low] != list(range(1, low + 1)):
        raise Fail(f"the server's counter skipped a value below {low}")
    return len(counters)


def stats(sock):
    """Asks the server for its state through a new connection (from outside the tree)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(sock)
        s.sendall(b"STATS\n")
        line = s.makefile("rb").readline().decode()
    words = line.split()
    if len(words) != 4 or words[0] != "STATS":
        raise Fail(f"STATS: the server answered {line!r}")
    return [int(w) for w in words[1:]]


def test(app):
    sock = app.sock_path("server.sock")
    root = app.spawn_holder([[PYTHON, os.path.join(HERE, "asyncio_server.py"), sock]] + [
        [PYTHON, os.path.join(HERE, "asyncio_client.py"), sock, name, str(burst),
         app.path(f"{name}.status")] for name, burst in CLIENTS.items()])
    for name in CLIENTS:
        wait_for(lambda: len(client_msgs(app, name)) >= 20, f"client {name}'s first messages")
    tree = app.tree(root)
    if len(tree) != 2 + len(CLIENTS):
        raise Fail(f"the tree before the dump is {tree}, not holder, server and clients")

    at_dump = {name: len(client_msgs(app, name)) for name in CLIENTS}
    app.dump(root)
    app.restore(root)
    if app.tree(root) != tree:
        raise Fail(f"the restored tree is {app.tree(root)}, the dumped one {tree}")

    for name in CLIENTS:
        wait_for(lambda: len(client_msgs(app, name)) >= at_dump[name] + MSGS_AFTER,
                 f"client {name}'s messages after the restore")
    before = check_counters(app)
    counter, accepted, open_conns = stats(sock)
    since = check_counters(app)
    # The clients go on talking meanwhile, a burst each at most sent and not yet read.
    if not before <= counter <= since + sum(CLIENTS.values()):
        raise Fail(f"server counter {counter}, the clients saw {before}..{since} answers")
    if accepted != len(CLIENTS) + 1 or open_conns != len(CLIENTS) + 1:
        raise Fail(f"the server accepted {accepted} connections and has {open_conns} open, "
                   f"expected {len(CLIENTS) + 1} of each (a client reconnected?)")
    app.check_holder()
    print(f"asyncio: messages {at_dump} at the dump, server counter {counter} after; "
          f"{accepted} connections accepted in all", flush=True)


App("asyncio").main(test)
