"""A task's kept output outlives its machine for the job TTL, then goes."""

from __future__ import annotations

import os
from pathlib import Path

from bodega.worker.jobs.output import prune


def kept(logs: Path, job: str, at: float) -> Path:
    path = logs / job / "0.log"
    path.parent.mkdir(parents=True)
    path.write_text("hello\n")
    os.utime(path.parent, (at, at))
    return path


def test_output_older_than_the_ttl_goes_and_the_rest_stays(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    old, fresh = kept(logs, "old", 1000.0), kept(logs, "fresh", 5000.0)
    assert prune(logs, 5000.0 + 100, ttl=3600.0) == ["old"]
    assert not old.exists()
    assert fresh.read_text() == "hello\n"


def test_no_output_kept_yet_is_nothing_to_drop(tmp_path: Path) -> None:
    assert prune(tmp_path / "never-made", 0.0, ttl=1.0) == []
