"""Any sequence of API calls and crashes leaves every machine in a legal state.

Two levels. Over the pure transitions (``fsm.py``): a model worker begins
operations only where ``BEGINS`` allows, walks their steps, and at any step
may fail the effect or die and resume at the recorded step; every path ends
in a resting state (or, after a failed destroy, in ``destroying``, from
which a destroy begins again): no machine is ever stuck. Over the machine
service: a real SQLite store and the fake driver, where a "crash" kills the
worker at its n-th effect (the operation stays recorded as running) and a
new worker on the same store recovers it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bodega.model.errors import BodegaError
from bodega.model.machine import ExitStatus
from bodega.model.machine_config import MachineConfig
from bodega.model.states import PERSISTENT, RELEASES_COMPUTE, MachineState
from bodega.wire.internal.worker_calls import CreateMachineBody
from bodega.worker.core.fsm import FSMS, Step
from bodega.worker.core.payloads import Payload, payload_from_json
from bodega.worker.core.policy import BEGINS
from bodega.worker.daemon import Worker
from bodega.worker.drivers.fake import FakeDriver
from bodega.worker.host.network import HostNetwork
from bodega.worker.ops.runner import Outcome
from bodega.worker.store import queries
from bodega.worker.store.database import Operation

from .conftest import worker_config

S = MachineState
STATES = {s.value for s in MachineState}
OPERATIONS = sorted(BEGINS)


def at_rest_legally(state: str) -> bool:
    """A resting state, or one an operation may begin from (a failed destroy is retried)."""
    return state in PERSISTENT or any(state in BEGINS[fsm] for fsm in BEGINS)

# -- the pure transitions ----------------------------------------------------------------------

# What happens to each effect as the model worker performs it.
fates = st.sampled_from(["ok", "ok", "ok", "fail", "die"])


@dataclass
class ModelWorker:
    """One machine, driven by the declarations alone, as the runner drives a real one."""

    state: str = S.CREATED
    seen: list[str] = field(default_factory=list)

    def payload_for(self, fsm: str, launch: bool, delay: bool) -> Payload:
        rest = self.state if self.state in (S.CREATED, S.STOPPED) else S.STOPPED
        return payload_from_json(fsm, {"launch": launch, "rest_state": rest,
                                       "delay": 0.2 if delay else 0, "start_seq": 1,
                                       "move_id": "m1", "target": "w2", "generation": 1,
                                       "target_url": "http://w2", "resting": rest})

    def enter(self, step: Step, payload: Payload) -> None:
        state = step.state_for(payload)
        if state is not None:
            self.state = state
            self.seen.append(state)

    def run(self, fsm_name: str, payload: Payload, fate: list[str]) -> None:
        """Begin and drive one operation; a death resumes at the recorded step (repeating it)."""
        fsm = FSMS[fsm_name]
        step = fsm.first(payload)
        self.enter(step, payload)
        for _ in range(64):  # every operation ends well within this many attempts
            if step.final:
                return
            outcome = fate.pop(0) if fate else "ok"
            if outcome == "die":
                assert self.state in STATES  # recorded; a new process resumes at ``step``
                continue
            if outcome == "fail":
                state, _event = fsm.on_error
                if state is not None:
                    self.state = state
                return
            step = fsm.after(step.name, payload)
            self.enter(step, payload)
        raise AssertionError(f"{fsm_name} never reached a final step")


calls = st.lists(st.tuples(st.sampled_from(OPERATIONS), st.booleans(), st.booleans(),
                           st.lists(fates, max_size=6)), max_size=20)


@settings(max_examples=500)
@given(calls)
def test_any_sequence_of_operations_and_deaths_comes_to_rest(
        sequence: list[tuple[str, bool, bool, list[str]]]) -> None:
    machine = ModelWorker()
    for fsm_name, launch, delay, fate in sequence:
        allowed = BEGINS[fsm_name]
        if machine.state not in allowed or allowed[machine.state] is None:
            continue  # refused, or already there: nothing changes
        machine.run(fsm_name, machine.payload_for(fsm_name, launch, delay), list(fate))
        assert at_rest_legally(machine.state), (fsm_name, machine.state)
    assert set(machine.seen) <= STATES
    if S.DESTROYED in machine.seen:
        assert machine.state == S.DESTROYED  # nothing begins from destroyed


@given(st.sampled_from(sorted(FSMS)), st.booleans(), st.sampled_from([S.CREATED, S.STOPPED]),
       st.booleans(), st.data())
def test_resuming_at_any_step_reaches_a_final_step(fsm_name: str, launch: bool, rest: str,
                                                   delay: bool, data: st.DataObject) -> None:
    fsm = FSMS[fsm_name]
    payload = payload_from_json(fsm_name, {"launch": launch, "rest_state": rest,
                                           "delay": 0.1 if delay else 0, "start_seq": 1,
                                           "move_id": "m1", "target": "w2", "generation": 1,
                                           "target_url": "http://w2", "resting": rest})
    reachable = [fsm.first(payload)]
    while not reachable[-1].final:
        reachable.append(fsm.after(reachable[-1].name, payload))
    step = data.draw(st.sampled_from(reachable))  # where a dead worker's log stopped
    for _ in range(len(fsm.steps)):
        if step.final:
            break
        step = fsm.after(step.name, payload)
    assert step.final
    assert step.state_for(payload) is None or step.state_for(payload) in STATES | {
        "created", "destroyed"}


# -- the machine service, with crashes ---------------------------------------------------------

class Crash(BaseException):
    """The worker process dies here: not an error any code handles."""


class CrashingEffects:
    """Performs effects, but kills the worker at the ``countdown``-th one when armed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.countdown: int | None = None
        self.crashed = False

    async def perform(self, op: Operation, step: Step) -> Outcome:
        if self.countdown is not None:
            if self.countdown == 0:
                self.countdown, self.crashed = None, True
                raise Crash(f"{op.fsm} at {op.step}")
            self.countdown -= 1
        outcome: Outcome = await self.inner.perform(op, step)
        return outcome

    def inert(self, op: Operation, step: Step) -> Outcome | None:
        # A step joined to the next one's commit has no instant of its own to crash at.
        outcome: Outcome | None = self.inner.inert(op, step)
        return outcome


