"""A slot's output files used again: a run that printed nothing leaves its file to a later
run of the same slot, whose output then costs no new file.

Each run of a slot writes its output to ``out/<run>.log``, made by the slot's shell as the
run starts. A new file is the dearest part of a short task after its own program: on ext4
without a journal the kernel looks past every inode freed in the last minutes to find a
free one, and a busy host frees thousands. So the file of a run that printed nothing
(kept as an empty output: ``output.py``) stays in the slot. After
``SPARE_AFTER`` seconds it is renamed to the name of a run about to be written to the slot,
and the shell's ``>`` empties it in place.

A spare that is no longer empty by then was written by a process its task left behind: it
is kept as that task's output after all, and not used again. Such a process that writes
only later than that writes into a later run's output of the slot (a task of the same app
and shape). A slot holds ``SPARES_HELD`` spares at most; the oldest goes past that.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("bodega.worker.jobs")

SPARE_AFTER = 1.0  # seconds a spare waits: what its task left behind has that long to write
SPARES_HELD = 64  # spares a slot holds at most (about a second of 15 ms tasks)

KeptLate = Callable[[str, int, Path], None]  # job, task, its output written after its end


@dataclass(frozen=True)
class Spare:
    path: Path  # the run's own output file, still where the run wrote it
    job_id: str
    task: int
    at: float  # when its run ended


class SpareOutputs:
    """One slot's spares, the oldest first."""

    def __init__(self) -> None:
        self._spares: deque[Spare] = deque()

    def __len__(self) -> int:
        return len(self._spares)

    def left(self, spare: Spare, kept_late: KeptLate) -> None:
        """A run ended with nothing printed, its file left where it was."""
        if len(self._spares) >= SPARES_HELD:
            self._let_go(self._spares.popleft(), kept_late)
        self._spares.append(spare)

    def lend(self, path: Path, now: float, kept_late: KeptLate) -> bool:
        """Make the oldest spare that has waited ``SPARE_AFTER`` the file at ``path`` (the
        output of a run whose line is about to be written); False when there is none."""
        while self._spares and now - self._spares[0].at >= SPARE_AFTER:
            spare = self._spares.popleft()
            if not _still_empty(spare, kept_late):
                continue
            try:
                os.rename(spare.path, path)
                return True
            except FileNotFoundError:
                continue  # its slot's directory went, or was emptied
            except OSError as exc:
                log.warning("a slot's output file could not be used again: %s", exc)
        return False

    def _let_go(self, spare: Spare, kept_late: KeptLate) -> None:
        if _still_empty(spare, kept_late):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(spare.path)


def _still_empty(spare: Spare, kept_late: KeptLate) -> bool:
    """Whether the spare is still there and empty; one written since its run ended is kept
    as that task's output (``kept_late``), one gone with its slot's directory is neither."""
    try:
        written = os.stat(spare.path).st_size > 0
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("a slot's output file could not be used again: %s", exc)
        return False
    if written:
        kept_late(spare.job_id, spare.task, spare.path)
    return not written
