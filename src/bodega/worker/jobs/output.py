"""A task's output, kept on the worker that ran it after its machine (or its run in a slot)
is gone, so ``bodega jobs logs`` reads it long after: for the job TTL (``--job-ttl``) after
the last output of that job was kept here, as long as its home keeps the job.

One file per task, side by side (``<logs>/<job>.<task>.log``, its last attempt's on this
worker): a slot's output file is moved there when its run ends, a machine's log is copied
there before its teardown removes it. Each keep stamps its file with the time it was
kept; ``prune`` drops every file of a job whose newest was kept over a TTL ago. No
directory per job: a directory made for each of a stream of one-task jobs cost the worker
a new inode for every job, as much as the task's own output file.

A slot's run that printed nothing is kept as a line of ``<logs>/.empty``
(``<job>.<task> <when kept>``), not as a file: its own file stays in the slot, for a later
run there (``spare_outputs.py``), so that a stream of silent one-task jobs makes no file
at all. It reads back as nothing, and goes with its job's other output, by the newest.

A worker of an earlier version kept a directory per job (``<logs>/<job>/<task>.log``):
those are read and pruned the same way, by the directory's time.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path

from bodega.model.errors import NotFound

log = logging.getLogger("bodega.worker.jobs")

SUFFIX = ".log"
EMPTY = ".empty"  # the tasks whose output was empty, one line each: "<job>.<task> <kept at>"


def job_of(entry: str) -> str:
    """The job an entry of the logs directory is of: ``<job>.<task>.log``, or an earlier
    version's directory ``<job>``."""
    return entry.split(".", 1)[0]


def empty_outputs(text: str) -> list[tuple[str, str, float]]:
    """``.empty``'s lines as (job, ``<job>.<task>``, when kept); a torn line (a full disk's,
    with no newline) is left out."""
    found = []
    for line in text.splitlines(keepends=True):
        if not line.endswith("\n"):
            continue
        name, _, at = line.partition(" ")
        with contextlib.suppress(ValueError):
            found.append((job_of(name), name, float(at)))
    return found


def prune(logs_dir: Path, now: float, ttl: float) -> list[str]:
    """Drop the kept output of jobs whose last output was kept here over ``ttl`` ago (each
    keep stamps its file, or its line in ``.empty``); the jobs dropped."""
    newest: dict[str, float] = {}
    entries: dict[str, list[os.DirEntry[str]]] = {}
    with contextlib.suppress(FileNotFoundError), os.scandir(logs_dir) as found:
        for entry in found:
            if entry.name.startswith("."):  # .empty, and the next one being written
                continue
            with contextlib.suppress(FileNotFoundError):
                job = job_of(entry.name)
                at = entry.stat(follow_symlinks=False).st_mtime
                newest[job] = max(at, newest.get(job, at))
                entries.setdefault(job, []).append(entry)
    try:
        empty = empty_outputs((logs_dir / EMPTY).read_text(errors="replace"))
    except FileNotFoundError:
        empty = []
    for job, _name, at in empty:
        newest[job] = max(at, newest.get(job, at))
    dropped = sorted(job for job, at in newest.items() if now - at > ttl)
    for job in dropped:
        for entry in entries.get(job, []):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
    gone = set(dropped)
    if any(job in gone for job, _name, _at in empty):
        kept = "".join(f"{name} {at}\n" for job, name, at in empty if job not in gone)
        fresh = logs_dir / (EMPTY + ".next")
        fresh.write_text(kept)
        os.replace(fresh, logs_dir / EMPTY)
    return dropped


class KeptOutput:
    def __init__(self, logs_dir: Path, ttl: float) -> None:
        self.logs_dir = logs_dir
        self.ttl = ttl
        self._empty: int | None = None  # .empty, open to append (a prune may replace it)

    def path(self, job_id: str, task: int) -> Path:
        """Where a task's output is kept once it ended (its last attempt's on this worker)."""
        return self.logs_dir / f"{job_id}.{task}{SUFFIX}"

    def keep_file(self, job_id: str, task: int, output: Path, now: float) -> bool:
        """A run's own output file (a slot's), moved into place; True when it was empty:
        kept as a line of ``.empty``, and the file left where it is, for its caller."""
        target = self.path(job_id, task)
        try:
            if os.stat(output).st_size == 0:
                self._keep_empty(job_id, task, target, now)
                return True
            self._move(output, target)
            os.utime(target)  # kept now: the job's TTL starts again
        except FileNotFoundError:
            pass  # it never ran
        except OSError as exc:
            log.warning("job %s task %d: its output was not kept: %s", job_id, task, exc)
        return False

    def _keep_empty(self, job_id: str, task: int, target: Path, now: float) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)  # an earlier attempt's, here: the last attempt's is the one
        line = f"{job_id}.{task} {now}\n".encode()
        if os.write(self._empty_fd(), line) < len(line):  # a full disk: a torn line
            self._close_empty()  # opened again, the next line starts on a line of its own

    def _empty_fd(self) -> int:
        if self._empty is None:
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.logs_dir / EMPTY, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                         0o600)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":  # torn: ended, unreadable
                    os.write(fd, b"#\n")
            except OSError:
                os.close(fd)
                raise
            self._empty = fd
        return self._empty

    def _close_empty(self) -> None:
        if self._empty is not None:
            os.close(self._empty)
            self._empty = None

    def _move(self, output: Path, target: Path) -> None:
        """``output`` renamed to ``target``, the logs directory made for the first one."""
        try:
            os.replace(output, target)
        except FileNotFoundError:
            if not output.exists():
                raise
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            os.replace(output, target)

    def keep_machine_log(self, job_id: str, task: int, logs: Path) -> None:
        """A task machine's log (its directory ``logs``), copied before its teardown."""
        target = self.path(job_id, task)
        try:
            self.logs_dir.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as out:
                for part in ("machine.log.1", "machine.log"):
                    with contextlib.suppress(FileNotFoundError), (logs / part).open("rb") as f:
                        shutil.copyfileobj(f, out)
        except OSError as exc:
            log.warning("job %s task %d: its output was not kept: %s", job_id, task, exc)

    def read(self, job_id: str, task: int) -> bytes:
        for path in (self.path(job_id, task), self.logs_dir / job_id / f"{task}{SUFFIX}"):
            with contextlib.suppress(FileNotFoundError):
                return path.read_bytes()
        with contextlib.suppress(FileNotFoundError):
            name = f"{job_id}.{task}"
            if any(kept == name for _job, kept, _at in
                   empty_outputs((self.logs_dir / EMPTY).read_text(errors="replace"))):
                return b""
        raise NotFound(f"no output of job {job_id} task {task} on this worker")

    def prune(self, now: float) -> list[str]:
        dropped = prune(self.logs_dir, now, self.ttl)
        self._close_empty()  # a prune may have replaced .empty: the next keep opens it again
        if dropped:
            log.info("dropped the kept output of %d job(s) past the job TTL (%.0fs)",
                     len(dropped), self.ttl)
        return dropped
