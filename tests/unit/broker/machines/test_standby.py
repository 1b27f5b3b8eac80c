"""Which standbys to start and which to stop again, decided from machine rows and
members' SWIM status alone (and since when each has been alive)."""

from __future__ import annotations

from typing import Any

from bodega.broker.machines.core.standby import (
    AliveSince,
    GiveBack,
    Takeover,
    standbys_to_start,
    standbys_to_stop,
)
from bodega.model.machine import Machine
from bodega.wire.public.platform import Member


def machine(mid: str, worker: str, state: str, standbys: list[str] | None = None,
            app: str = "ticker") -> Machine:
    config: dict[str, Any] = {"image": "x"}
    if standbys is not None:
        config["standbys"] = standbys
    return Machine.model_validate({"id": mid, "app": app, "worker": worker, "state": state,
                                   "config": config})


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


# -- giving the primary its place back ------------------------------------------------------

TAKEN_OVER = machine("s1", "ams-2", "started", ["p1"])


def settled(*workers: str) -> Any:
    return lambda name: name in workers


def test_a_standby_is_stopped_once_its_primary_runs_on_a_settled_live_worker() -> None:
    got = standbys_to_stop([PRIMARY, TAKEN_OVER], statuses(ams_1="alive", ams_2="alive"),
                           settled("ams-1"))
    assert got == [GiveBack(app="ticker", standby="s1", worker="ams-2", primaries=("p1",),
                            primary_workers=("ams-1",))]
    assert got[0].reason == "its primary p1 on worker ams-1 is running again"


def test_a_restarting_primary_counts_as_running() -> None:
    restarting = machine("p1", "ams-1", "restarting")
    assert [g.standby for g in standbys_to_stop(
        [restarting, TAKEN_OVER], statuses(ams_1="alive", ams_2="alive"),
        settled("ams-1"))] == ["s1"]


def test_a_primary_worker_alive_but_not_settled_keeps_the_standby() -> None:
    # Hysteresis: a worker just back (or flapping) does not win its place back yet.
    assert standbys_to_stop([PRIMARY, TAKEN_OVER], statuses(ams_1="alive", ams_2="alive"),
                            settled()) == []


def test_a_primary_worker_that_is_not_alive_keeps_the_standby() -> None:
    for status in ("suspect", "dead", "left", None):
        lookup = statuses(ams_2="alive", **({"ams_1": status} if status else {}))
        assert standbys_to_stop([PRIMARY, TAKEN_OVER], lookup, settled("ams-1")) == [], status


def test_a_primary_that_did_not_come_back_keeps_its_standby_running() -> None:
    # The host rebooted and the primary rests; or it was destroyed, or a deploy replaced
    # it and the view no longer has it: the standby is the only copy.
    lookup = statuses(ams_1="alive", ams_2="alive")
    for state in ("stopped", "created", "failed", "starting", "suspended", "destroying",
                  "destroyed", "updating"):
        primary = machine("p1", "ams-1", state)
        assert standbys_to_stop([primary, TAKEN_OVER], lookup, settled("ams-1")) == [], state
    assert standbys_to_stop([TAKEN_OVER], lookup, settled("ams-1")) == []


def test_a_standby_not_started_is_not_stopped() -> None:
    # Another broker stopped it already (stopping, stopped), or it is still starting:
    # the decision, taken again, asks nothing more.
    lookup = statuses(ams_1="alive", ams_2="alive")
    for state in ("stopped", "stopping", "starting", "created", "destroyed"):
        standby = machine("s1", "ams-2", state, ["p1"])
        assert standbys_to_stop([PRIMARY, standby], lookup, settled("ams-1")) == [], state


def test_a_standby_on_a_worker_that_is_not_alive_is_not_asked_to_stop() -> None:
    for status in ("suspect", "dead"):
        assert standbys_to_stop([PRIMARY, TAKEN_OVER], statuses(ams_1="alive", ams_2=status),
                                settled("ams-1", "ams-2")) == [], status


