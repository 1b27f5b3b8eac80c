"""A job read back from its home's database has the spec it was committed with: whether
its parsed spec is still held (``SPECS_HELD``) or read from its row again, in this
process or the next one."""

from __future__ import annotations

from pathlib import Path

import pytest

from bodega.wire.internal.jobs.calls import HomeSubmit
from bodega.wire.public.jobs.api import SubmitBody
from bodega.worker.jobs import store as job_store
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.store import JobStore


def test_every_job_reads_back_with_its_own_spec_held_or_not(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    monkeypatch.setattr(job_store, "SPECS_HELD", 3)  # most of them are read from rows again
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    specs = {}
    for i in range(8):
        spec = SubmitBody.model_validate({"name": f"job-{i}", "command": f"echo {i}",
                                          "env": {"I": str(i)}}).spec("app", 1000.0)
        specs[home.submit(HomeSubmit(spec=spec)).id] = spec
    for _ in range(2):  # the second time, the held ones are the last three read
        assert {job_id: store.job(job_id).spec for job_id in specs} == specs  # type: ignore[union-attr]
    assert {job.id: job.spec for job in store.jobs()} == specs
    assert len(store._specs) <= 3
    store.close()
    again = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)  # the worker started again
    assert {job.id: job.spec for job in again.jobs()} == specs


def test_a_job_removed_is_gone_with_its_spec(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: 1000.0)
    home = JobHome(store, "w1", 1000)
    job = home.submit(HomeSubmit(spec=SubmitBody.model_validate(
        {"name": "once", "command": "true"}).spec("app", 1000.0)))
    with store.tx() as conn:
        store.delete_job(conn, job.id)
    assert store.job(job.id) is None
    assert job.id not in store._specs
