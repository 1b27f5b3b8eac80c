"""Where a snapshot's copies go, which holder a restore fetches from, which volumes are due
a scheduled snapshot (``worker/core/snapshot_places.py``)."""

from __future__ import annotations

from bodega.worker.core.snapshot_places import (
    Choice,
    Place,
    Scheduled,
    copy_targets,
    due,
    fetch_order,
)

OWN = Place("ams-1", "https://10.0.0.1:7000", "ams")


def names(choices: list[Choice]) -> list[str]:
    return [c.name for c in choices]


def test_a_copy_goes_to_another_host_before_another_worker_of_this_one() -> None:
    places = [OWN, Place("ams-1b", "https://10.0.0.1:7001", "ams"),
              Place("ams-2", "https://10.0.0.2:7000", "ams")]
    (choice,) = copy_targets(OWN, places)
    assert choice.name == "ams-2"
    assert choice.why == "another host, same region"


def test_the_same_region_comes_before_another_and_a_dead_worker_is_never_chosen() -> None:
    places = [Place("syd-1", "https://10.0.1.1:7000", "syd"),
              Place("ams-3", "https://10.0.0.3:7000", "ams", alive=False),
              Place("ams-2", "https://10.0.0.2:7000", "ams")]
    assert names(copy_targets(OWN, places, want=3)) == ["ams-2", "syd-1"]
    assert copy_targets(OWN, places[:1])[0].why == "another host, region syd"


def test_a_cordoned_worker_gets_a_copy_only_when_no_other_can() -> None:
    draining = Place("ams-2", "https://10.0.0.2:7000", "ams", cordoned=True)
    places = [draining, Place("syd-1", "https://10.0.1.1:7000", "syd")]
    assert names(copy_targets(OWN, places, want=2)) == ["syd-1", "ams-2"]
    (choice,) = copy_targets(OWN, [draining])
    assert choice.why == "another host, same region, cordoned"


def test_a_one_host_cluster_copies_to_another_worker_of_the_host() -> None:
    places = [OWN, Place("ams-1b", "https://10.0.0.1:7001", "ams")]
    (choice,) = copy_targets(OWN, places)
    assert (choice.name, choice.why) == ("ams-1b", "another worker of this host, same region")


def test_holders_count_toward_the_copies_wanted() -> None:
    places = [Place("ams-2", "https://10.0.0.2:7000", "ams"),
              Place("ams-3", "https://10.0.0.3:7000", "ams")]
    assert copy_targets(OWN, places, held=["ams-2"]) == []
    assert names(copy_targets(OWN, places, held=["ams-2"], want=2)) == ["ams-3"]
    assert copy_targets(OWN, places, want=0) == []


def test_a_restore_fetches_from_the_nearest_alive_holder_and_an_unknown_one_last() -> None:
    places = [Place("syd-1", "https://10.0.1.1:7000", "syd"),
              Place("ams-2", "https://10.0.0.2:7000", "ams"),
              Place("ams-1b", "https://10.0.0.1:7001", "ams"),
              Place("ams-9", "https://10.0.0.9:7000", "ams", alive=False)]
    order = fetch_order(["syd-1", "ghost", "ams-9", "ams-2", "ams-1b", "ams-1"], places, OWN)
    assert order == ["ams-1b", "ams-2", "syd-1", "ghost"]


def test_a_volume_is_due_a_scheduled_snapshot_once_an_interval_has_passed() -> None:
    volumes = [Scheduled("vol_new", enabled=True, since=100.0),
               Scheduled("vol_old", enabled=True, since=0.0),
               Scheduled("vol_off", enabled=False, since=0.0)]
    assert due(volumes, interval=60.0, now=159.0) == ["vol_old"]
    assert due(volumes, interval=60.0, now=160.0) == ["vol_new", "vol_old"]
