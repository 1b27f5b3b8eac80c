"""A job over its tasks, where it lives, late binding's probes and assignment mode's choice."""

from __future__ import annotations

import random

import pytest

from bodega.jobs.assign import Offer, Room, choose, free_room, gigabytes
from bodega.jobs.binding import (
    WorkerRoom,
    by_room,
    interleave,
    probe_order,
    probes_for,
    spread,
    wanted,
)
from bodega.jobs.homes import rendezvous
from bodega.jobs.jobs import Finished, JobState, admit, counts, job_state, pick, to_drop
from bodega.jobs.tasks import Task, TaskState
from bodega.model.errors import TooManyRequests


def tasks(*states: TaskState) -> list[Task]:
    return [Task(index=i, state=s) for i, s in enumerate(states)]


@pytest.mark.parametrize(("states", "expected"), [
    ((TaskState.QUEUED, TaskState.SUCCEEDED), JobState.QUEUED),
    ((TaskState.QUEUED, TaskState.RUNNING), JobState.RUNNING),
    ((TaskState.SUCCEEDED, TaskState.SUCCEEDED), JobState.SUCCEEDED),
    ((TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED), JobState.FAILED),
    ((TaskState.SUCCEEDED, TaskState.CANCELLED), JobState.CANCELLED),
])
def test_a_jobs_state_is_read_from_its_tasks(states: tuple[TaskState, ...],
                                             expected: JobState) -> None:
    assert job_state(counts(tasks(*states))) is expected


def test_a_claim_gets_the_lowest_task_that_may_run_now() -> None:
    found = [Task(index=0, state=TaskState.RUNNING), Task(index=1, eligible_at=50.0),
             Task(index=2), Task(index=3)]
    assert [t.index for t in pick(found, 10.0, 2)] == [2, 3]
    assert [t.index for t in pick(found, 60.0, 1)] == [1]
    assert pick(found, 10.0, only=1) == []


def test_a_full_queue_refuses_with_a_time_to_come_back() -> None:
    admit(90, 10, 100)
    with pytest.raises(TooManyRequests) as refused:
        admit(95, 10, 100)
    assert refused.value.http_status == 429
    assert refused.value.retry_after is not None
    assert refused.value.retry_after >= 1


def test_finished_jobs_go_after_the_ttl_and_beyond_the_newest_kept_per_app() -> None:
    finished = [Finished("old", "a", 0.0), *(Finished(f"a{i}", "a", 100.0 + i) for i in range(5)),
                Finished("b0", "b", 100.0)]
    assert sorted(to_drop(finished, 200.0, ttl=150.0, keep=3)) == ["a0", "a1", "old"]


def test_a_home_is_the_same_for_every_broker_and_moves_only_for_jobs_of_a_gone_worker() -> None:
    workers = [f"w{i}" for i in range(8)]
    keys = [f"app/job-{i}" for i in range(400)]
    before = {k: rendezvous(k, workers)[0] for k in keys}
    assert before == {k: rendezvous(k, list(reversed(workers)))[0] for k in keys}
    after = {k: rendezvous(k, [w for w in workers if w != "w3"])[0] for k in keys}
    moved = {k for k in keys if before[k] != after[k]}
    assert moved == {k for k in keys if before[k] == "w3"}
    assert 20 < len(moved) < 90  # about an eighth


def test_probes_walk_the_ranking_again_when_there_are_more_than_workers() -> None:
    assert spread(["a", "b", "c"], 4) == {"a": 2, "b": 1, "c": 1}
    assert spread(["a", "b", "c", "d", "e"], 4) == {"a": 1, "b": 1, "c": 1, "d": 1}
    assert spread([], 4) == {}
    assert probes_for(10, 2.0) == 20
    assert probes_for(3, 1.1) == 4
    assert probes_for(0, 2.0) == 0


def test_probes_also_wait_on_workers_whose_room_is_held_now() -> None:
    # ams-2's room is held by another job's idle slots at the submit: it still gets probes,
    # after the ranked ones, so a job of 4 tasks does not run 2 by 2 on ams-1 alone.
    order = probe_order(["ams-1"], [("ams-1", True), ("ams-2", True), ("tiny", False)])
    assert order == ["ams-1", "ams-2"]
    assert spread(order, probes_for(4, 2.0)) == {"ams-1": 4, "ams-2": 4}
    # Nobody with room now: those that could hold a task; none could: every live one.
    assert probe_order([], [("a", False), ("b", True)]) == ["b"]
    assert probe_order([], [("a", False), ("b", False)]) == ["a", "b"]


def test_the_home_tops_probes_up_to_ratio_per_task_counting_those_out() -> None:
    assert wanted(claimable=3, outstanding=2, ratio=2.0) == 4
    assert wanted(claimable=1, outstanding=5, ratio=2.0) == 0


def test_regions_are_interleaved_best_first() -> None:
    assert interleave([["a1", "a2", "a3"], ["s1"]]) == ["a1", "s1", "a2", "a3"]


def test_the_home_ranks_live_workers_with_room_first() -> None:
    rooms = [WorkerRoom("full", True, False, 0, 0), WorkerRoom("roomy", True, False, 4000, 8000),
             WorkerRoom("some", True, False, 500, 512), WorkerRoom("dead", False, False, 9000, 9),
             WorkerRoom("cordoned", True, True, 9000, 9000)]
    assert by_room(rooms, 250, 256, random.Random(1)) == ["roomy", "some", "full"]
    assert by_room(rooms, 250, 256, random.Random(1), regions=("nowhere",)) == []


def test_assignment_fills_free_room_oldest_job_first() -> None:
    room = free_room(Room(cpus=4, memory_mb=4096), [(1, 1024)])
    offers = [Offer("02", "new", "a", 5, 1, 512, 0.0), Offer("01", "old", "a", 2, 2, 1024, 0.0)]
    assert [(o.name, n) for o, n in choose(offers, room)] == [("old", 1), ("new", 1)]
    assert choose(offers, Room(0.5, 4096)) == []


def test_sizes_read_as_the_article_writes_them() -> None:
    assert gigabytes("4t") == 4096
    assert gigabytes("512g") == 512
    assert gigabytes(256) == 256
    with pytest.raises(ValueError, match="suffix"):
        gigabytes("lots")
