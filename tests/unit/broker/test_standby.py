"""Which standbys to start, decided from machine rows and members' SWIM status alone."""

from __future__ import annotations

from typing import Any

from bodega.broker.standby import Takeover, standbys_to_start


def machine(mid: str, worker: str, state: str, standbys: list[str] | None = None,
            app: str = "ticker") -> dict[str, Any]:
    config: dict[str, Any] = {"image": "x"}
    if standbys is not None:
        config["standbys"] = standbys
    return {"id": mid, "app": app, "worker": worker, "state": state, "config": config}


def statuses(**by_worker: str) -> Any:
    return lambda name: by_worker.get(name.replace("-", "_"))


PRIMARY = machine("p1", "ams-1", "started")
STANDBY = machine("s1", "ams-2", "stopped", ["p1"])


def test_a_dead_primary_worker_starts_its_standby_on_a_live_worker() -> None:
    got = standbys_to_start([PRIMARY, STANDBY], statuses(ams_1="dead", ams_2="alive"))
    assert got == [Takeover(app="ticker", standby="s1", worker="ams-2", primary="p1",
                            primary_worker="ams-1", status="dead")]
    assert got[0].reason == "worker ams-1 is dead"


def test_a_worker_that_left_counts_as_unavailable() -> None:
    created = machine("s1", "ams-2", "created", ["p1"])  # deploys create standbys unstarted
    got = standbys_to_start([PRIMARY, created], statuses(ams_1="left", ams_2="alive"))
    assert [t.standby for t in got] == ["s1"]


def test_alive_or_suspect_or_unknown_primary_workers_start_nothing() -> None:
    for status in ("alive", "suspect", None):
        lookup = statuses(ams_2="alive", **({"ams_1": status} if status else {}))
        assert standbys_to_start([PRIMARY, STANDBY], lookup) == [], status


def test_a_standby_on_a_worker_that_is_not_alive_is_not_started() -> None:
    for status in ("suspect", "dead"):
        assert standbys_to_start([PRIMARY, STANDBY],
                                 statuses(ams_1="dead", ams_2=status)) == []


def test_a_standby_already_started_means_the_takeover_happened() -> None:
    started = machine("s1", "ams-2", "started", ["p1"])
    other = machine("s2", "ams-3", "stopped", ["p1"])
    lookup = statuses(ams_1="dead", ams_2="alive", ams_3="alive")
    assert standbys_to_start([PRIMARY, started, other], lookup) == []


def test_one_standby_per_primary_the_first_by_id_on_a_live_worker() -> None:
    s1 = machine("s1", "ams-3", "stopped", ["p1"])  # on a dead worker too
    s2 = machine("s2", "ams-2", "stopped", ["p1"])
    s3 = machine("s3", "ams-4", "stopped", ["p1"])
    lookup = statuses(ams_1="dead", ams_2="alive", ams_3="dead", ams_4="alive")
    assert [t.standby for t in standbys_to_start([s3, PRIMARY, s2, s1], lookup)] == ["s2"]


def test_a_destroyed_or_missing_primary_needs_no_standby() -> None:
    lookup = statuses(ams_1="dead", ams_2="alive")
    assert standbys_to_start([STANDBY], lookup) == []
    gone = machine("p1", "ams-1", "destroyed")
    assert standbys_to_start([gone, STANDBY], lookup) == []


def test_a_standby_of_another_app_does_not_stand_in() -> None:
    stranger = machine("s1", "ams-2", "stopped", ["p1"], app="other")
    assert standbys_to_start([PRIMARY, stranger], statuses(ams_1="dead", ams_2="alive")) == []


def test_machines_without_standbys_and_destroyed_standbys_are_left_alone() -> None:
    plain = machine("m1", "ams-2", "stopped")
    dead_standby = machine("s1", "ams-2", "destroyed", ["p1"])
    assert standbys_to_start([PRIMARY, plain, dead_standby],
                             statuses(ams_1="dead", ams_2="alive")) == []
