"""HAProxy's runtime API (the admin stats socket), and its ``show stat`` answer.

Commands go in batches on one connection, separated by ``;``; HAProxy
answers each and closes. Answers that mean a command did nothing (no such
server, bad argument) are returned as errors so the caller can fall back to
a reload, which renders every server anew.
"""

from __future__ import annotations

import asyncio
import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

BATCH = 40  # commands per connection: one line stays well under HAProxy's 16 kB buffer
ERROR_MARKERS = ("No such", "Require", "nvalid", "nknown", "not found", "error", "Error")


class RuntimeUnavailable(Exception):
    """The socket did not answer: HAProxy is not running, or is between processes."""


@dataclass(frozen=True)
class StatRow:
    proxy: str
    server: str  # FRONTEND, BACKEND or a server's name
    current: int  # scur: sessions now
    queued: int  # qcur
    total: int  # stot: sessions ever
    requests: int  # req_tot (frontends), lbtot for servers: times chosen
    responses: tuple[tuple[str, int], ...]  # ("2xx", n), ... (hrsp_*)
    connect_errors: int  # econ
    retries: int  # wretr
    redispatches: int  # wredis
    status: str
    idle: int = 0  # idle_conn_cur + safe_conn_cur: connections kept open for a next request
    # Averages over the last 1024 requests, in ms (HAProxy keeps no histogram): from the
    # request sent to the response's headers (rtime), and the whole exchange (ttime).
    response_ms: int = 0
    total_ms: int = 0


class RuntimeApi:
    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        self.path = path
        self.timeout = timeout

    async def send(self, commands: Sequence[str]) -> list[str]:
        """Run commands; the error lines HAProxy answered (empty: all applied)."""
        errors: list[str] = []
        for i in range(0, len(commands), BATCH):
            answer = await self.ask("; ".join(commands[i:i + BATCH]))
            errors += [line for line in answer.splitlines()
                       if any(marker in line for marker in ERROR_MARKERS)]
        return errors

    async def send_payload(self, command: str, payload: str) -> list[str]:
        """One command with a multi-line payload (``<<``, ended by an empty line): a
        certificate, a crt-list line. The error lines HAProxy answered."""
        answer = await self.ask(f"{command} <<\n{payload.strip()}\n")
        return [line for line in answer.splitlines()
                if any(marker in line for marker in ERROR_MARKERS)]

    async def ask(self, command: str) -> str:
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_unix_connection(str(self.path))
                try:
                    writer.write(command.encode() + b"\n")
                    await writer.drain()
                    return (await reader.read()).decode(errors="replace")
                finally:
                    writer.close()
        except (OSError, TimeoutError) as exc:
            raise RuntimeUnavailable(f"{self.path}: {exc or type(exc).__name__}") from exc

    async def worker_pid(self) -> int:
        for line in (await self.ask("show info")).splitlines():
            if line.startswith("Pid:"):
                return int(line.split(":", 1)[1])
        raise RuntimeUnavailable(f"{self.path}: show info named no Pid")

    async def stats(self) -> list[StatRow]:
        return parse_stat(await self.ask("show stat"))


def parse_stat(text: str) -> list[StatRow]:
    """Rows of ``show stat`` CSV (its header line starts with ``# ``)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# "):
        return []
    rows = csv.DictReader([lines[0][2:], *(line for line in lines[1:] if line)])
    out = []
    for row in rows:
        server = row.get("svname") or ""
        out.append(StatRow(
            proxy=row.get("pxname") or "", server=server, current=_int(row, "scur"),
            queued=_int(row, "qcur"), total=_int(row, "stot"),
            requests=_int(row, "req_tot") if server == "FRONTEND" else _int(row, "lbtot"),
            responses=tuple((code, _int(row, f"hrsp_{code}"))
                            for code in ("1xx", "2xx", "3xx", "4xx", "5xx", "other")),
            connect_errors=_int(row, "econ"), retries=_int(row, "wretr"),
            redispatches=_int(row, "wredis"), status=row.get("status") or "",
            idle=_int(row, "idle_conn_cur") + _int(row, "safe_conn_cur"),
            response_ms=_int(row, "rtime"), total_ms=_int(row, "ttime")))
    return out


def _int(row: dict[str, str], key: str) -> int:
    value = row.get(key) or ""
    return int(value) if value.isdigit() else 0
