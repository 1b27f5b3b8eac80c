"""When each line of a machine's log was written: checkpoints kept beside the log.

A machine writes its log itself (``O_APPEND``, see ``logfiles.py``), with
nothing in between that could stamp its lines, so the worker's log keeper
looks at every log every ``STAMP_INTERVAL`` seconds and, when one grew,
appends a checkpoint to ``machine.log.times``: the size the log reached and
the log's modification time. A line that ends at byte *e* was written after
the checkpoint before *e* and no later than the first checkpoint at or past
*e*, so it is stamped with that checkpoint's time: within one interval of
the truth while the worker runs. A machine's start, and the keeper as the
worker starts and stops, append one too (``logfiles.close_off``): a run's
lines are never dated by the next run's. Lines written while the worker was
down carry the modification time its first look afterwards saw, an upper
bound; lines newer than the last checkpoint carry the log's own modification
time.

A checkpoint is 16 bytes (offset, time); a torn last one (a crash mid-write)
is ignored. The checkpoints move with their log when it is rotated.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Sequence
from pathlib import Path

STAMP_INTERVAL = 0.25
RECORD = struct.Struct("<qd")  # the log's size, the log's mtime (epoch seconds)
Checkpoint = tuple[int, float]


def times_path(log: Path) -> Path:
    """The checkpoints of ``log`` (``machine.log`` -> ``machine.log.times``)."""
    return log.with_name(log.name + ".times")


def append_checkpoint(path: Path, offset: int, at: float) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
    try:
        os.write(fd, RECORD.pack(offset, at))
    finally:
        os.close(fd)


def read_checkpoints(path: Path) -> list[Checkpoint]:
    """Every whole checkpoint in ``path``, oldest first; none if it does not exist."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    whole = len(data) - len(data) % RECORD.size
    return [(int(offset), float(at)) for offset, at in RECORD.iter_unpack(data[:whole])]


def last_offset(path: Path) -> int:
    """The size the log had at its last checkpoint (0 if it has none)."""
    try:
        with path.open("rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            whole = size - size % RECORD.size
            if whole == 0:
                return 0
            handle.seek(whole - RECORD.size)
            offset, _ = RECORD.unpack(handle.read(RECORD.size))
            return int(offset)
    except FileNotFoundError:
        return 0


def stamp(line_ends: Sequence[int], checkpoints: Sequence[Checkpoint],
          newest: float) -> list[float]:
    """The time each line was written, from the byte offset where it ends: the time of the
    first checkpoint at or past that offset, else ``newest`` (the log's own mtime)."""
    offsets = [offset for offset, _ in checkpoints]
    out = []
    for end in line_ends:
        at = bisect.bisect_left(offsets, end)
        out.append(checkpoints[at][1] if at < len(checkpoints) else newest)
    return out
