#!/usr/bin/python3
"""An asyncio server on a Unix socket, part of the dumped tree. Line protocol:
  "MSG NAME SEQ"  ->  "REPLY COUNTER CONN_MSGS NAME SEQ": COUNTER counts every MSG the
                      server has answered, CONN_MSGS those of this connection;
  "STATS"         ->  "STATS COUNTER ACCEPTED OPEN": connections accepted and still open.
Usage: asyncio_server.py SOCKET"""
import asyncio
import sys

state = {"counter": 0, "accepted": 0, "open": 0}


async def serve(reader, writer):
    state["accepted"] += 1
    state["open"] += 1
    conn_msgs = 0
    try:
        while line := await reader.readline():
            words = line.decode().split()
            if words[:1] == ["MSG"] and len(words) == 3:
                state["counter"] += 1
                conn_msgs += 1
                writer.write(f"REPLY {state['counter']} {conn_msgs} {words[1]} {words[2]}\n"
                             .encode())
            elif words == ["STATS"]:
                writer.write(f"STATS {state['counter']} {state['accepted']} {state['open']}\n"
                             .encode())
            else:
                writer.write(b"ERR unknown request\n")
            await writer.drain()
    finally:
        state["open"] -= 1
        writer.close()


async def main():
    server = await asyncio.start_unix_server(serve, sys.argv[1])
    async with server:
        await server.serve_forever()


asyncio.run(main())
