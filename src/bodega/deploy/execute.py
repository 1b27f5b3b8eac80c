"""The deploy executor: carries a ``Plan`` out through the public Machines API.

Leases first: every existing machine the plan touches is leased (13 s, refreshed
in the background) before anything changes, and one leased by someone else
stops the deploy there. Then the stages in order, the actions of a stage
together. A started machine is cordoned (out of the proxy's rotation) and given
``drain`` seconds for in-flight requests before it is updated, stopped or
destroyed, and uncordoned once healthy again; each waited stage ends ``drain``
seconds later, once the proxy has heard the machines are back. The first failure stops the
deploy and says which machine, which step and why; in a bluegreen or canary
deploy a failure before the switch destroys the machines it created. A destroy
is done when the machine is ``destroyed``, not when the worker took the call, so
a list right after the deploy no longer shows it.

Machines the plan skipped (already on the release's config) are said to be skipped,
per group and region, before anything starts; a health check that changes status
while the deploy waits on a machine is reported as it happens.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.plan import Create, Destroy, Plan, Relabel, Stage, Update
from bodega.deploy.health import CheckChange, MachineFailed, wait_healthy
from bodega.model.errors import BodegaError, Conflict
from bodega.model.ids import VOLUME_ID_RE
from bodega.model.machine_config import MachineConfig
from bodega.model.plural import counted
from bodega.wire.public.fly import CreateMachineRequest, CreateVolumeRequest, UpdateMachineRequest
from bodega.wire.public.machines_client import MachinesClient

LEASE_TTL = 13  # seconds, as flyctl's deploy leases
LEASE_DESCRIPTION = "bodega deploy"
DESTROY_WAIT = 60  # seconds a destroyed machine is given to reach ``destroyed``
T = TypeVar("T")


class Progress(BaseModel):
    """One line of what the deploy is doing, for a person or a script."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: str
    machine: str | None = None
    message: str
    check: CheckChange | None = None  # set when a health check changed status


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    machine: str | None
    step: str
    why: str

    def describe(self) -> str:
        who = f"machine {self.machine}" if self.machine else "the deploy"
        return f"{who} failed at {self.step}: {self.why}"


