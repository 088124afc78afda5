#!/usr/bin/python3
"""iputils ping checkpointed and restored: `ping -i 0.2 127.0.0.1`.

ping's socket (an ICMP ping socket, or a raw one where net.ipv4.ping_group_range leaves
root out) has IP_RECVERR, IP_RECVTTL and SO_TIMESTAMP on, which CRIU's images have no field
for (this criu keeps them in inetsk-ext.img). The test dumps ping after a few replies,
restores it, and checks that it goes on printing replies on the same socket: each icmp_seq
after the restore higher than the one before it and than the last before the dump, each
with the TTL that ping reads from the reply's IP_TTL control message (64, the namespace's
default) and its round-trip time from SO_TIMESTAMP's."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import App, Fail, alive, read_lines, wait_for  # noqa: E402

PING = "/usr/bin/ping"
# Replies the restored ping must print before the test trusts it.
REPLIES_AFTER = 5
REPLY = re.compile(r"^64 bytes from 127\.0\.0\.1: icmp_seq=(\d+) ttl=(\d+) time=[0-9.]+ ms$")


def replies(app):
    """The icmp_seq of each reply line of ping's output, failing on any other line."""
    seqs = []
    for line in read_lines(app.path("ping.log"))[1:]:
        m = REPLY.match(line)
        if not m:
            raise Fail(f"ping printed {line!r}")
        if m.group(2) != "64":
            raise Fail(f"ping printed a reply with ttl {m.group(2)}: {line!r}")
        seqs.append(int(m.group(1)))
    return seqs


def test(app):
    with open("/proc/sys/net/ipv4/ip_default_ttl") as f:
        if f.read().strip() != "64":
            raise Fail("net.ipv4.ip_default_ttl is not 64")
    pid = app.spawn([PING, "-i", "0.2", "127.0.0.1"], "ping.log")
    wait_for(lambda: len(replies(app)) >= 3, "ping's first replies")
    app.dump(pid)
    before = replies(app)
    app.restore(pid)
    if not alive(pid):
        raise Fail(f"ping (pid {pid}) is not running after the restore")
    wait_for(lambda: len(replies(app)) >= len(before) + REPLIES_AFTER,
             "ping's replies after the restore")
    seqs = replies(app)
    if seqs[:len(before)] != before:
        raise Fail("ping's output before the dump changed")
    for k in range(1, len(seqs)):
        if seqs[k] <= seqs[k - 1]:
            raise Fail(f"icmp_seq {seqs[k]} follows {seqs[k - 1]}")
    print(f"ping: icmp_seq {before[-1]} last before the dump, {seqs[len(before)]} first after, "
          f"{seqs[-1]} last", flush=True)


if not os.access(PING, os.X_OK):
    print("FAIL ping: ping is not installed (scripts/install-deps.sh: iputils-ping)")
    sys.exit(1)
App("ping").main(test)
