"""Every broker's autoscale loop: for each app with a setting, the broker holding the app's
lease reads its figure, decides (``core/decide.py``) and acts; the others watch the lease.

The lease is a row of the view (``core/lease.py``), not a machine's lease of the
Machines API: a live machine lease makes that machine refuse start, stop, update and
cordon from whoever lacks its nonce, so holding one for good would freeze the app's
machine against its deploys, the proxy's autostop, the standby watch and its users.

The figure: with a concurrency target, each started machine's sessions summed over
every proxy (``fly_app_concurrency``, HAProxy's ``scur``, each proxy's count scraped by
the metrics store: this host's, else another server host's); with an expression, its
value. Actions go through the broker's
ordinary paths: a start, uncordon, cordon and stop through the machine's worker (no
lease nonce: a machine a deploy holds refuses, and the next evaluation tries again),
a create of a clone of the app's newest machine through placement (its record
explains it, ``bodega machine explain``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from bodega.broker.autoscale.core.decide import Seen, Stimulus, decide
from bodega.broker.autoscale.core.lease import Sighting, Verdict, judge
from bodega.broker.view.catalog import Catalog
from bodega.model.answer import Answer
from bodega.model.errors import BodegaError
from bodega.model.machine import Machine
from bodega.model.rows import AutoscaleRow, AutoscaleRunRow, Decision, Memory
from bodega.runtime.waits import within
from bodega.wire.public.fly import CreateMachineRequest
from bodega.wire.public.prometheus import QueryAnswer, Sample

log = logging.getLogger("bodega.broker.autoscale")

EVERY = 2.0  # seconds between two evaluations of an app
TTL = 10.0  # seconds a quiet holder keeps its lease
ACT_WITHIN = 60.0  # seconds an evaluation's actions may take
RELEASE_KEY = "fly_release_version"


class ExprData(Answer):
    resultType: str = ""
    result: list[Sample] | tuple[float, str] = []  # a vector's series, or a scalar


class ExprAnswer(Answer):
    status: str = ""
    data: ExprData = ExprData()
    error: str | None = None


class MachineCalls(Protocol):
    """The broker's machines as the evaluator uses them (``machines.service.Machines``)."""

    def app_machines(self, app: str, *, destroyed: bool = True) -> list[Machine]: ...

    async def relay(self, app: str, machine_id: str, method: str,
                    action: str = "") -> bytes | None: ...


class Creates(Protocol):
    """A create through placement (``machines.create.MachineCreate``)."""

    async def create(self, app: str, body: CreateMachineRequest,
                     idempotency_key: str | None, owner: str) -> Machine: ...


class StoreAnswer(Protocol):
    @property
    def status(self) -> int: ...

    @property
    def body(self) -> bytes: ...


# POST a form to a path of the host's metrics store (``prometheus.store.MetricsStore.ask``).
AskStore = Callable[[str, list[tuple[str, str]]], Awaitable[StoreAnswer]]


def concurrency_query(app: str) -> str:
    """Each machine's sessions, summed over every proxy that routes to it."""
    return f'sum by (machine) (fly_app_concurrency{{app="{app}"}})'


def seen(machine: Machine, sessions: dict[str, float] | None) -> Seen:
    """A machine as the decision reads it; its sessions None where no proxy counts them
    (not routed to: stopped, just started, or cordoned and finishing unseen)."""
    release = machine.metadata().get(RELEASE_KEY, "")
    return Seen(id=machine.id, state=machine.state, cordoned=bool(machine.cordoned),
                release=int(release) if release.isdigit() else 0,
                created_at=machine.created_at,
                sessions=None if sessions is None else sessions.get(machine.id))


