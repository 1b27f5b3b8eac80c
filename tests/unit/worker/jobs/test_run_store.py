"""The runs a worker took, in its jobs database: one row per attempt, never one per task.

A task retried on the worker that ran its failed attempt is taken while that
attempt's row may still be there (its end on its way to the home): the new
attempt must be recorded and launched, and forgetting the old one must leave it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bodega.model.capacity import Ask
from bodega.model.machine_config import MachineConfig
from bodega.worker.jobs.run_store import PROBES_READ, ProbeRow, RunRow, RunStore
from bodega.worker.jobs.store import JobStore


def taken(attempt: int, index: int = 0) -> RunRow:
    return RunRow(job_id="j1", index=index, attempt=attempt, home="w1", app="app",
                  config=MachineConfig(image="bodega/process"), lease_seconds=30.0,
                  grace_seconds=5.0, machine_id=None, state="starting", stop=None,
                  exit_code=None, reason=None, updated_at=0.0)


def probe(store: RunStore) -> ProbeRow:
    store.add_probe("j1", "w1", "app", Ask(cpus=1, memory_mb=256), 1, 0.0)
    (found,) = store.probes()
    return found


def attempts(store: RunStore) -> list[tuple[int, str]]:
    return [(run.attempt, run.state) for run in store.runs()]


def test_a_retry_taken_while_its_last_attempt_is_reported_is_recorded(tmp_path: Path) -> None:
    store = RunStore(JobStore(tmp_path / "jobs.db"))
    store.took(probe(store), [taken(1)], False, 1.0)
    (first,) = store.runs()
    store.update(first, 2.0, state="ended", exit_code=1, reason="exit code 1")
    store.took(probe(store), [taken(2)], False, 3.0)  # before attempt 1's end was forgotten
    assert attempts(store) == [(1, "ended"), (2, "starting")]
    store.forget_all([first])
    assert attempts(store) == [(2, "starting")]


def test_a_task_given_back_and_taken_again_is_a_new_run(tmp_path: Path) -> None:
    # A task given back undoes its attempt: taken again, it has the same attempt number.
    store = RunStore(JobStore(tmp_path / "jobs.db"))
    store.took(probe(store), [taken(1)], False, 1.0)
    (first,) = store.runs()
    store.update(first, 2.0, state="ended", exit_code=None, reason="given back")
    store.took(probe(store), [taken(1)], False, 3.0)
    assert attempts(store) == [(1, "ended"), (1, "starting")]
    store.forget_all([first])
    assert attempts(store) == [(1, "starting")]


def test_a_take_answered_again_records_its_run_once(tmp_path: Path) -> None:
    store = RunStore(JobStore(tmp_path / "jobs.db"))
    store.took(probe(store), [taken(1)], False, 1.0)
    store.took(probe(store), [taken(1)], False, 2.0)
    assert attempts(store) == [(1, "starting")]


def test_a_step_is_kept_without_an_fsync_and_a_synced_commit_fsyncs_the_wal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = JobStore(tmp_path / "jobs.db")
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert store.db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL: none per commit
    with store.tx(synced=False) as conn:
        conn.execute("INSERT INTO probes_in (job_id, home, app, ask, count, arrived_at) "
                     "VALUES ('j', 'h', 'a', '{}', 1, 1.0)")
    assert (synced, store.unsynced) == ([], True)
    with pytest.raises(RuntimeError), store.tx():
        raise RuntimeError("a cancel that fails")
    assert (synced, store.unsynced) == ([], True)  # rolled back: nothing to sync
    with store.tx() as conn:
        conn.execute("DELETE FROM probes_in")
    assert (synced, store.unsynced) == ([str(tmp_path / "jobs.db-wal")], False)


def test_the_probes_held_are_read_in_arrival_order_a_few_at_a_time(tmp_path: Path) -> None:
    store = RunStore(JobStore(tmp_path / "jobs.db"))
    for n in range(2 * PROBES_READ + 3):
        store.add_probe(f"j{n}", "w1", "app", Ask(cpus=1, memory_mb=256), 1, float(n))
    looked = store.probes()
    assert next(looked).job_id == "j0"  # the first, without the rest read
    store.drop_probe(f"j{PROBES_READ + 1}")  # dropped while the queue is looked at
    assert [p.job_id for p in looked] == [f"j{n}" for n in range(1, 2 * PROBES_READ + 3)
                                          if n != PROBES_READ + 1]
