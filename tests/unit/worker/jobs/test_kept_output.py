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
    assert not output.keep_file("job1", 0, ran, 5000.0)
    assert output.read("job1", 0) == b"done\n"
    assert not ran.exists()
    assert output.prune(1000.0 + 3601) == []  # its TTL runs from its keep, not its write
    assert not output.keep_file("job1", 1, tmp_path / "slot" / "out" / "8.log", 5000.0)  # never ran
    with pytest.raises(NotFound):
        output.read("job1", 1)


def test_output_kept_by_an_earlier_version_is_read(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    kept_before(logs, "earlier", 1000.0)
    assert KeptOutput(logs, ttl=3600.0).read("earlier", 0) == b"hello\n"


def test_no_output_kept_yet_is_nothing_to_drop(tmp_path: Path) -> None:
    assert prune(tmp_path / "never-made", 0.0, ttl=1.0) == []


def test_an_empty_output_is_a_line_its_file_left_for_the_slot_and_reads_as_nothing(
        tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    output = KeptOutput(logs, ttl=3600.0)
    ran = tmp_path / "slot" / "out" / "7.log"
    ran.parent.mkdir(parents=True)
    ran.write_bytes(b"")
    assert output.keep_file("quiet", 0, ran, 1000.0)
    assert ran.exists()  # the slot's, to use again
    assert output.read("quiet", 0) == b""
    assert sorted(p.name for p in logs.iterdir()) == [".empty"]  # no file of its own
    with pytest.raises(NotFound):
        output.read("quiet", 1)  # another task, kept nowhere
    with pytest.raises(NotFound):
        output.read("quie", 0)  # a job whose id is the start of another's


def test_the_last_attempts_output_is_the_one_read_empty_or_not(tmp_path: Path) -> None:
    output = KeptOutput(tmp_path / "logs", ttl=3600.0)
    out = tmp_path / "out.log"
    out.write_bytes(b"first\n")
    output.keep_file("job", 0, out, 1000.0)
    out.write_bytes(b"")
    assert output.keep_file("job", 0, out, 1001.0)  # the next attempt printed nothing
    assert output.read("job", 0) == b""
    out.write_bytes(b"third\n")
    output.keep_file("job", 0, out, 1002.0)
    assert output.read("job", 0) == b"third\n"


def test_empty_outputs_go_with_their_job_by_its_newest_and_the_rest_stay(
        tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    output = KeptOutput(logs, ttl=3600.0)
    out = tmp_path / "out.log"
    out.write_bytes(b"")
    output.keep_file("old", 0, out, 1000.0)
    output.keep_file("mixed", 0, out, 1000.0)
    printed = kept(logs, "mixed", 1000.0, task=1)
    output.keep_file("mixed", 2, out, 4000.0)  # its newest: the job stays with it
    output.keep_file("fresh", 0, out, 5000.0)
    assert output.prune(5000.0) == ["old"]
    with pytest.raises(NotFound):
        output.read("old", 0)
    assert output.read("mixed", 0) == b""
    assert printed.exists()
    assert output.prune(4000.0 + 3601) == ["mixed"]
    assert not printed.exists()
    with pytest.raises(NotFound):
        output.read("mixed", 2)
    output.keep_file("later", 0, out, 7000.0)  # kept after a prune rewrote the lines
    assert output.read("later", 0) == b""
    assert output.read("fresh", 0) == b""
    assert sorted(p.name for p in logs.iterdir()) == [".empty"]


def test_a_torn_line_of_empty_outputs_is_left_out(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / ".empty").write_text("a.0 1000.0\nb.0 10")  # the disk filled mid-line
    output = KeptOutput(logs, ttl=3600.0)
    assert output.read("a", 0) == b""
    with pytest.raises(NotFound):
        output.read("b", 0)
    out = tmp_path / "out.log"
    out.write_bytes(b"")
    output.keep_file("c", 0, out, 2000.0)  # on a line of its own, after the torn one
    assert output.read("c", 0) == b""
    assert output.prune(1000.0 + 3601) == ["a"]
    assert output.read("c", 0) == b""
