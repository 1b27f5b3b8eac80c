"""The evaluator over the view's in-memory catalog: the lease passes between brokers on
their own clocks, the holder alone acts, and what it decided is kept in the run row.
The machines, the creates and the metrics store are fakes that record what is asked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from bodega.broker.autoscale.evaluator import Evaluator, concurrency_query
from bodega.broker.view.catalog import MemoryCatalog
from bodega.model.machine import Machine
from bodega.model.machine_config import MachineConfig
from bodega.model.rows import AutoscaleRow, AutoscaleRunRow
from bodega.wire.public.fly import CreateMachineRequest

CONFIG = MachineConfig.model_validate({"image": "img", "metadata": {"fly_release_version": "2"}})


@dataclass
class FakeMachines:
    machines: list[Machine]
    calls: list[tuple[str, str]] = field(default_factory=list)

    def app_machines(self, app: str, *, destroyed: bool = True) -> list[Machine]:
        return list(self.machines)

    async def relay(self, app: str, machine_id: str, method: str,
                    action: str = "") -> bytes | None:
        self.calls.append((action, machine_id))
        return None


@dataclass
class FakeCreates:
    made: list[tuple[str | None, CreateMachineRequest]] = field(default_factory=list)

    async def create(self, app: str, body: CreateMachineRequest,
                     idempotency_key: str | None, owner: str) -> Machine:
        self.made.append((idempotency_key, body))
        return Machine(id="new", app=app, state="started")


@dataclass(frozen=True)
class Answered:
    status: int
    body: bytes


@dataclass
class FakeStore:
    sessions: dict[str, float]
    asked: list[str] = field(default_factory=list)

    async def ask(self, path: str, params: list[tuple[str, str]]) -> Answered:
        self.asked.append(dict(params)["query"])
        result = [{"metric": {"machine": m}, "value": [0, str(v)]}
                  for m, v in self.sessions.items()]
        return Answered(200, _json({"status": "success",
                                    "data": {"resultType": "vector", "result": result}}))


def _json(doc: object) -> bytes:
    return json.dumps(doc).encode()


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def broker(catalog: MemoryCatalog, name: str, machines: FakeMachines, creates: FakeCreates,
           store: FakeStore | None, clock: Clock) -> Evaluator:
    return Evaluator(catalog, machines, creates, name, store.ask if store else None,
                     ttl=10.0, clock=clock, wall=clock)


def setting(catalog: MemoryCatalog) -> AutoscaleRow:
    row = AutoscaleRow(app="web", min=1, max=3, concurrency=2, scale_in_after=30)
    catalog.put_shared(AutoscaleRow.TABLE, "web", row.doc())
    return row


def started(mid: str, state: str = "started", created: str = "2026-01-01T00:00:00Z") -> Machine:
    return Machine(id=mid, app="web", state=state, region="ams", config=CONFIG,
                   created_at=created)


async def test_the_holder_scales_out_starting_then_creating_and_says_why() -> None:
    catalog, clock = MemoryCatalog(), Clock()
    machines = FakeMachines([started("m1"), started("s1", "stopped")])
    creates, store = FakeCreates(), FakeStore({"m1": 6})
    b1 = broker(catalog, "b1", machines, creates, store, clock)
    row = setting(catalog)
    assert await b1.evaluate(row) is None  # taken: acts from the next evaluation
    assert machines.calls == []
    decision = await b1.evaluate(row)
    assert decision is not None
    assert decision.wanted == 3
    assert machines.calls == [("start", "s1")]
    assert [key for key, _ in creates.made] == ["autoscale-web-2-0"]
    assert creates.made[0][1].config == CONFIG  # a clone of the newest machine
    assert creates.made[0][1].region == "ams"
    assert store.asked == [concurrency_query("web")]
    run = catalog.get(AutoscaleRunRow, "web")
    assert run is not None
    assert (run.holder, run.beat) == ("b1", 2)
    assert run.decision == decision
    assert "scale out from 1 to 3" in decision.reason


async def test_another_broker_takes_over_once_the_holders_beat_stops_for_the_ttl() -> None:
    catalog, clock = MemoryCatalog(), Clock()
    machines = FakeMachines([started("m1")])
    b1 = broker(catalog, "b1", machines, FakeCreates(), None, clock)
    b2 = broker(catalog, "b2", machines, FakeCreates(), None, clock)
    row = setting(catalog)
    await b1.evaluate(row)
    for _ in range(5):  # b1 beats every 2 s: b2 waits
        clock.now += 2
        await b1.evaluate(row)
        assert await b2.evaluate(row) is None
    held = catalog.get(AutoscaleRunRow, "web")
    assert held is not None
    assert held.holder == "b1"
    # b1 is killed: its beat stays; b2 takes over after the ttl, on its own clock.
    clock.now += 9.5
    await b2.evaluate(row)
    still = catalog.get(AutoscaleRunRow, "web")
    assert still is not None
    assert still.holder == "b1"
    clock.now += 1
    await b2.evaluate(row)
    taken = catalog.get(AutoscaleRunRow, "web")
    assert taken is not None
    assert (taken.holder, taken.beat) == ("b2", held.beat + 1)
    clock.now += 2
    assert await b2.evaluate(row) is not None  # and evaluates from then on
    assert await b1.evaluate(row) is None  # b1 back: the lease is b2's


async def test_scale_in_cordons_then_stops_the_drained_machine_and_uncordons_it() -> None:
    catalog, clock = MemoryCatalog(), Clock()
    machines = FakeMachines([started("m1"), started("m2")])
    store = FakeStore({"m1": 1, "m2": 0})
    b1 = broker(catalog, "b1", machines, FakeCreates(), store, clock)
    row = setting(catalog)
    await b1.evaluate(row)
    await b1.evaluate(row)  # 1 session wants 1 of 2: the window starts
    clock.now += 31
    decision = await b1.evaluate(row)
    assert decision is not None
    assert decision.cordon == ("m2",)
    assert machines.calls == [("cordon", "m2")]
    machines.machines[1] = machines.machines[1].model_copy(update={"cordoned": True})
    clock.now += 2
    decision = await b1.evaluate(row)
    assert decision is not None
    assert decision.stop == ("m2",)
    assert machines.calls[1:] == [("stop", "m2"), ("uncordon", "m2")]


@dataclass
class ExprStore:
    answer: object
    status: int = 200

    async def ask(self, path: str, params: list[tuple[str, str]]) -> Answered:
        return Answered(self.status, _json(self.answer))


async def expression_decision(answer: object, status: int = 200) -> str:
    catalog, clock = MemoryCatalog(), Clock()
    machines = FakeMachines([started("m1"), started("s1", "stopped")])
    row = AutoscaleRow(app="web", min=1, max=5, expr="sum(queue) / 10")
    catalog.put_shared(AutoscaleRow.TABLE, "web", row.doc())
    b1 = broker(catalog, "b1", machines, FakeCreates(), None, clock)
    b1.ask = ExprStore(answer, status).ask
    await b1.evaluate(row)
    decision = await b1.evaluate(row)
    assert decision is not None
    return f"{decision.wanted} {decision.figure}"


async def test_an_expression_is_a_scalar_or_one_series_and_anything_else_no_figure() -> None:
    scalar = {"status": "success", "data": {"resultType": "scalar", "result": [0, "2.5"]}}
    assert await expression_decision(scalar) == "3 expression = 2.5"
    one = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {}, "value": [0, "2"]}]}}
    assert await expression_decision(one) == "2 expression = 2"
    two = {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"a": "1"}, "value": [0, "2"]}, {"metric": {"a": "2"}, "value": [0, "3"]}]}}
    assert await expression_decision(two) == (
        "1 no figure (the expression gave 2 series; it must give one): bounds kept")
    failed = {"status": "error", "errorType": "bad_data", "error": "unknown function"}
    assert await expression_decision(failed, 422) == (
        "1 no figure (the store answered 422: unknown function): bounds kept")


def test_a_run_left_behind_by_a_removed_setting_is_dropped_by_its_holder() -> None:
    catalog, clock = MemoryCatalog(), Clock()
    b1 = broker(catalog, "b1", FakeMachines([]), FakeCreates(), None, clock)
    for app, holder in (("gone", "b1"), ("kept", "b1"), ("theirs", "b2")):
        catalog.put_shared(AutoscaleRunRow.TABLE, app,
                           AutoscaleRunRow(app=app, holder=holder).doc())
    b1.forget({"kept"})
    assert sorted(r.app for r in catalog.rows(AutoscaleRunRow)) == ["kept", "theirs"]
