"""A task's output, kept on the worker that ran it after its machine (or its run in a slot)
is gone, so ``bodega jobs logs`` reads it long after: for the job TTL (``--job-ttl``) after
the last output of that job was kept here, as long as its home keeps the job.

One file per task (``<logs>/<job>/<task>.log``, its last attempt's on this worker): a
slot's output file is moved there when its run ends, a machine's log is copied there
before its teardown removes it. Touching the job's directory at each keep restarts its
TTL; ``prune`` drops the jobs whose directory has not been touched for a TTL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

from bodega.model.errors import NotFound

log = logging.getLogger("bodega.worker.jobs")


def prune(logs_dir: Path, now: float, ttl: float) -> list[str]:
    """Drop the kept output of jobs whose last output was kept here over ``ttl`` ago (a
    job's directory is touched each time); the jobs dropped."""
    dropped = []
    with contextlib.suppress(FileNotFoundError):
        for kept in logs_dir.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if now - kept.stat().st_mtime > ttl:
                    shutil.rmtree(kept, ignore_errors=True)
                    dropped.append(kept.name)
    return sorted(dropped)


class KeptOutput:
    def __init__(self, logs_dir: Path, ttl: float) -> None:
        self.logs_dir = logs_dir
        self.ttl = ttl

    def path(self, job_id: str, task: int) -> Path:
        """Where a task's output is kept once it ended (its last attempt's on this worker)."""
        return self.logs_dir / job_id / f"{task}.log"

    def keep_file(self, job_id: str, task: int, output: Path) -> None:
        """A run's own output file (a slot's), moved into place."""
        target = self.path(job_id, task)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(output, target)
            os.utime(target.parent)  # the job's output was kept now: its TTL starts again
        except FileNotFoundError:
            pass  # it never ran
        except OSError as exc:
            log.warning("job %s task %d: its output was not kept: %s", job_id, task, exc)

    def keep_machine_log(self, job_id: str, task: int, logs: Path) -> None:
        """A task machine's log (its directory ``logs``), copied before its teardown."""
        target = self.path(job_id, task)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as out:
                for part in ("machine.log.1", "machine.log"):
                    with contextlib.suppress(FileNotFoundError), (logs / part).open("rb") as f:
                        shutil.copyfileobj(f, out)
            os.utime(target.parent)  # the job's output was kept now: its TTL starts again
        except OSError as exc:
            log.warning("job %s task %d: its output was not kept: %s", job_id, task, exc)

    def read(self, job_id: str, task: int) -> bytes:
        try:
            return self.path(job_id, task).read_bytes()
        except FileNotFoundError:
            raise NotFound(f"no output of job {job_id} task {task} on this worker") from None

    def prune(self, now: float) -> list[str]:
        dropped = prune(self.logs_dir, now, self.ttl)
        if dropped:
            log.info("dropped the kept output of %d job(s) past the job TTL (%.0fs)",
                     len(dropped), self.ttl)
        return dropped