class Outcome(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: bool
    failure: Failure | None = None
    created: dict[str, str] = {}  # ref -> machine id
    updated: list[str] = []
    destroyed: list[str] = []
    not_updated: list[str] = []
    skipped: list[str] = []  # already on the release's config: left alone
    relabelled: list[str] = []  # of those, the ones whose release label was rewritten


class StepFailed(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.describe())
        self.failure = failure


@dataclass(frozen=True)
class VolumePolicy:
    """A fly.toml mount's snapshot keys; None: the API's default."""

    snapshot_retention: int | None = None
    scheduled_snapshots: bool | None = None

    def request_fields(self) -> dict[str, int | bool]:
        fields: dict[str, int | bool] = {}
        if self.snapshot_retention is not None:
            fields["snapshot_retention"] = self.snapshot_retention
        if self.scheduled_snapshots is not None:
            fields["auto_backup_enabled"] = self.scheduled_snapshots
        return fields


@dataclass
class Executor:
    client: MachinesClient
    app: str
    wait_timeout: float = 300.0
    smoke: float = 10.0
    drain: float = 2.0
    report: Callable[[Progress], None] = lambda _p: None
    nonces: dict[str, str] = field(default_factory=dict)
    outcome: Outcome = field(default_factory=lambda: Outcome(ok=False))
    touched: set[str] = field(default_factory=set)  # machines an update was sent to
    claimed: set[str] = field(default_factory=set)  # volumes this deploy gave a machine
    # A mount's snapshot policy, by volume name, for a volume the deploy creates (its
    # fly.toml ``snapshot_retention`` and ``scheduled_snapshots``).
    volume_policies: dict[str, VolumePolicy] = field(default_factory=dict)

    async def run(self, plan: Plan) -> Outcome:
        refresher: asyncio.Task[None] | None = None
        self.outcome.skipped = [s.id for s in plan.skipped]
        self._report_skipped(plan)
        try:
            await self._lease(plan.leases)
            refresher = asyncio.create_task(self._refresh())
            for index, stage in enumerate(plan.stages):
                try:
                    await self._stage(stage)
                except StepFailed as failed:
                    self.outcome.failure = failed.failure
                    if index < plan.cleanup_before:
                        await self._clean_up()
                    self.outcome.not_updated = [
                        a.id for s in plan.stages[index:] for a in s.actions
                        if isinstance(a, Update) and a.id not in self.touched]
                    return self.outcome
            self.outcome.ok = True
            return self.outcome
        except StepFailed as failed:
            self.outcome.failure = failed.failure
            self.outcome.not_updated = [a.id for s in plan.stages for a in s.actions
                                        if isinstance(a, Update)]
            return self.outcome
        finally:
            if refresher is not None:
                refresher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await refresher
            await self._release()

    # -- leases ------------------------------------------------------------------------------
    async def _lease(self, machine_ids: list[str]) -> None:
        for machine_id in machine_ids:
            try:
                lease = await self.client.acquire_lease(self.app, machine_id, LEASE_TTL,
                                                        LEASE_DESCRIPTION)
                self.nonces[machine_id] = lease.data.nonce
            except Conflict as err:
                raise StepFailed(Failure(machine=machine_id, step="lease",
                                         why=f"leased by someone else ({err.message}); "
                                             "nothing was changed")) from None
        if machine_ids:
            self.report(Progress(stage="lease",
                                 message=f"leased {counted(len(machine_ids), 'machine')}"))

    def _report_skipped(self, plan: Plan) -> None:
        where: dict[tuple[str, str], int] = {}
        for skipped in plan.skipped:
            key = (skipped.group, skipped.region)
            where[key] = where.get(key, 0) + 1
        for (group, region), n in sorted(where.items()):
            self.report(Progress(stage=group, message=f"{region}: {counted(n, 'machine')} "
                                                     "already current, skipped"))

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(LEASE_TTL / 3)
            for machine_id, nonce in list(self.nonces.items()):
                with contextlib.suppress(BodegaError):
                    await self.client.refresh_lease(self.app, machine_id, nonce, LEASE_TTL,
                                                    LEASE_DESCRIPTION)

    async def _release(self) -> None:
        for machine_id, nonce in list(self.nonces.items()):
            if machine_id in self.outcome.destroyed:
                continue
            with contextlib.suppress(BodegaError):
                await self.client.release_lease(self.app, machine_id, nonce)
        self.nonces.clear()

    # -- stages ------------------------------------------------------------------------------
    async def _stage(self, stage: Stage) -> None:
        self.report(Progress(stage=stage.name, message=counted(len(stage.actions), "machine")))
        tasks = [asyncio.create_task(self._action(stage, action)) for action in stage.actions]
        try:
            for done in asyncio.as_completed(tasks):
                await done  # the first failure ends the stage
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if stage.wait and self.drain > 0:
            # The machines are healthy and uncordoned as the broker sees them; the proxy hears
            # of it through the registry a moment later. Taking the next machines out of
            # rotation before then would leave it nothing to route to.
            await asyncio.sleep(self.drain)

    async def _action(self, stage: Stage, action: Create | Update | Destroy | Relabel) -> None:
        if isinstance(action, Create):
            await self._create(stage, action)
        elif isinstance(action, Update):
            await self._update(stage, action)
        elif isinstance(action, Relabel):
            await self._relabel(stage, action)
        else:
            await self._destroy(stage, action)

    async def _step(self, machine: str | None, step: str, work: Awaitable[T]) -> T:
        """Run one API call, turning an error into the failure that names it."""
        try:
            return await work
        except BodegaError as err:
            raise StepFailed(Failure(machine=machine, step=step, why=err.message)) from None

    async def _create(self, stage: Stage, action: Create) -> None:
        config = await self._with_volume(action.config, action.region)
        if action.standby_for:
            config = config.model_copy(
                update={"standbys": [self.outcome.created[action.standby_for]]})
        # No machine exists yet to name: the failure names what was being created.
        where = f" in {action.region}" if action.region else ""
        step = f"create of a {action.role} machine of group {action.group}{where}"
        created = await self._step(None, step, self.client.create_machine(
            self.app, CreateMachineRequest(config=config, skip_launch=not action.start,
                                           region=action.region)))
        machine_id = created.id
        self.outcome.created[action.ref] = machine_id
        self.report(Progress(stage=stage.name, machine=machine_id,
                             message=f"created ({action.role}) in {created.region}"))
        if action.start and stage.wait:
            await self._healthy(stage, machine_id, created.instance_id)

    async def _with_volume(self, config: MachineConfig, region: str | None) -> MachineConfig:
        """A mount naming a volume by name, as fly.toml's ``[mounts] source`` does, gets one:
        a volume of that name in the region that no machine has, else a new one of the
        mount's size (``initial_size``; 1 GB by default), as flyctl does."""
        mounts = config.mounts or []
        if not mounts or not mounts[0].volume or VOLUME_ID_RE.match(mounts[0].volume):
            return config
        mount = mounts[0]
        name = mount.volume
        volumes = await self._step(None, f"look for volumes named {name}",
                                   self.client.volumes(self.app))
        free = [v for v in volumes if v.name == name and v.state == "created"
                and not v.attached_machine_id and v.id not in self.claimed
                and (region is None or v.region == region)]
        if free:
            volume = free[0]
        else:
            policy = self.volume_policies.get(str(name), VolumePolicy())
            volume = await self._step(None, f"create of volume {name}", self.client.create_volume(
                self.app, CreateVolumeRequest(name=name, region=region,
                                              size_gb=mount.size_gb or 1).model_copy(
                    update=policy.request_fields())))
            self.report(Progress(stage="volumes", machine=None,
                                 message=f"created volume {volume.id} ({name}, "
                                         f"{volume.size_gb} GB) in {volume.region}"))
        self.claimed.add(volume.id)
        return config.model_copy(update={"mounts": [mount.model_copy(
            update={"volume": volume.id, "size_gb": None})]})

    async def _update(self, stage: Stage, action: Update) -> None:
        nonce = self.nonces.get(action.id)
        if action.started:
            await self._cordon(stage, action.id, nonce)
        self.touched.add(action.id)
        updated = await self._step(action.id, "update", self.client.update_machine(
            self.app, action.id, UpdateMachineRequest(config=action.config,
                                                      skip_launch=not action.started),
            nonce=nonce))
        self.report(Progress(stage=stage.name, machine=action.id, message="updated"))
        if action.started and stage.wait:
            await self._healthy(stage, action.id, updated.instance_id)
            await self._step(action.id, "uncordon",
                             self.client.action(self.app, action.id, "uncordon", nonce=nonce))
        self.outcome.updated.append(action.id)

    async def _relabel(self, stage: Stage, action: Relabel) -> None:
        """A current machine gets the release's labels in place: it keeps running as it is."""
        nonce = self.nonces.get(action.id)
        for key, value in action.metadata.items():
            await self._step(action.id, "label", self.client.set_metadata(
                self.app, action.id, key, value, nonce))
        self.outcome.relabelled.append(action.id)
        self.report(Progress(stage=stage.name, machine=action.id, message="labelled " + ", ".join(
            f"{k}={v}" for k, v in action.metadata.items()) + " (not restarted)"))

    async def _destroy(self, stage: Stage, action: Destroy) -> None:
        machine_id = self.outcome.created.get(action.id, action.id)
        nonce = self.nonces.get(machine_id)
        await self._cordon(stage, machine_id, nonce)
        await self._step(machine_id, "destroy", self.client.destroy(
            self.app, machine_id, force=True, nonce=nonce))
        self.outcome.destroyed.append(machine_id)
        await self._step(machine_id, "wait for destroyed", self._destroyed(machine_id))
        self.report(Progress(stage=stage.name, machine=machine_id, message="destroyed"))

    async def _cordon(self, stage: Stage, machine_id: str, nonce: str | None) -> None:
        await self._step(machine_id, "cordon",
                         self.client.action(self.app, machine_id, "cordon", nonce=nonce))
        if self.drain > 0:
            await asyncio.sleep(self.drain)  # the proxy hears of it, in-flight requests end

    async def _healthy(self, stage: Stage, machine_id: str, instance: str) -> None:
        self.report(Progress(stage=stage.name, machine=machine_id,
                             message="waiting for it to start and pass its checks"))
        def changed(change: CheckChange) -> None:
            self.report(Progress(stage=stage.name, machine=machine_id, message=change.describe(),
                                 check=change))

        try:
            await wait_healthy(self.client, self.app, machine_id, instance,
                               timeout=self.wait_timeout, smoke=self.smoke, on_check=changed)
        except MachineFailed as err:
            raise StepFailed(Failure(machine=machine_id, step=err.step, why=err.why)) from None
        self.report(Progress(stage=stage.name, machine=machine_id, message="healthy"))

    async def _clean_up(self) -> None:
        """Destroy what this deploy created (green or canary machines): blue keeps serving."""
        gone: dict[str, str] = {}
        for ref, machine_id in self.outcome.created.items():
            if machine_id in self.outcome.destroyed:
                continue
            with contextlib.suppress(BodegaError):
                await self.client.destroy(self.app, machine_id, force=True)
                self.outcome.destroyed.append(machine_id)
                gone[machine_id] = ref
        done = await asyncio.gather(*(self._destroyed(m) for m in gone), return_exceptions=True)
        for (machine_id, ref), error in zip(gone.items(), done, strict=True):
            if isinstance(error, BaseException) and not isinstance(error, BodegaError):
                raise error
            self.report(Progress(stage="clean up", machine=machine_id, message=(
                f"destroyed {ref}" if error is None else f"destroying {ref}: {error.message}")))

    async def _destroyed(self, machine_id: str) -> None:
        """Wait until a machine being destroyed is ``destroyed``: the worker answers a destroy
        once it is recorded, and the machine is listed, ``destroying``, until then."""
        await self.client.wait(self.app, machine_id, state="destroyed", timeout=DESTROY_WAIT)
