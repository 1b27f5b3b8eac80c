"""What every pool in bench/jobs/queues.py shares: the job's command, its marks, CPU accounting.

Every job of every pool runs the same command, one ``bash`` process (its builtins only,
plus ``sleep`` when the job is to last): it writes ``s.<task>`` in its batch's directory
as it starts and ``d.<task>`` as it ends. The time written in each mark is when the
program reached it (bash's ``$EPOCHREALTIME``), so dispatch and queueing delays are read
from the files, the same way for bodega and for the Redis pools, and a job "ran" exactly
when its ``d`` mark exists.

Each pool runs in a cpuacct cgroup of its own (cgroup v1; a separate hierarchy from the
``cpu`` one bodega moves machines into, so a machine's program stays counted with the
worker that started it): its CPU seconds are everything the pool's processes and the jobs'
programs used.
"""

from __future__ import annotations

import contextlib
import math
import os
import shlex
import signal
from collections.abc import Iterable
from pathlib import Path

CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def command(batch_dir: Path, seconds: float) -> list[str]:
    """The job: mark its start, optionally sleep, mark its end (``BODEGA_TASK`` names it;
    each run's marks are its own, ``.$$``: a run again is another user's machine on bodega).

    bash, for ``$EPOCHREALTIME``: a file's mtime has the kernel's coarse clock (a tick,
    4 ms here), too coarse for a dispatch of a millisecond; ``printf`` is a builtin."""
    where = shlex.quote(str(batch_dir))
    nap = f"sleep {seconds:g}; " if seconds > 0 else ""
    return ["bash", "-c", f'printf %s "$EPOCHREALTIME" > {where}/s.$BODEGA_TASK.$$; {nap}'
                          f'printf %s "$EPOCHREALTIME" > {where}/d.$BODEGA_TASK.$$']


def new_batch(root: Path, name: str) -> Path:
    """A directory every machine's user can write its marks in."""
    path = root / name
    path.mkdir()
    path.chmod(0o777)
    return path


def marks(batch_dir: Path, kind: str) -> dict[int, float]:
    """Task index -> when (epoch seconds) its latest ``kind`` (``s`` or ``d``) mark was
    made; a mark being written (empty yet) is left out."""
    found: dict[int, float] = {}
    with os.scandir(batch_dir) as entries:
        for entry in entries:
            if entry.name.startswith(kind + "."):
                with contextlib.suppress(FileNotFoundError, ValueError):
                    task, at = int(entry.name.split(".")[1]), float(Path(entry.path).read_text())
                    found[task] = max(at, found.get(task, at))
    return found


def done_count(batch_dir: Path) -> int:
    """How many tasks ran to their end (at least once)."""
    return len({name.split(".")[1] for name in os.listdir(batch_dir) if name.startswith("d.")})


def quantile(values: list[float], q: float) -> float:
    """The nearest-rank quantile (p99 of 100 values is the 99th smallest)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class CpuAccount:
    """A cpuacct cgroup a pool's processes are started in; None-safe when there is none."""

    def __init__(self, name: str) -> None:
        self.path: Path | None = CPUACCT / name if (CPUACCT / "cpuacct.usage").exists() \
            and os.geteuid() == 0 else None
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started inside the cgroup (it joins before it execs: nothing escapes)."""
        if self.path is None:
            return argv
        procs = shlex.quote(str(self.path / "cgroup.procs"))
        return ["sh", "-c", f'echo $$ > {procs} && exec "$@"', "sh", *argv]

    def seconds(self) -> float:
        if self.path is None:
            return math.nan
        return int((self.path / "cpuacct.usage").read_text()) / 1e9

    def remove(self) -> None:
        """Remove the cgroup once empty (a process left in it is killed first)."""
        if self.path is None:
            return
        for pid in (self.path / "cgroup.procs").read_text().split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.path.rmdir()


def programs_of(batch: str, tasks: Iterable[int]) -> list[int]:
    """The pids of running programs of ``batch`` whose ``BODEGA_TASK`` is in ``tasks``
    (the job's ``sh`` and its ``sleep``), found by their environment."""
    wanted = {f"BODEGA_TASK={t}".encode() for t in tasks}
    name = f"BODEGA_JOB_NAME={batch}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = set(Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if name in env and env & wanted:
            found.append(int(entry))
    return found
