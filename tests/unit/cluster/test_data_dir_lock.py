"""A run that did not start takes back what it wrote in its data dir, and no more."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Any

import pytest

from bodega.cluster.data_dir_lock import DataDirLock
from bodega.runtime.pid_lock import Held, PidLock


def tree(where: Path) -> list[str]:
    return sorted(str(p.relative_to(where)) for p in where.rglob("*"))


def written(data_dir: Path) -> None:
    """What a run writes before it starts anything: files, and a directory of them."""
    (data_dir / "cluster-id").write_text("abcde\n")
    (data_dir / "tls").mkdir()
    (data_dir / "tls" / "ca.pem").write_text("ca\n")


def test_a_refused_run_removes_the_data_dir_and_the_parents_it_made(tmp_path: Path) -> None:
    data_dir = tmp_path / "a" / "b" / ".bodega"
    with DataDirLock.take(data_dir, "up.lock", "bodega up is already running"):
        assert (data_dir / "up.lock").read_text() == f"{os.getpid()}\n"
        written(data_dir)
    assert tree(tmp_path) == []


def test_a_refused_run_keeps_what_the_data_dir_held_and_removes_what_it_added(
        tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "broker.log").write_text("old\n")
    (tmp_path / "up.lock").write_text("1\n")  # a stopped run's
    before = tree(tmp_path)
    with DataDirLock.take(tmp_path, "up.lock", "bodega up is already running"):
        written(tmp_path)
        (tmp_path / "logs" / "new.log").write_text("new\n")  # under an old entry: stays
    assert tree(tmp_path) == sorted([*before, "logs/new.log"])
    with DataDirLock.take(tmp_path, "join.lock", "bodega join is already running"):
        pass
    assert not (tmp_path / "join.lock").exists()  # a lock file it made goes too


def test_a_started_run_keeps_all_it_wrote_however_it_ends(tmp_path: Path) -> None:
    data_dir = tmp_path / ".bodega"

    def run() -> None:
        with DataDirLock.take(data_dir, "up.lock", "x") as lock:
            written(data_dir)
            lock.started()
            raise RuntimeError("a component failed to start")

    with pytest.raises(RuntimeError):
        run()
    assert tree(data_dir) == ["cluster-id", "tls", "tls/ca.pem", "up.lock"]


def test_a_run_refused_for_a_held_lock_changes_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / ".bodega"
    with DataDirLock.take(data_dir, "up.lock", "bodega up is already running") as holder:
        holder.started()
        written(data_dir)
        with pytest.raises(Held, match=f"bodega up is already running \\(pid {os.getpid()}\\)"):
            DataDirLock.take(data_dir, "up.lock", "bodega up is already running")
        assert tree(data_dir) == ["cluster-id", "tls", "tls/ca.pem", "up.lock"]


def test_a_lock_file_removed_by_its_holder_meanwhile_is_locked_anew_at_its_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "up.lock"
    real = fcntl.flock
    removed: list[int] = []

    def flock_after_a_removal(fd: int, operation: Any) -> None:
        if not removed:  # the holder takes its file back between our open and our lock
            removed.append(fd)
            path.unlink()
        real(fd, operation)

    monkeypatch.setattr(fcntl, "flock", flock_after_a_removal)  # as pid_lock calls it
    lock = PidLock.take(path, "bodega up is already running")
    try:
        assert lock.fd is not None
        assert os.fstat(lock.fd).st_ino == os.stat(path).st_ino  # the file at the path
    finally:
        lock.release()
