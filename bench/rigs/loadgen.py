"""A small, fast HTTP/1.1 load generator: keep-alive connections, bounded concurrency.

Benchmarks measure a server and a baseline with the same generator, so its
own cost cancels out of the ratio; it is kept lean (raw asyncio streams, no
HTTP library) so that on a 2-core machine it takes as little CPU from the
servers as it can.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, url: str) -> Connection:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        return cls(reader, writer, f"{parts.hostname}:{parts.port}")

    async def request(self, method: str, path: str, body: bytes = b"",
                      headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        extra = headers or {}
        lines = [f"{method} {path} HTTP/1.1", f"Content-Length: {len(body)}"]
        if not any(k.lower() == "host" for k in extra):
            lines.append(f"Host: {self.host}")
        if body:
            lines.append("Content-Type: application/json")
        lines += [f"{k}: {v}" for k, v in extra.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = 0
        chunked = False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            lowered = name.strip().lower()
            if lowered == b"content-length":
                length = int(value)
            elif lowered == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if chunked:
            data = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                data += chunk[:-2]
            return status, data
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


@dataclass
class Result:
    seconds: float
    latencies: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    errors: list[bytes] = field(default_factory=list)  # the first few error bodies

    @property
    def count(self) -> int:
        return len(self.latencies)

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def ok(self) -> int:
        return sum(n for code, n in self.statuses.items() if 200 <= code < 300)

    def percentile(self, p: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    def median(self) -> float:
        return statistics.median(self.latencies) if self.latencies else 0.0


Make = Callable[[int], tuple[str, str, bytes]]  # request number -> (method, path, body)


async def run(url: str, make: Make, *, total: int, concurrency: int,
              headers: dict[str, str] | None = None,
              on_response: Callable[[int, bytes], None] | None = None) -> Result:
    """Send ``total`` requests from ``concurrency`` keep-alive connections."""
    counter = iter(range(total))
    result = Result(0.0)

    async def client() -> None:
        conn = await Connection.open(url)
        try:
            for n in counter:
                method, path, body = make(n)
                began = time.perf_counter()
                status, data = await conn.request(method, path, body, headers)
                result.latencies.append(time.perf_counter() - began)
                result.statuses[status] = result.statuses.get(status, 0) + 1
                if status >= 400 and len(result.errors) < 3:
                    result.errors.append(data[:300])
                if on_response is not None:
                    on_response(status, data)
        finally:
            conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    result.seconds = time.perf_counter() - started
    return result


def body(data: Any) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()
