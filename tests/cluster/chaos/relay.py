"""A TCP relay that delays every chunk it forwards: a slow host's API without sch_netem.

``python -m tests.cluster.chaos.relay LISTEN TARGET DELAY_FILE`` runs inside a
worker's namespace: the worker listens on loopback and advertises the
namespace's address, where this relay listens. The delay (milliseconds, read
from ``DELAY_FILE`` every half second, 0 if absent) is added to each chunk in
each direction, so every API round trip to that worker is that much slower,
while its gossip (UDP, another port) is untouched.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path


class Delay:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds = 0.0

    async def follow(self) -> None:
        while True:
            try:
                self.seconds = float(self.path.read_text().strip() or 0) / 1000
            except (OSError, ValueError):
                self.seconds = 0.0
            await asyncio.sleep(0.5)


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: Delay) -> None:
    with contextlib.suppress(OSError):
        while chunk := await reader.read(65536):
            if delay.seconds:
                await asyncio.sleep(delay.seconds)
            writer.write(chunk)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.close()


async def main(listen: str, target: str, delay_file: Path) -> None:
    delay = Delay(delay_file)
    follower = asyncio.create_task(delay.follow())
    host, port = target.rsplit(":", 1)

    async def relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer, delay), pipe(up_reader, writer, delay))

    bind, bind_port = listen.rsplit(":", 1)
    server = await asyncio.start_server(relay, bind, int(bind_port), reuse_address=True)
    async with server:
        await server.serve_forever()
    follower.cancel()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
