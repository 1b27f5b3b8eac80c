"""The machine screen reads the API's answers as the typed client reads them: the buttons a
state offers, the placement record."""

from __future__ import annotations

from bodega.broker.ui.core.machine_view import machine_detail, placement_view, where_it_goes
from bodega.model.machine import Machine
from bodega.wire.public.placement import PlacementRecord
from bodega.wire.public.platform import Placements


def test_the_buttons_follow_the_state() -> None:
    def actions(state: str) -> tuple[str, ...]:
        return machine_detail("a", Machine(id="m", state=state), "w").actions

    assert actions("started") == ("stop", "restart", "suspend")
    assert actions("stopped") == ("start",)
    assert actions("suspended") == ("start", "stop")
    assert actions("stopping") == ()  # an operation is under way: nothing to press


def test_a_machine_reads_its_events_and_config() -> None:
    detail = machine_detail("app", Machine.model_validate({
        "id": "m1", "name": "one", "state": "started", "config": {"image": "img", "env": {}},
        "events": [{"type": "start", "status": "started", "source": "flyd",
                    "timestamp": 1_700_000_000_000}],
        "checks": [{"name": "http", "status": "passing", "output": "ok"}]}), "ams-1")
    assert detail.image == "img"
    assert detail.events[0].at == "2023-11-14 22:13:20Z"
    assert detail.checks[0].status == "passing"
    assert '"image": "img"' in detail.config_json


def test_a_placement_record_reads_its_rankings_and_attempts() -> None:
    view = placement_view(PlacementRecord.model_validate({
        "policy": "utility", "asked": {"cpu_kind": "shared", "cpus": 1, "memory_mb": 256},
        "at": "t", "duration_ms": 1.5, "winner": {"worker": "ams-2", "score": 0.5},
        "regions": [{"region": "ams", "candidates": 3, "feasible": 2, "refused": {"cpu": 1},
                     "refusals": [{"worker": "ams-3", "reason": "cpu: needs"}],
                     "ranked": [{"worker": "ams-2", "score": 0.5,
                                 "subscores": {"cpu": 0.4}}]}],
        "attempts": [{"worker": "ams-1", "region": "ams", "outcome": "rejected",
                      "reason": "full"}]}))
    assert view.asked == "1 shared cpu, 256 MB"
    assert view.regions[0].refused == (("cpu", 1),)
    assert view.regions[0].ranked[0].subscores == (("cpu", 0.4),)
    assert view.attempts[0].outcome == "rejected"
    assert view.winner == "ams-2"


def test_where_it_goes_reads_fits_and_rankings() -> None:
    answer = where_it_goes(Placements.model_validate({
        "regions": [{"region": "ams", "count": 3, "concurrency": 2}],
        "explain": [{"region": "ams", "candidates": 2, "feasible": 2}]}))
    assert [(f.region, f.count, f.hosts) for f in answer.fits] == [("ams", 3, 2)]
    assert answer.explain[0].candidates == 2