class Evaluator:
    def __init__(self, catalog: Catalog, machines: MachineCalls, creation: Creates,
                 name: str, ask: AskStore | None, *, every: float = EVERY, ttl: float = TTL,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.catalog = catalog
        self.machines = machines
        self.creation = creation
        self.name = name
        self.ask = ask
        self.every = every
        self.ttl = ttl
        self.clock = clock
        self.wall = wall
        self.seen: dict[str, Sighting] = {}

    async def run(self) -> None:
        while True:
            settings = self.catalog.rows(AutoscaleRow)
            for setting in settings:
                try:
                    await within(self.evaluate(setting), ACT_WITHIN)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("autoscaling app %s failed", setting.app)
            self.forget({s.app for s in settings})
            await asyncio.sleep(self.every)

    def forget(self, apps: set[str]) -> None:
        """Drop the runs this broker held of apps no longer autoscaled (a run written by an
        evaluation that was under way as its setting was removed)."""
        for run in self.catalog.rows(AutoscaleRunRow, holder=self.name):
            if run.app not in apps:
                self.catalog.delete_shared(AutoscaleRunRow.TABLE, run.app)
        self.seen = {app: s for app, s in self.seen.items() if app in apps}

    async def evaluate(self, setting: AutoscaleRow) -> Decision | None:
        """One look at one app: the lease, then (if held here) the decision and its actions."""
        app = setting.app
        run = self.catalog.get(AutoscaleRunRow, app)
        verdict, sighting, why = judge(run, self.name, self.seen.get(app), self.clock())
        if sighting is None:
            self.seen.pop(app, None)
        else:
            self.seen[app] = sighting
        if verdict is Verdict.WAIT:
            return None
        beat = (run.beat if run is not None else 0) + 1
        if verdict is Verdict.TAKE:
            log.info("autoscale lease on %s taken by %s: %s", app, self.name, why)
            taken = AutoscaleRunRow(app=app, holder=self.name, beat=beat, ttl=self.ttl,
                                    decision=run.decision if run else None,
                                    memory=run.memory if run else Memory())
            self.catalog.put_shared(AutoscaleRunRow.TABLE, app, taken.doc())
            return None
        assert run is not None
        machines = [m for m in self.machines.app_machines(app, destroyed=False)
                    if m.state != "destroyed"]
        figure, sessions, unknown = await self._figure(setting)
        stimulus = Stimulus(setting=setting, machines=tuple(seen(m, sessions) for m in machines),
                            figure=figure, memory=run.memory, now=self.wall(), unknown=unknown)
        decision, memory = decide(stimulus)
        errors = await self._act(app, decision, machines, beat)
        # Written after the actions: a beat is a lease renewed, so a holder stuck in them
        # for more than the ttl lets another broker take over.
        latest = self.catalog.get(AutoscaleRunRow, app)
        if latest is not None and latest.holder != self.name:
            return decision  # taken while acting: the taker's row stands
        self.catalog.put_shared(AutoscaleRunRow.TABLE, app, AutoscaleRunRow(
            app=app, holder=self.name, beat=beat, ttl=self.ttl, decision=decision,
            memory=memory, error="; ".join(errors) or None).doc())
        if decision.start or decision.create or decision.cordon or decision.stop \
                or decision.uncordon:
            log.info("autoscale %s: %s", app, decision.reason)
        return decision

    async def _figure(self, setting: AutoscaleRow) -> tuple[
            float | None, dict[str, float] | None, str]:
        """The setting's figure, each machine's sessions (concurrency mode), or why not."""
        if self.ask is None:
            return None, None, "no metrics store"
        query = setting.expr or concurrency_query(setting.app)
        try:
            answer = await self.ask("/api/v1/query", [("query", query)])
        except BodegaError as exc:
            return None, None, exc.message
        if answer.status != 200:
            why = _error_of(answer.body)
            return None, None, f"the store answered {answer.status}" + (f": {why}" if why else "")
        if setting.expr:
            return _one_value(ExprAnswer.model_validate_json(answer.body))
        parsed = QueryAnswer.model_validate_json(answer.body)
        if parsed.status != "success":
            return None, None, parsed.error or "the query failed"
        sessions = {s.metric.get("machine", ""): s.number() or 0.0 for s in parsed.data.result}
        return sum(sessions.values()), sessions, ""

    async def _act(self, app: str, decision: Decision, machines: list[Machine],
                   beat: int) -> list[str]:
        """Carry a decision out; what could not be done, said for the next look."""
        errors: list[str] = []

        async def step(what: str, call: Awaitable[object]) -> None:
            try:
                await call
            except BodegaError as exc:
                errors.append(f"{what}: {exc.message}")
                log.warning("autoscale %s: %s failed: %s", app, what, exc.message)

        for mid in decision.uncordon:
            await step(f"uncordon {mid}", self.machines.relay(app, mid, "POST", "uncordon"))
        for mid in decision.start:
            await step(f"start {mid}", self.machines.relay(app, mid, "POST", "start"))
        if decision.create:
            newest = _newest(machines)
            config = newest.known_config() if newest is not None else None
            if newest is None or config is None:
                errors.append("create: the app has no machine to clone")
            else:
                body = CreateMachineRequest(config=config, region=newest.region)
                await asyncio.gather(*(step(f"create a clone of {newest.id}", self.creation.create(
                    app, body, f"autoscale-{app}-{beat}-{i}", owner="autoscaler"))
                    for i in range(decision.create)))
        for mid in decision.cordon:
            await step(f"cordon {mid}", self.machines.relay(app, mid, "POST", "cordon"))
        for mid in decision.stop:
            await step(f"stop {mid}", self.machines.relay(app, mid, "POST", "stop"))
            # Stopped, it leaves the rotation anyway: uncordoned, a later start serves.
            await step(f"uncordon {mid}", self.machines.relay(app, mid, "POST", "uncordon"))
        return errors


def _newest(machines: list[Machine]) -> Machine | None:
    """The machine of the newest release (then the newest created): the one to clone."""
    def order(m: Machine) -> tuple[int, str, str]:
        release = m.metadata().get(RELEASE_KEY, "")
        return (int(release) if release.isdigit() else 0, m.created_at, m.id)
    candidates = [m for m in machines if m.known_config() is not None]
    return max(candidates, key=order, default=None)


def _one_value(answer: ExprAnswer) -> tuple[float | None, None, str]:
    """An expression's value: a scalar, or a vector of one series."""
    if answer.status != "success":
        return None, None, answer.error or "the query failed"
    result = answer.data.result
    if isinstance(result, tuple):
        value: float | None = _number(result[1])
    elif len(result) != 1:
        return None, None, f"the expression gave {len(result)} series; it must give one"
    else:
        value = result[0].number()
    if value is None or math.isnan(value):
        return None, None, "the expression's value is not a number"
    return value, None, ""


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _error_of(body: bytes) -> str | None:
    """What a store's refusal says (a PromQL error's text), if it says it as Prometheus does."""
    try:
        return ExprAnswer.model_validate_json(body).error
    except ValueError:
        return None
