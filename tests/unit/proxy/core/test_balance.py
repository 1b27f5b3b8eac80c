"""fly-proxy's balancing, waking and sleeping rules, as pure functions."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

from bodega.model.machine import Machine
from bodega.proxy.core.balance import autostop_victim, choose, tiers, wake_candidate
from bodega.proxy.core.routes import Backend, RoutingTable

ALIVE = {"w1", "w2", "w3"}


def alive(worker: str) -> bool:
    return worker in ALIVE


def backend(mid: str, *, region: str = "ams", worker: str = "w1", state: str = "started",
            soft: int = 2, hard: int | None = 4, **kw: object) -> Backend:
    return Backend(machine_id=mid, app="web", region=region, worker=worker, state=state,
                   host="10.0.0.1", port=8080, soft_limit=soft, hard_limit=hard,
                   created_at=kw.pop("created_at", mid), **kw)  # type: ignore[arg-type]


def test_least_outstanding_under_the_soft_limit_wins() -> None:
    machines = [backend("a"), backend("b"), backend("c")]
    choice = choose(machines, {"a": 1, "b": 0, "c": 1}, "ams", alive, random.Random(1))
    assert choice.backend is not None
    assert choice.backend.machine_id == "b"
    assert not choice.over_soft


def test_ties_are_broken_at_random() -> None:
    machines = [backend("a"), backend("b")]
    picks = Counter(choose(machines, {}, "ams", alive, random.Random(s)).backend.machine_id  # type: ignore[union-attr]
                    for s in range(200))
    assert set(picks) == {"a", "b"}
    assert min(picks.values()) > 50


def test_over_soft_only_when_every_machine_is_and_never_at_hard() -> None:
    machines = [backend("a"), backend("b")]
    over = choose(machines, {"a": 2, "b": 3}, "ams", alive, random.Random(1))
    assert over.backend is not None
    assert over.backend.machine_id == "a"
    assert over.over_soft
    full = choose(machines, {"a": 4, "b": 4}, "ams", alive, random.Random(1))
    assert full.backend is None
    assert full.reason == "every machine is at its hard limit"


def test_other_regions_only_when_the_nearest_is_down_or_full() -> None:
    machines = [backend("near", soft=1), backend("far", region="syd")]
    busy = choose(machines, {"near": 2}, "ams", alive, random.Random(1))
    assert busy.backend is not None
    assert busy.backend.machine_id == "near"
    full = choose(machines, {"near": 4}, "ams", alive, random.Random(1))
    assert full.backend is not None
    assert full.backend.machine_id == "far"
    dead = choose([replace(machines[0], worker="gone"), machines[1]], {}, "ams", alive,
                  random.Random(1))
    assert dead.backend is not None
    assert dead.backend.machine_id == "far"


def test_the_own_regions_machine_wins_while_it_has_room_however_idle_the_others() -> None:
    machines = [backend("syd-1", region="syd"), backend("ams-1"), backend("lon-1", region="lon")]
    tiered = tiers(machines, "ams", alive)
    assert [b.machine_id for b in tiered.near] == ["ams-1"]
    assert [b.machine_id for b in tiered.far] == ["syd-1", "lon-1"]
    for load in ({}, {"ams-1": 1}, {"ams-1": 3}):  # idle, busy, past its soft limit
        picks = {choose(machines, load, "ams", alive, random.Random(seed)).backend.machine_id  # type: ignore[union-attr]
                 for seed in range(50)}
        assert picks == {"ams-1"}, load
    spilled = choose(machines, {"ams-1": 4, "syd-1": 1}, "ams", alive, random.Random(1))
    assert spilled.backend is not None
    assert spilled.backend.machine_id == "lon-1"  # at its hard limit: the least loaded other


def test_with_none_of_its_region_serving_every_region_is_near() -> None:
    machines = [backend("ams-1", state="stopped"), backend("ams-2", cordoned=True),
                backend("syd-1", region="syd"), backend("lon-1", region="lon")]
    tiered = tiers(machines, "ams", alive)
    assert [b.machine_id for b in tiered.near] == ["syd-1", "lon-1"]
    assert tiered.far == []
    # A machine tried (or passed over) for this request counts as not serving.
    tried = tiers([*machines[2:], backend("ams-3")], "ams", alive, frozenset({"ams-3"}))
    assert [b.machine_id for b in tried.near] == ["syd-1", "lon-1"]


def test_stopped_cordoned_tried_and_dead_machines_are_skipped() -> None:
    machines = [backend("stopped", state="stopped"), backend("cordoned", cordoned=True),
                backend("tried"), backend("dead", worker="gone")]
    choice = choose(machines, {}, "ams", alive, random.Random(1), frozenset({"tried"}))
    assert choice.backend is None
    assert choice.reason == "no started machine can serve"


def test_waking_prefers_the_nearest_region_then_the_oldest() -> None:
    machines = [backend("b", state="stopped", region="syd", created_at="1"),
                backend("c", state="stopped", created_at="3"),
                backend("a", state="stopped", created_at="2"),
                backend("off", state="stopped", autostart=False, created_at="0"),
                backend("lost", state="stopped", worker="gone", created_at="0")]
    woken = wake_candidate(machines, "ams", alive)
    assert woken is not None
    assert woken.machine_id == "a"
    assert wake_candidate(machines[3:], "ams", alive) is None


def test_autostop_stops_one_idle_machine_keeping_excess_and_minimum() -> None:
    three = [backend(m, autostop="stop") for m in ("a", "b", "c")]
    idle = {"a": 0.0, "b": 5.0, "c": 8.0}
    victim = autostop_victim(three, {}, idle, now=100.0, idle_for=30.0, keep=0)
    assert victim is not None
    assert victim.machine_id == "a"
    # Busy machines over their soft limit leave no excess: 3 - (2 + 1) = 0.
    assert autostop_victim(three, {"b": 2, "c": 2}, idle, 100.0, 30.0, 0) is None
    assert autostop_victim(three, {}, idle, now=20.0, idle_for=30.0, keep=0) is None  # not idle
    assert autostop_victim(three, {}, idle, 100.0, 30.0, keep=3) is None
    lone = [backend("solo", autostop="stop")]
    assert autostop_victim(lone, {"solo": 1}, {}, 100.0, 0.0, 0) is None  # load, not idle
    assert autostop_victim(lone, {}, {"solo": 0.0}, 100.0, 30.0, 0) == lone[0]
    assert autostop_victim([backend("x", autostop="off")], {}, {"x": 0.0}, 100, 1, 0) is None


def test_autostop_keeps_the_only_serving_machine_while_the_others_warm_up() -> None:
    # Two new machines are started but wait for their first check; the old one is idle.
    old = backend("a", autostop="stop")
    warming = [backend(m, autostop="stop", checks="waiting") for m in ("b", "c")]
    idle = {"a": 0.0, "b": 95.0, "c": 95.0}
    assert autostop_victim([old, *warming], {}, idle, 100.0, 30.0, keep=1) is None
    passed = replace(warming[0], checks="passing")  # one of them can serve now
    victim = autostop_victim([old, passed, warming[1]], {}, idle, 100.0, 30.0, keep=1)
    assert victim is not None
    assert victim.machine_id == "a"


def test_routes_follow_machine_docs() -> None:
    doc = {"id": "m1", "app": "web", "region": "ams", "worker": "w1", "state": "stopped",
           "service_host": "10.1.0.2", "created_at": "t",
           "config": {"image": "x", "env": {"PRIMARY_REGION": "syd"}, "standbys": ["m0"],
                      "services": [{
                          "protocol": "tcp", "internal_port": 8080, "autostop": True,
                          "autostart": False, "min_machines_running": 1,
                          "concurrency": {"soft_limit": 5, "hard_limit": 9},
                          "ports": [{"port": 80, "handlers": ["http"]}]}]}}
    table = RoutingTable()
    table.put_machine("m1", Machine.model_validate(doc))
    (b,) = table.backends("web")
    assert (b.address, b.autostop, b.autostart, b.soft_limit, b.hard_limit) == (
        ("10.1.0.2", 8080), "stop", False, 5, 9)
    assert (b.min_running, b.standbys, b.primary_region) == (1, ("m0",), "syd")
    table.mark_started("m1")
    # A late row still saying stopped does not undo the wake.
    table.put_machine("m1", Machine.model_validate(doc))
    assert table.backends("web")[0].state == "started"
    no_http = {**doc, "id": "m2", "config": {"image": "x", "services": [
        {"protocol": "tcp", "internal_port": 5432, "ports": [{"port": 5432}]}]}}
    table.put_machine("m2", Machine.model_validate(no_http))
    assert [b.machine_id for b in table.backends("web")] == ["m1"]
    table.put_machine("m1", Machine.model_validate({**doc, "state": "destroyed"}))
    assert table.backends("web") == []
    assert not table.known_app("web")


def test_a_suspended_machine_is_woken_before_an_older_stopped_one() -> None:
    machines = [backend("old", state="stopped", created_at="0"),
                backend("frozen", state="suspended", created_at="5"),
                backend("far", state="suspended", region="syd", created_at="0")]
    woken = wake_candidate(machines, "ams", alive)
    assert woken is not None
    assert woken.machine_id == "frozen"  # a resume is faster; the region still comes first
    assert wake_candidate(machines[::2], "ams", alive) == machines[0]
