"""What joining a response's head and body costs and saves: one small answer after another on a
keep-alive connection, served by ``bodega.runtime.serve`` as every daemon serves, its writes
joined (as shipped) or passed through as uvicorn makes them (head, then body), side by side.

Each server runs in a process of its own (its CPU read from ``getrusage`` between rounds);
the client is this process, a blocking socket, one request at a time. Rounds alternate
between the two servers. Prints each one's CPU a request, server and client, and the ratio.

    python -m bench.serve_writes [--requests 3000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time

BODY = b'{"id":"01KB2ZQ","name":"one3000-r0-1","state":"running","tasks":[]}' * 5
REQUEST = (b"POST /sched/submit HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
           b"Content-Length: 300\r\n\r\n" + b"x" * 300)

SERVER = r"""
import asyncio, resource, sys
import uvloop
import bodega.runtime.serve as serving
from starlette.responses import Response

if sys.argv[1] == "split":  # uvicorn's own writes, passed through as they come
    class Through:
        def __init__(self, transport): self.transport = transport
        def __getattr__(self, name): return getattr(self.transport, name)
    serving._Coalesced = Through

async def app(scope, receive, send):
    if scope["type"] == "http":
        while (await receive()).get("more_body"):
            pass
        await Response(BODY, media_type="application/json")(scope, receive, send)

async def main():
    served = await serving.serve(app, "127.0.0.1", 0)
    print(served.port, flush=True)
    loop = asyncio.get_running_loop()
    while await loop.run_in_executor(None, sys.stdin.readline):
        used = resource.getrusage(resource.RUSAGE_SELF)
        print(used.ru_utime + used.ru_stime, flush=True)

uvloop.run(main())
"""


class Server:
    def __init__(self, mode: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", f"BODY = {BODY!r}\n" + SERVER, mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def cpu(self) -> float:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def ask(self) -> None:
        self.sock.sendall(REQUEST)
        got = b""
        while b"\r\n\r\n" not in got or len(got.partition(b"\r\n\r\n")[2]) < len(BODY):
            got += self.sock.recv(65536)

    def close(self) -> None:
        self.sock.close()
        self.process.kill()
        self.process.wait()


def measure(server: Server, requests: int) -> tuple[float, float]:
    """Server and client CPU seconds a request over ``requests`` of them."""
    before, began = server.cpu(), time.process_time()
    for _ in range(requests):
        server.ask()
    client = time.process_time() - began
    return (server.cpu() - before) / requests, client / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    servers = {mode: Server(mode) for mode in ("split", "joined")}
    try:
        for server in servers.values():
            measure(server, 200)  # warm
        seen: dict[str, list[tuple[float, float]]] = {mode: [] for mode in servers}
        for _ in range(args.rounds):
            for mode, server in servers.items():
                seen[mode].append(measure(server, args.requests))
    finally:
        for server in servers.values():
            server.close()

    def median(mode: str, side: int) -> float:
        return statistics.median(r[side] for r in seen[mode]) * 1e6

    for side, name in ((0, "server"), (1, "client")):
        split, joined = median("split", side), median("joined", side)
        print(f"{name} CPU a request: head and body apart {split:.1f} us, joined "
              f"{joined:.1f} us ({joined / split:.2f}x)")


if __name__ == "__main__":
    main()
