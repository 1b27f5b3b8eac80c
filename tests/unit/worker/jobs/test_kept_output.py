"""A task's kept output outlives its machine for the job TTL, then goes: every task's file
of a job together, by the newest of them; a worker's earlier layout (a directory per job)
is read and pruned the same way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bodega.model.errors import NotFound
from bodega.worker.jobs.output import KeptOutput, prune


def kept(logs: Path, job: str, at: float, task: int = 0) -> Path:
    """A task's output kept at ``at`` by this version."""
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / f"{job}.{task}.log"
    path.write_text(f"{job} {task}\n")
    os.utime(path, (at, at))
    return path


def kept_before(logs: Path, job: str, at: float) -> Path:
    """A task's output kept at ``at`` by an earlier version: a directory per job."""
    path = logs / job / "0.log"
    path.parent.mkdir(parents=True)
    path.write_text("hello\n")
    os.utime(path.parent, (at, at))
    return path


def test_output_older_than_the_ttl_goes_and_the_rest_stays(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    old, fresh = kept(logs, "old", 1000.0), kept(logs, "fresh", 5000.0)
    earlier = kept_before(logs, "earlier", 1000.0)
    assert prune(logs, 5000.0 + 100, ttl=3600.0) == ["earlier", "old"]
    assert not old.exists()
    assert not earlier.parent.exists()
    assert fresh.read_text() == "fresh 0\n"


def test_a_job_goes_by_its_newest_output_every_task_together(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    first, last = kept(logs, "big", 1000.0, task=0), kept(logs, "big", 4000.0, task=1)
    assert prune(logs, 5000.0, ttl=3600.0) == []  # its last task's output is recent
    assert first.exists()
    assert last.exists()
    assert prune(logs, 4000.0 + 3601, ttl=3600.0) == ["big"]
    assert not first.exists()
    assert not last.exists()


def test_a_slots_output_is_moved_into_place_and_read_back(tmp_path: Path) -> None:
    output = KeptOutput(tmp_path / "logs", ttl=3600.0)
    ran = tmp_path / "slot" / "out" / "7.log"
    ran.parent.mkdir(parents=True)
    ran.write_bytes(b"done\n")
    os.utime(ran, (1000.0, 1000.0))  # it printed long ago, and ended now
    output.keep_file("job1", 0, ran)
    assert output.read("job1", 0) == b"done\n"
    assert not ran.exists()
    assert output.prune(1000.0 + 3601) == []  # its TTL runs from its keep, not its write
    output.keep_file("job1", 1, tmp_path / "slot" / "out" / "8.log")  # it never ran
    with pytest.raises(NotFound):
        output.read("job1", 1)


def test_output_kept_by_an_earlier_version_is_read(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    kept_before(logs, "earlier", 1000.0)
    assert KeptOutput(logs, ttl=3600.0).read("earlier", 0) == b"hello\n"


def test_no_output_kept_yet_is_nothing_to_drop(tmp_path: Path) -> None:
    assert prune(tmp_path / "never-made", 0.0, ttl=1.0) == []
