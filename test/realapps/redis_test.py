#!/usr/bin/python3
"""redis-server checkpointed and restored with its data and a live client connection.

The server listens only on a Unix socket in out/redis/ (port 0: no inet socket, no
persistence, in the foreground); a holder process starts it and a long-lived client
(redis_client.py, INCR every 10 ms on one connection) as its children, so the whole tree
is one session that criu dumps with -t HOLDER. The test fills NR_KEYS keys with redis-cli,
dumps the tree, restores it detached, and checks: the same pids; the client carried on on
the same connection (same CLIENT ID, its rounds and the server's counter contiguous across
the dump); every key reads back; new writes are accepted and read back.

With the argument "tcp" (app redis_tcp), the server also listens on a TCP port of the
loopback and the client's connection is a TCP one, both ends in the tree: the dump takes
it with --tcp-established (TCP repair), and it must carry on after the restore."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import HERE, PYTHON, App, Fail, read_lines, wait_for  # noqa: E402
from redis_client import command  # noqa: E402

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
NR_KEYS = 10000
NR_NEW_KEYS = 1000
COUNTER_KEY = "client:rounds"
# Rounds the client must make after the restore (10 ms each) before the test trusts it.
ROUNDS_AFTER = 50
TCP = sys.argv[1:] == ["tcp"]


def value(prefix, i):
    """A distinct value per key, 13 to 140 bytes, so that keys differ in length too."""
    return f"{prefix}{i}-" + f"{i * 2654435761 % 2**32:08x}" * (1 + i % 16)


class Redis:
    def __init__(self, app):
        self.app = app
        self.sock = app.sock_path("redis.sock")

    def cli(self, args, what, input=None):
        return self.app.run([REDIS_CLI, "-s", self.sock] + args, what, input=input)

    def fill(self, prefix, keys):
        """SETs every key through redis-cli --pipe (one connection, pipelined)."""
        cmds = b"".join(command("SET", f"{prefix}{i}", value(prefix, i)) for i in keys)
        out = self.cli(["--pipe"], f"redis-cli --pipe ({prefix}*)", input=cmds)
        if f"errors: 0, replies: {len(keys)}" not in out:
            raise Fail(f"redis-cli --pipe ({prefix}*): {out.strip().splitlines()[-1:]}")

    def check(self, prefix, keys):
        """Reads every key back with MGET, 1000 at a time, and compares the values."""
        keys = list(keys)
        lines = "".join("MGET " + " ".join(f"{prefix}{i}" for i in keys[j:j + 1000]) + "\n"
                        for j in range(0, len(keys), 1000))
        got = self.cli(["--raw"], f"redis-cli MGET ({prefix}*)", input=lines.encode())
        got = got.splitlines()
        if len(got) != len(keys):
            raise Fail(f"MGET of {len(keys)} keys {prefix}* gave {len(got)} values")
        for i, v in zip(keys, got):
            if v != value(prefix, i):
                raise Fail(f"key {prefix}{i} reads {v[:40]!r}, wrote {value(prefix, i)[:40]!r}")

    def dbsize(self):
        return int(self.cli(["DBSIZE"], "redis-cli DBSIZE"))


def client_rounds(app):
    """The client's rounds so far, checked: contiguous from 1, one connection id."""
    lines = read_lines(app.path("client.status"))
    rounds = []
    for line in lines:
        if line.startswith("ERR"):
            raise Fail(f"client: {line}")
        n, cid = line.split()
        rounds.append((int(n), cid))
    for k, (n, cid) in enumerate(rounds):
        if n != k + 1 or cid != rounds[0][1]:
            raise Fail(f"client: round line {k + 1} is {n} with connection id {cid}, "
                       f"the first was id {rounds[0][1]}")
    return len(rounds)


def free_tcp_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test(app):
    redis = Redis(app)
    port = free_tcp_port() if TCP else 0
    with open(app.path("redis.conf"), "w") as f:
        f.write(f"port {port}\nbind 127.0.0.1\nunixsocket {redis.sock}\nunixsocketperm 700\n"
                f"daemonize no\nsupervised no\nsave \"\"\nappendonly no\ndir {app.dir}\n"
                f"logfile {app.path('redis.log')}\n")
    client_at = f"127.0.0.1:{port}" if TCP else redis.sock
    root = app.spawn_holder([[REDIS_SERVER, app.path("redis.conf")],
                             [PYTHON, os.path.join(HERE, "redis_client.py"), client_at,
                              COUNTER_KEY, app.path("client.status")]])
    wait_for(lambda: client_rounds(app) >= 5, "the client's first rounds")
    redis.fill("key:", range(NR_KEYS))
    redis.check("key:", range(NR_KEYS))
    tree = app.tree(root)
    if len(tree) != 3:
        raise Fail(f"the tree before the dump is {tree}, not holder, server and client")

    rounds_at_dump = client_rounds(app)
    app.dump(root, ["--tcp-established"] if TCP else [])
    app.restore(root)
    if app.tree(root) != tree:
        raise Fail(f"the restored tree is {app.tree(root)}, the dumped one {tree}")

    rounds = wait_for(lambda: (n := client_rounds(app)) >= rounds_at_dump + ROUNDS_AFTER and n,
                      "the client's rounds after the restore")
    redis.check("key:", range(NR_KEYS))
    redis.fill("new:", range(NR_NEW_KEYS))
    redis.check("new:", range(NR_NEW_KEYS))
    size = redis.dbsize()
    if size != NR_KEYS + NR_NEW_KEYS + 1:
        raise Fail(f"DBSIZE {size} after the new writes, expected {NR_KEYS + NR_NEW_KEYS + 1}")
    app.check_holder()
    print(f"redis: {NR_KEYS} keys read back, {NR_NEW_KEYS} new ones written; client round "
          f"{rounds_at_dump} at the dump, {rounds} after, one connection", flush=True)


if not os.access(REDIS_SERVER, os.X_OK) or not os.access(REDIS_CLI, os.X_OK):
    print("FAIL redis: redis-server or redis-cli is not installed (scripts/install-deps.sh)")
    sys.exit(1)
App("redis_tcp" if TCP else "redis").main(test)