def test_a_primary_of_another_app_is_not_this_standbys_primary() -> None:
    stranger = machine("p1", "ams-1", "started", app="other")
    assert standbys_to_stop([stranger, TAKEN_OVER], statuses(ams_1="alive", ams_2="alive"),
                            settled("ams-1")) == []


def test_a_standby_of_two_primaries_stops_only_when_both_run_again() -> None:
    p2 = machine("p2", "ams-3", "started")
    both = machine("s1", "ams-2", "started", ["p1", "p2"])
    lookup = statuses(ams_1="alive", ams_2="alive", ams_3="dead")
    assert standbys_to_stop([PRIMARY, p2, both], lookup, settled("ams-1", "ams-3")) == []
    lookup = statuses(ams_1="alive", ams_2="alive", ams_3="alive")
    (got,) = standbys_to_stop([PRIMARY, p2, both], lookup, settled("ams-1", "ams-3"))
    assert got.primary_workers == ("ams-1", "ams-3")
    assert got.reason == "its primaries p1 on worker ams-1, p2 on worker ams-3 are running again"


def test_start_and_stop_never_both_apply_to_one_pair() -> None:
    # Whatever membership says, a standby is either to start, to stop, or left alone.
    for primary_status in ("alive", "suspect", "dead", "left", None):
        for state in ("stopped", "started"):
            standby = machine("s1", "ams-2", state, ["p1"])
            lookup = statuses(ams_2="alive",
                              **({"ams_1": primary_status} if primary_status else {}))
            starts = standbys_to_start([PRIMARY, standby], lookup)
            stops = standbys_to_stop([PRIMARY, standby], lookup, settled("ams-1"))
            assert not (starts and stops), (primary_status, state)


# -- hysteresis -------------------------------------------------------------------------------

def member(name: str, status: str, incarnation: int = 1, generation: int = 1) -> Member:
    return Member(name=name, status=status, incarnation=incarnation, generation=generation)


def test_a_member_settles_after_staying_alive_for_the_settle_time() -> None:
    alive = AliveSince(settle=10)
    alive.observe([member("ams-1", "alive")], now=100)
    assert not alive.settled("ams-1", 109.9)
    assert alive.settling(109.9)
    assert alive.until_settled(105) == 5
    alive.observe([member("ams-1", "alive")], now=110)
    assert alive.settled("ams-1", 110)
    assert not alive.settling(110)
    assert alive.until_settled(110) is None
    assert not alive.settled("ams-9", 1000)  # never seen


def test_a_suspect_or_dead_look_restarts_the_clock() -> None:
    for status in ("suspect", "dead", "left"):
        alive = AliveSince(settle=10)
        alive.observe([member("ams-1", "alive")], now=0)
        alive.observe([member("ams-1", status)], now=5)
        assert not alive.settled("ams-1", 5)
        alive.observe([member("ams-1", "alive", incarnation=2)], now=6)
        assert not alive.settled("ams-1", 15)
        assert alive.settled("ams-1", 16)


def test_a_blip_no_look_saw_restarts_the_clock_through_the_new_record() -> None:
    # Suspected and refuted (higher incarnation), or declared dead and rejoined (new
    # generation), between two looks that both saw it alive.
    for record in ({"incarnation": 2}, {"generation": 2}):
        alive = AliveSince(settle=10)
        alive.observe([member("ams-1", "alive")], now=0)
        alive.observe([member("ams-1", "alive", **record)], now=9)
        assert not alive.settled("ams-1", 12)
        assert alive.settled("ams-1", 19)


def test_a_flapping_worker_never_settles() -> None:
    alive = AliveSince(settle=10)
    for step in range(60):  # alive and suspect by turns, every 2 s, for two minutes
        status = "alive" if step % 2 == 0 else "suspect"
        alive.observe([member("ams-1", status, incarnation=step)], now=step * 2)
        assert not alive.settled("ams-1", step * 2 + 1), step
