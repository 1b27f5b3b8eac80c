"""Where a submit at a jobs door belongs: the view's home for the name, else rendezvous."""

from __future__ import annotations

from bodega.jobs.homes import job_key, rendezvous
from bodega.worker.jobs.door import door_home


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
