"""Bounded, time-stamped machine logs, kept by copytruncate.

A machine writes straight into ``logs/machine.log`` opened with ``O_APPEND``,
so nothing between the machine and its log can block or die (a worker crash
never stalls a machine's writes). The janitor keeps each log under a limit:
when one grows past it, its content moves to ``machine.log.1`` and the file is
truncated in place; the writer's next append lands at the new end. At worst a
log holds ``2 x max_bytes`` plus what is written between two passes. Between
its passes it notes, every ``STAMP_INTERVAL``, how far each log has grown and
when (``logtimes.py``): that is what dates every line. A start dates what the log
holds before its run can write (``close_off``), and the keeper dates every log once
more as it stops: the lines of a stop are never dated by the next run's first look
(a worker restarted in between, or a start within one interval of the stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import threading
from pathlib import Path

from bodega.worker.drivers.process.logtimes import (
    STAMP_INTERVAL,
    append_checkpoint,
    last_offset,
    times_path,
)

log = logging.getLogger("bodega.worker.logs")

LOG_NAME = "machine.log"

# Checkpoints must go in the order of the sizes they record, and a log is dated from the
# keeper's thread, from a start on the event loop, and (a process and an image driver
# side by side) by two keepers: one writer of checkpoints at a time in the process.
_CHECKPOINTS = threading.Lock()


def log_path(machine_dir: Path) -> Path:
    return machine_dir / "logs" / LOG_NAME


def date_log(path: Path, known: int | None = None) -> int | None:
    """A checkpoint for what ``path`` holds past ``known`` (the size at its last
    checkpoint; read from its checkpoints when None); the size dated now, None if there
    is no log."""
    with _CHECKPOINTS:
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        if known is None:
            known = last_offset(times_path(path))
        if stat.st_size < known:  # truncated by someone else: what it held is gone
            known = 0
        if stat.st_size > known:
            append_checkpoint(times_path(path), stat.st_size, stat.st_mtime)
            known = stat.st_size
        return known


def date_logs(machines_dir: Path) -> None:
    """``date_log`` for every machine's log, from its checkpoints alone."""
    with contextlib.suppress(FileNotFoundError):
        for machine_dir in machines_dir.iterdir():
            try:
                date_log(log_path(machine_dir))
            except OSError as exc:
                log.warning("%s: could not date its log: %s", machine_dir.name, exc)


def close_off(machine_dir: Path) -> None:
    """Date what the machine's log holds before a new run writes to it: its earlier runs'
    lines (a stop's last ones too) keep the time of their last write, whether or not the
    keeper looked since, and whatever happened to the worker meanwhile."""
    date_log(log_path(machine_dir))


def rotate_if_large(path: Path, max_bytes: int) -> bool:
    """Copy then truncate ``path`` when it is over ``max_bytes``; True if it rotated.

    Its checkpoints go with it: a last one for what it holds now, then the file moves
    to ``machine.log.1.times`` and the live log starts a new one."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    if stat.st_size <= max_bytes:
        return False
    previous = path.with_name(path.name + ".1")
    times = times_path(path)
    with _CHECKPOINTS:
        with path.open("rb") as src, previous.open("wb") as dst:
            shutil.copyfileobj(src, dst)
            copied = src.tell()
        if copied > last_offset(times):
            append_checkpoint(times, copied, os.stat(path).st_mtime)
        os.truncate(path, 0)
        if times.exists():
            os.replace(times, times_path(previous))
        else:
            times_path(previous).unlink(missing_ok=True)
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
    def __init__(self, max_bytes: int, interval: float = 2.0,
                 stamp_interval: float = STAMP_INTERVAL) -> None:
        self.max_bytes = max_bytes
        self.interval = interval
        self.stamp_interval = stamp_interval
        self._sizes: dict[Path, int] = {}  # each log's size at its last checkpoint

    def sweep(self, machines_dir: Path) -> int:
        rotated = 0
        with contextlib.suppress(FileNotFoundError):
            for machine_dir in machines_dir.iterdir():
                path = log_path(machine_dir)
                try:
                    self.stamp(path)
                    if rotate_if_large(path, self.max_bytes):
                        rotated += 1
                        self._sizes[path] = 0
                except OSError as exc:
                    log.warning("%s: could not rotate its log: %s", machine_dir.name, exc)
        return rotated

    def stamp_all(self, machines_dir: Path) -> None:
        """A checkpoint for every log that grew since its last one."""
        seen = set()
        with contextlib.suppress(FileNotFoundError):
            for machine_dir in machines_dir.iterdir():
                path = log_path(machine_dir)
                seen.add(path)
                try:
                    self.stamp(path)
                except OSError as exc:
                    log.warning("%s: could not date its log: %s", machine_dir.name, exc)
        for gone in self._sizes.keys() - seen:  # destroyed machines
            del self._sizes[gone]

    def stamp(self, path: Path) -> None:
        # None at the first look since the worker started: resume from the file.
        known = date_log(path, self._sizes.get(path))
        if known is not None:
            self._sizes[path] = known

    async def run(self, machines_dir: Path) -> None:
        """Date and rotate the logs until cancelled. The first look is at once (what was
        written while the worker was down is dated apart from what comes next), and the
        last is as it stops (what the worker's stop made its machines print)."""
        loop = asyncio.get_running_loop()
        next_sweep = loop.time() + self.interval
        try:
            await asyncio.to_thread(self.stamp_all, machines_dir)
            while True:
                await asyncio.sleep(self.stamp_interval)
                if loop.time() >= next_sweep:
                    next_sweep = loop.time() + self.interval
                    await asyncio.to_thread(self.sweep, machines_dir)
                else:
                    await asyncio.to_thread(self.stamp_all, machines_dir)
        finally:
            date_logs(machines_dir)  # not stamp_all: its thread may still be running
