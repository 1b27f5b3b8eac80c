"""Bounded machine logs, kept by copytruncate.

A machine writes straight into ``logs/machine.log`` opened with ``O_APPEND``,
so nothing between the machine and its log can block or die (a worker crash
never stalls a machine's writes). The janitor keeps each log under a limit:
when one grows past it, its content moves to ``machine.log.1`` and the file is
truncated in place; the writer's next append lands at the new end. At worst a
log holds ``2 x max_bytes`` plus what is written between two passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger("bodega.worker.logs")

LOG_NAME = "machine.log"


def log_path(machine_dir: Path) -> Path:
    return machine_dir / "logs" / LOG_NAME


def rotate_if_large(path: Path, max_bytes: int) -> bool:
    """Copy then truncate ``path`` when it is over ``max_bytes``; True if it rotated."""
    try:
        if path.stat().st_size <= max_bytes:
            return False
    except FileNotFoundError:
        return False
    previous = path.with_name(path.name + ".1")
    with path.open("rb") as src, previous.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    os.truncate(path, 0)
    return True


def tail(path: Path, max_bytes: int) -> bytes:
    """The last ``max_bytes`` of the log (reaching into the rotated part if needed)."""
    chunks: list[bytes] = []
    remaining = max_bytes
    for candidate in (path, path.with_name(path.name + ".1")):
        if remaining <= 0:
            break
        try:
            with candidate.open("rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - remaining))
                data = handle.read(remaining)
        except FileNotFoundError:
            continue
        chunks.insert(0, data)
        remaining -= len(data)
    return b"".join(chunks)


class LogJanitor:
    def __init__(self, max_bytes: int, interval: float = 2.0) -> None:
        self.max_bytes = max_bytes
        self.interval = interval

    def sweep(self, machines_dir: Path) -> int:
        rotated = 0
        with contextlib.suppress(FileNotFoundError):
            for machine_dir in machines_dir.iterdir():
                try:
                    rotated += rotate_if_large(log_path(machine_dir), self.max_bytes)
                except OSError as exc:
                    log.warning("%s: could not rotate its log: %s", machine_dir.name, exc)
        return rotated

    async def run(self, machines_dir: Path) -> None:
        while True:
            await asyncio.sleep(self.interval)
            await asyncio.to_thread(self.sweep, machines_dir)
