"""A deploy's destroys, against a client that records the calls: waited on until destroyed."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from bodega.deploy.core.plan import Destroy, Plan, Stage
from bodega.deploy.execute import DESTROY_WAIT, Executor, Progress
from bodega.model.errors import Timeout
from bodega.wire.public.machines_client import MachinesClient


class Recorder:
    """The calls a destroy makes; ``slow``: machines whose wait for destroyed times out."""

    def __init__(self, slow: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.slow = slow

    async def action(self, app: str, machine_id: str, action: str, **_: Any) -> None:
        self.calls.append((action, machine_id))

    async def destroy(self, app: str, machine_id: str, force: bool = False,
                      nonce: str | None = None) -> None:
        self.calls.append(("destroy", machine_id))

    async def wait(self, app: str, machine_id: str, state: str = "started",
                   timeout: int = 60, version: str | None = None) -> None:
        self.calls.append(("wait", machine_id, state, str(timeout)))
        if machine_id in self.slow:
            raise Timeout(f"machine {machine_id} is still destroying")


def execute(client: Recorder, plan: Plan) -> tuple[Executor, list[Progress]]:
    said: list[Progress] = []
    executor = Executor(cast(MachinesClient, client), "web", drain=0, report=said.append)
    asyncio.run(executor.run(plan))
    return executor, said


def plan_destroying(*machine_ids: str) -> Plan:
    return Plan(strategy="rolling", leases=[], stages=[Stage(name="app", wait=False, actions=[
        Destroy(id=m, group="app") for m in machine_ids])])


def test_a_destroy_is_done_once_the_machine_is_destroyed() -> None:
    client = Recorder()
    executor, said = execute(client, plan_destroying("m1"))
    assert client.calls == [("cordon", "m1"), ("destroy", "m1"),
                            ("wait", "m1", "destroyed", str(DESTROY_WAIT))]
    assert executor.outcome.ok
    assert executor.outcome.destroyed == ["m1"]
    assert [p.message for p in said if p.machine == "m1"] == ["destroyed"]


def test_a_machine_not_destroyed_in_time_fails_the_deploy_at_its_wait() -> None:
    executor, said = execute(Recorder(slow=frozenset({"m1"})), plan_destroying("m1"))
    assert not executor.outcome.ok
    failure = executor.outcome.failure
    assert failure is not None
    assert (failure.machine, failure.step) == ("m1", "wait for destroyed")
    assert "still destroying" in failure.why
    assert executor.outcome.destroyed == ["m1"]  # the destroy itself was taken
    assert not [p for p in said if p.message == "destroyed"]


def test_the_clean_up_destroys_all_then_waits_and_reports_a_late_one() -> None:
    client = Recorder(slow=frozenset({"m2"}))
    said: list[Progress] = []
    executor = Executor(cast(MachinesClient, client), "web", drain=0, report=said.append)
    executor.outcome.created = {"canary-app": "m1", "canary-worker": "m2"}
    asyncio.run(executor._clean_up())
    assert [c[:2] for c in client.calls] == [("destroy", "m1"), ("destroy", "m2"),
                                            ("wait", "m1"), ("wait", "m2")]
    assert executor.outcome.destroyed == ["m1", "m2"]
    assert [p.message for p in said] == [
        "destroyed canary-app",
        "destroying canary-worker: machine m2 is still destroying"]
