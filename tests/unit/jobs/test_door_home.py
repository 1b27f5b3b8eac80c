"""Where a submit at a jobs door belongs: the view's home for the name, else rendezvous."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from bodega.jobs.homes import job_key, rendezvous
from bodega.worker.jobs.door import LIVE_FRESH, JobDoor, door_home


def test_the_first_live_worker_in_rendezvous_order_is_the_home() -> None:
    live = ["w1", "w2", "w3"]
    for name in (f"job-{i}" for i in range(20)):
        key = job_key("app", name)
        assert door_home("w1", key, None, live) == rendezvous(key, live)[0]


def test_a_home_the_view_names_wins_over_the_order() -> None:
    key = job_key("app", "nightly")
    first = rendezvous(key, ["w1", "w2"])[0]
    other = "w2" if first == "w1" else "w1"
    assert door_home(first, key, other, ["w1", "w2"]) == other


def test_a_worker_counts_itself_before_its_view_shows_it_live() -> None:
    names = [f"job-{i}" for i in range(50)]
    mine = [n for n in names if rendezvous(job_key("a", n), ["w1", "w2"])[0] == "w2"]
    assert mine  # some of these names hash to w2 first
    assert all(door_home("w2", job_key("a", n), None, ["w1"]) == "w2" for n in mine)


class CountedView:
    def __init__(self, live: list[str]) -> None:
        self.live = live
        self.reads = 0

    def home_named(self, app: str, name: str) -> str | None:
        return None

    def live_workers(self) -> Iterable[str]:
        self.reads += 1
        return list(self.live)


def test_a_door_reads_the_live_workers_again_once_what_it_read_is_stale() -> None:
    view, now = CountedView(["w1", "w2"]), [100.0]
    unused: Any = None  # the home and the passes: not asked here
    door = JobDoor(unused, unused, view, ticks=lambda: now[0])
    assert door.live_workers() == ["w1", "w2"]
    view.live = ["w1", "w2", "w3"]
    now[0] += LIVE_FRESH / 2
    assert door.live_workers() == ["w1", "w2"]  # a burst of submits reads them once
    assert view.reads == 1
    now[0] += LIVE_FRESH / 2
    assert door.live_workers() == ["w1", "w2", "w3"]  # a newcomer is seen this late at most
    assert view.reads == 2