def config(policy: str) -> MachineConfig:
    return MachineConfig.model_validate({
        "image": "x", "guest": {"cpus": 1, "memory_mb": 256},
        "restart": {"policy": policy, "max_retries": 1}})


index = st.integers(0, 3)
service_action = st.one_of(
    st.tuples(st.just("create"), st.booleans(), st.sampled_from(["no", "on-failure"])),
    st.tuples(st.sampled_from(["start", "stop", "restart", "destroy", "exit", "update"]), index),
    st.tuples(st.just("crash"), st.integers(0, 3)),
    st.tuples(st.just("reopen")),
)


class World:
    def __init__(self, tmp: Path) -> None:
        self.config = worker_config(tmp)
        self.driver = FakeDriver()  # the machines' processes outlive a worker crash
        self.worker = self._new_worker()
        self.effects = CrashingEffects(self.worker.effects)
        self.worker.runner.effects = self.effects
        self.ids: list[str] = []

    def _new_worker(self) -> Worker:
        network = HostNetwork("127.0.0.1", ipaddress.ip_network("10.250.0.0/24"))
        return Worker(self.config, driver=self.driver, network=network)

    async def open(self) -> None:
        await self.worker.network.setup()
        await self.worker.machines.recover()

    async def reopen(self) -> None:
        """The worker dies (or restarts) and a new one recovers from the same store."""
        old = self.worker
        tasks = list(old.machines.lifecycle.background | old.machines.supervision.exiting)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await old.machines.supervision.close()
        old.store.close()
        self.worker = self._new_worker()
        self.effects = CrashingEffects(self.worker.effects)
        self.worker.runner.effects = self.effects
        await self.open()

    async def act(self, action: tuple[Any, ...]) -> None:
        kind, m = action[0], self.worker.machines
        if kind == "crash":
            self.effects.countdown = int(action[1])
            return
        if kind == "reopen":
            await self.reopen()
            return
        if kind == "create":
            row, _ = await m.creation.create(CreateMachineBody(
                app="app", config=config(action[2]), skip_launch=action[1]))
            self.ids.append(row.id)
            return
        if not self.ids:
            return
        mid = self.ids[action[1] % len(self.ids)]
        if kind == "exit":
            self.driver.exit(mid, ExitStatus(exit_code=1))
        elif kind == "destroy":
            await m.destroy(mid, force=True)
        elif kind == "update":
            await m.update(mid, config("no"))
        else:
            await getattr(m, kind)(mid)

    async def settle(self) -> None:
        await self.worker.machines.settle()
        if self.effects.crashed:
            await self.reopen()
            await self.worker.machines.settle()

    def check(self) -> None:
        db = self.worker.store.db
        assert not self.worker.store.running_operations()
        for row in queries.list_machines(db, include_destroyed=True):
            assert at_rest_legally(row.state), (row.id, row.state)
            running = bool(self.driver.running(row.id))
            assert running == (row.state == S.STARTED), (row.id, row.state, running)
            if row.state in RELEASES_COMPUTE:
                assert not row.holds_compute, (row.id, row.state)
        usage = self.worker.ledger.usage()
        assert usage.memory_mb <= self.config.totals.memory_mb


async def scenario(actions: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp))
        await world.open()
        try:
            for action in actions:
                # Refused, or the worker died mid-call: the store says what it did.
                with contextlib.suppress(BodegaError, Crash):
                    await world.act(action)
                await world.settle()
                world.check()
        finally:
            await world.worker.machines.settle()
            await world.worker.machines.supervision.close()
            world.worker.store.close()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(service_action, min_size=1, max_size=14))
@example([("crash", 1), ("create", False, "no")])  # dies at spawn: recovery starts it
@example([("create", True, "no"), ("crash", 0), ("start", 0)])
@example([("create", False, "no"), ("crash", 0), ("destroy", 0), ("start", 0)])
@example([("create", False, "on-failure"), ("crash", 1), ("exit", 0), ("reopen",)])
def test_any_sequence_of_calls_and_crashes_leaves_legal_states(
        actions: list[tuple[Any, ...]]) -> None:
    asyncio.run(scenario(actions))
