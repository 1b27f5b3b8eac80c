"""Running a short command from an event loop without holding the loop while it forks.

uvloop (the loop every bodega process runs on) spawns a child with a plain ``fork``:
the kernel copies the parent's page tables, so the loop stops for as long as that
takes, about 5 ms for a worker of 90 MB on a busy two-core host and 25 ms for a process
of 400 MB, before the command even starts. The standard library's ``subprocess`` uses
``vfork`` (the child borrows the parent's memory until it execs), which costs a fraction
of a millisecond whatever the parent's size; run in a thread, the command's wait does
not hold the loop either. For commands the worker runs on a machine's start and stop
(``ip``, ``runc``): each would otherwise take milliseconds from every request the
worker is serving at that instant.
"""

from __future__ import annotations

import asyncio
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes


def _run(argv: tuple[str, ...], stdin: bytes | None, stdout: bool,
         timeout: float | None) -> Completed:
    done = subprocess.run(
        argv, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE if stdout else subprocess.DEVNULL, stderr=subprocess.PIPE,
        check=False, timeout=timeout)
    return Completed(done.returncode, done.stdout or b"", done.stderr)


async def run_command(*argv: str, stdin: bytes | None = None, stdout: bool = True,
                      timeout: float | None = None) -> Completed:
    """Run ``argv`` to its end: its exit code, its output (none kept unless ``stdout``)
    and its error output. ``OSError`` if it cannot be started; ``subprocess.TimeoutExpired``
    (the command killed) if it runs longer than ``timeout`` seconds."""
    return await asyncio.to_thread(_run, argv, stdin, stdout, timeout)
