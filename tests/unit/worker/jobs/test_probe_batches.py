"""A home's probes reach each runner in one call a look (``ProbeBatch``), with the drops of
jobs that need them no more; a job its home starts itself has its probes forgotten there
and then, its own runner's in the same commit.

The home and the runner run on real jobs databases; the other workers are fake clients
that record what they are sent (or refuse it as a runner of the version before would).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bodega.jobs.binding import WorkerRoom
from bodega.model.capacity import Ask
from bodega.model.errors import NotFound, Unavailable
from bodega.wire.internal.jobs.calls import HomeSubmit, ProbeBatch, ProbeBody, Probed, ProbesHeld
from bodega.wire.public.jobs.api import Ok, SubmitBody
from bodega.worker.jobs.home import JobHome
from bodega.worker.jobs.peers import JobPeers
from bodega.worker.jobs.run_store import RunStore
from bodega.worker.jobs.store import JobStore
from bodega.worker.jobs.upkeep import SINGLES_FOR, JobUpkeep, UpkeepConfig
from bodega.worker.jobs.waits import JobWaits

NOW = 1000.0
ASK = Ask(cpus=1, memory_mb=256)


class Runner:
    """Another worker as a home's upkeep calls it; ``batches``: False for one of the version
    before them (404, as its router answers a route it lacks)."""

    def __init__(self, batches: bool = True, down: bool = False) -> None:
        self.batches, self.down = batches, down
        self.calls: list[Any] = []

    async def probe_batch(self, body: ProbeBatch) -> ProbesHeld:
        if self.down:
            raise Unavailable("connection refused", status="unreachable")
        if not self.batches:
            raise NotFound("not found: no route /v1/job-probe-batches")
        self.calls.append(body)
        return ProbesHeld(dropped=len(body.drops),
                          probed=[Probed(job=p.job, queued=p.count) for p in body.probes])

    async def probe(self, body: ProbeBody) -> Probed:
        self.calls.append(("probe", body.job, body.count))
        return Probed(job=body.job, queued=body.count)

    async def drop_probes(self, job_id: str) -> Ok:
        self.calls.append(("drop", job_id))
        return Ok(ok=True)


def room(name: str) -> WorkerRoom:
    return WorkerRoom(name=name, alive=True, cordoned=False, free_millicpus=4000,
                      free_memory_mb=4096)


def upkeep_of(tmp_path: Path, runners: dict[str, Runner],
              clock: list[float]) -> tuple[JobUpkeep, JobHome, JobStore]:
    store = JobStore(tmp_path / "jobs.db", clock=lambda: clock[0])
    home = JobHome(store, "w1", 1000)
    peers = JobPeers("w1", None, lambda _w: None, lambda _w: True,
                     lambda: [room(w) for w in runners])
    peers.client = lambda worker: runners[worker]  # type: ignore[assignment,return-value]
    upkeep = JobUpkeep(home, peers, UpkeepConfig(), JobWaits(home, lambda _a, _n: None),
                       random.Random(1))
    return upkeep, home, store


def submit(home: JobHome, name: str) -> str:
    return home.submit(HomeSubmit(spec=SubmitBody.model_validate(
        {"name": name, "command": "true"}).spec("app", NOW))).id


async def delivered(upkeep: JobUpkeep) -> None:
    upkeep.deliver_probes()
    while upkeep._tasks:
        await asyncio.gather(*upkeep._tasks)


def out(store: JobStore, job_id: str) -> dict[str, tuple[int, int]]:
    return {worker: (count, sent) for _, worker, count, sent in store.probes_out(job_id)}


async def test_a_look_sends_each_runner_its_probes_and_drops_in_one_call(
        tmp_path: Path) -> None:
    runners = {"w2": Runner(), "w3": Runner()}
    upkeep, home, store = upkeep_of(tmp_path, runners, [NOW])
    jobs = [submit(home, f"j{n}") for n in range(3)]
    with store.tx(synced=False) as conn:
        for job_id in jobs:
            store.add_probes(conn, job_id, {"w2": 1, "w3": 1}, NOW)
    upkeep.send_drops("gone-job", ["w2"])
    assert upkeep.wake.is_set()  # the drop goes with the next look

    await delivered(upkeep)

    (to_w2,) = runners["w2"].calls
    assert (to_w2.home, to_w2.drops, [(p.job, p.count) for p in to_w2.probes]) == \
        ("w1", ["gone-job"], [(job_id, 1) for job_id in jobs])
    (to_w3,) = runners["w3"].calls
    assert (to_w3.drops, len(to_w3.probes)) == ([], 3)
    assert all(out(store, job_id) == {"w2": (1, 1), "w3": (1, 1)} for job_id in jobs)
    await delivered(upkeep)  # nothing new: no call
    assert (len(runners["w2"].calls), len(runners["w3"].calls)) == (1, 1)


async def test_a_runner_of_the_version_before_batches_is_sent_one_call_each_for_a_while(
        tmp_path: Path) -> None:
    clock = [NOW]
    runners = {"w2": Runner(batches=False)}
    upkeep, home, store = upkeep_of(tmp_path, runners, clock)
    job_id = submit(home, "j")
    with store.tx(synced=False) as conn:
        store.add_probes(conn, job_id, {"w2": 2}, NOW)
    upkeep.send_drops("gone-job", ["w2"])
    await delivered(upkeep)
    assert runners["w2"].calls == [("drop", "gone-job"), ("probe", job_id, 2)]
    assert out(store, job_id) == {"w2": (2, 2)}

    runners["w2"].batches = True  # upgraded meanwhile: tried again once the while is over
    upkeep.send_drops(job_id, ["w2"])
    await delivered(upkeep)
    assert runners["w2"].calls[-1] == ("drop", job_id)
    clock[0] += SINGLES_FOR
    upkeep.send_drops(job_id, ["w2"])
    await delivered(upkeep)
    assert isinstance(runners["w2"].calls[-1], ProbeBatch)


async def test_probes_for_a_runner_that_cannot_be_reached_are_forgotten_to_go_elsewhere(
        tmp_path: Path) -> None:
    runners = {"w2": Runner(down=True), "w3": Runner()}
    upkeep, home, store = upkeep_of(tmp_path, runners, [NOW])
    job_id = submit(home, "j")
    with store.tx(synced=False) as conn:
        store.add_probes(conn, job_id, {"w2": 1, "w3": 1}, NOW)
    await delivered(upkeep)
    assert out(store, job_id) == {"w3": (1, 1)}


def test_a_job_its_home_starts_itself_has_its_probes_forgotten_and_dropped(
        tmp_path: Path) -> None:
    """Its own runner's probe goes in the seat's commit; the others' holders are told to
    drop theirs (``drops``), rather than each spending a take its home answers "drop"."""
    store = JobStore(tmp_path / "jobs.db", clock=lambda: NOW)
    home = JobHome(store, "w1", 1000)
    runs = RunStore(store)
    queued, other = submit(home, "queued"), submit(home, "other")
    with store.tx(synced=False) as conn:
        for job_id in (queued, other):
            store.add_probes(conn, job_id, {"w1": 1, "w2": 1}, NOW)
    for job_id in (queued, other):
        runs.add_probe(job_id, "w1", "app", ASK, 1, NOW)  # its own runner's
    started: list[object] = []
    home.seats = SimpleNamespace(  # type: ignore[assignment]  # one free slot, for the oldest
        may_seat=lambda job, full: True,
        seat=lambda conn, job, won, now, full: SimpleNamespace(machine_id="slot-1")
        if not started and job.id == queued else None,
        start=started.append)
    drops: list[tuple[str, list[str]]] = []
    home.drops = lambda job_id, workers: drops.append((job_id, workers))

    assert home.seat_queued() == 1

    assert drops == [(queued, ["w2"])]
    assert store.probes_out(queued) == []
    assert [p.job_id for p in runs.probes()] == [other]
    assert len(store.probes_out(other)) == 2


def test_a_batch_drops_first_then_holds_and_drops_only_its_home_s_probes(
        tmp_path: Path) -> None:
    runs = RunStore(JobStore(tmp_path / "jobs.db"))
    runs.add_probe("j1", "w1", "app", ASK, 1, NOW)
    runs.add_probe("j2", "w9", "app", ASK, 1, NOW)  # another home's
    dropped, held = runs.hold_probes("w1", ["j1", "j2", "j3"],
                                     [("j1", "app", ASK, 2), ("j4", "app", ASK, 1)], NOW)
    assert (dropped, held) == (1, [2, 1])  # j1 dropped, then probed again afresh
    assert sorted((p.job_id, p.home, p.count) for p in runs.probes()) == \
        [("j1", "w1", 2), ("j2", "w9", 1), ("j4", "w1", 1)]


def test_a_batch_carries_its_own_home_s_probes_only() -> None:
    probe = ProbeBody.of("j1", "w2", "app", ASK, 1)
    with pytest.raises(ValueError, match="a batch of w1's carries probes of w2"):
        ProbeBatch(home="w1", probes=[probe])
