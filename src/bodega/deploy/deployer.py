"""One deploy, end to end: read what runs, record a release, plan, run the release command,
carry the plan out, and mark the release ``complete`` or ``failed``.

The release (version, strategy, image, the whole config, who, when, the failure)
is recorded in the cluster through the broker's releases extension, so a
rollback from any client redeploys an earlier release's config.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bodega.deploy.core.config import DEFAULT_GROUP, AppConfig
from bodega.deploy.core.machine_spec import GROUP_KEY, ROLE_KEY, has_checks, machine_config
from bodega.deploy.core.plan import Current, Desired, Plan, Strategy, plan
from bodega.deploy.execute import Executor, Failure, Outcome, Progress, VolumePolicy
from bodega.deploy.health import exit_code
from bodega.deploy.report import DeployReport, FailureReport, MachineFate, machine_fates
from bodega.deploy.room import check_room, room_asks
from bodega.model.errors import BodegaError, NotFound
from bodega.model.machine import Machine, MachineEvent
from bodega.model.machine_config import Init, Restart
from bodega.wire.public.fly import CreateMachineRequest
from bodega.wire.public.machines_client import MachinesClient
from bodega.wire.public.releases import CreateRelease, Status


class DeployOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    strategy: Strategy | None = None  # None: the config's [deploy] strategy
    image: str | None = None
    ha: bool = True
    wait_timeout: float = 300.0
    smoke: float = 10.0
    drain: float = 2.0
    detach: bool = False
    who: str = "unknown"
    base_dir: str | None = None  # where bodega.toml is: the process driver's paths start there
    description: str | None = None


class DeployResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: str
    version: int
    strategy: Strategy
    plan: Plan
    outcome: Outcome
    app_removed: bool = False  # the app was made by this deploy, which then made nothing

    def summary(self) -> DeployReport:
        """What a script reads at the end: the release, how it ended, each machine's fate."""
        failure = self.outcome.failure
        fates = machine_fates(self.plan, self.outcome)
        if failure and failure.machine and failure.machine not in {f.id for f in fates}:
            fates.append(MachineFate(id=failure.machine, action="failed", step=failure.step))
        return DeployReport(
            type="result", app=self.app, release=f"v{self.version}", version=self.version,
            strategy=self.strategy, status="complete" if self.outcome.ok else "failed",
            machines=fates,
            failure=FailureReport(machine=failure.machine, step=failure.step,
                                  reason=failure.why) if failure else None)


def current_machines(machines: list[Machine],
                     crashed: frozenset[str] = frozenset()) -> list[Current]:
    return [Current(id=m.id, state=m.state, region=m.region, config=m.config,
                    group=m.metadata().get(GROUP_KEY, DEFAULT_GROUP), crashed=m.id in crashed)
            for m in machines
            if m.state not in ("destroyed", "destroying") and m.config is not None]


def stopped_by_a_crash(events: list[MachineEvent]) -> bool:
    """Whether a stopped machine's newest event is its process failing, not a stop request."""
    if not events or events[0].type != "exit":
        return False
    status = events[0].exit_event()
    return status is not None and status.failed


async def app_machines(client: MachinesClient, app: str) -> list[Current]:
    """The app's machines as the planner sees them; a stopped one is asked how it stopped.

    A machine whose process failed until its restarts ran out rests as ``stopped``
    too, but it was meant to run: a deploy (or a rollback) restarts it and waits.
    """
    machines = await client.machines(app)
    stopped = [m.id for m in machines if m.state == "stopped"]
    newest = await asyncio.gather(*(client.events(app, machine_id, limit=1)
                                    for machine_id in stopped))
    crashed = frozenset(machine_id for machine_id, events in zip(stopped, newest, strict=True)
                        if stopped_by_a_crash(events))
    return current_machines(machines, crashed)


async def app_exists(client: MachinesClient, app: str) -> bool:
    try:
        await client.app(app)
    except NotFound:
        return False
    return True


async def deploy(client: MachinesClient, config: AppConfig, options: DeployOptions,
                 report: Callable[[Progress], None] = lambda _p: None) -> DeployResult:
    if options.image:
        config = config.model_copy(update={"build": config.build.model_copy(
            update={"image": options.image})})
    if config.build.dockerfile and not config.build.image:
        raise ValueError("[build] dockerfile: the image is built by `bodega deploy` "
                         "(or pass an image)")
    strategy: Strategy = options.strategy or config.deploy.strategy
    app = config.app
    existed = await app_exists(client, app)
    current = await app_machines(client, app) if existed else []
    base_dir = Path(options.base_dir) if options.base_dir else None
    # Planned, and its new machines' room checked, before anything is made: a deploy that
    # cannot be planned or placed creates no app and records no release.
    await check_room(client, room_asks(
        _plan(config, current, strategy, options, 0, base_dir), config.primary_region),
        app if existed else None)
    if not existed:
        await client.create_app(app)
    try:
        result = await _deploy(client, config, options, report, strategy, current, base_dir)
    except Exception:
        if not existed:
            await _remove_if_empty(client, app)
        raise
    if not (existed or result.outcome.ok or result.outcome.created):
        # The cluster filled between the check and the creates: the app this deploy made
        # holds nothing, and goes with it.
        result.app_removed = await _remove_if_empty(client, app)
    return result


async def _remove_if_empty(client: MachinesClient, app: str) -> bool:
    """Delete an app this deploy created if no machine of it was made; True if it went."""
    with contextlib.suppress(BodegaError):
        if not await client.machines(app, include_deleted="true"):
            await client.delete_app(app)
            return True
    return False


async def _deploy(client: MachinesClient, config: AppConfig, options: DeployOptions,
                  report: Callable[[Progress], None], strategy: Strategy,
                  current: list[Current], base_dir: Path | None) -> DeployResult:
    app = config.app
    release = await client.create_release(app, CreateRelease(
        strategy=strategy, image=config.build.image or "process",
        config=config.model_dump(mode="json"), user=options.who,
        base_dir=options.base_dir, description=options.description))
    version = release.version
    planned = _plan(config, current, strategy, options, version, base_dir)
    result = DeployResult(app=app, version=version, strategy=strategy, plan=planned,
                          outcome=Outcome(ok=False))
    try:
        if config.deploy.release_command:
            report(Progress(stage="release command", message=config.deploy.release_command))
            await run_release_command(client, config, planned, base_dir, options.wait_timeout)
        executor = Executor(client, app, wait_timeout=options.wait_timeout,
                            smoke=0.0 if options.detach else options.smoke,
                            drain=options.drain, report=report,
                            volume_policies={m.source: VolumePolicy(
                                m.snapshot_retention, m.scheduled_snapshots)
                                for m in config.mounts})
        result.outcome = await executor.run(_no_waits(planned) if options.detach else planned)
    except ReleaseCommandFailed as failed:
        result.outcome = Outcome(ok=False, failure=Failure(machine=failed.machine,
                                                           step="release command",
                                                           why=failed.why))
    except BaseException:
        await _finish(client, app, version, "interrupted", "the deploy was interrupted")
        raise
    failure = result.outcome.failure
    await _finish(client, app, version, "complete" if result.outcome.ok else "failed",
                  failure.describe() if failure else None)
    return result


def _plan(config: AppConfig, current: list[Current], strategy: Strategy,
          options: DeployOptions, version: int, base_dir: Path | None) -> Plan:
    desired = []
    for group in config.groups:
        spec = machine_config(config, group, version, base_dir)
        desired.append(Desired(group=group, config=spec, has_services=bool(spec.services),
                               has_checks=has_checks(spec)))
    return plan(desired, current, strategy=strategy, max_unavailable=config.deploy
                .max_unavailable, ha=options.ha, region=config.primary_region)


def _no_waits(planned: Plan) -> Plan:
    return planned.model_copy(update={"stages": [s.model_copy(update={"wait": False})
                                                 for s in planned.stages]})


async def _finish(client: MachinesClient, app: str, version: int, status: Status,
                  failure: str | None) -> None:
    # The deploy's own outcome is what the user needs; if this fails the release stays running.
    with contextlib.suppress(BodegaError):
        await client.finish_release(app, version, status, failure)


class ReleaseCommandFailed(Exception):
    def __init__(self, machine: str | None, why: str) -> None:
        super().__init__(why)
        self.machine = machine
        self.why = why


async def run_release_command(client: MachinesClient, config: AppConfig, planned: Plan,
                              base_dir: Path | None, timeout: float) -> None:
    """The release command in a temporary machine of the first group; non-zero aborts."""
    assert config.deploy.release_command
    group = config.groups[0]
    spec = machine_config(config, group, 0, base_dir)
    words = shlex.split(config.deploy.release_command)
    if config.process_driver and base_dir is not None:
        words = [str((base_dir / w).resolve()) if (base_dir / w).is_file() else w for w in words]
    spec = spec.model_copy(update={
        "services": None, "checks": None, "init": Init(exec=words),
        "restart": Restart(policy="no"),
        "metadata": {**(spec.metadata or {}), ROLE_KEY: "release_command"}})
    try:
        created = await client.create_machine(config.app, CreateMachineRequest(
            config=spec, region=config.primary_region))
    except BodegaError as err:
        raise ReleaseCommandFailed(None, err.message) from None
    machine_id = created.id
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            events = await client.events(config.app, machine_id, limit=50)
            exits = [e for e in events if e.type == "exit"]
            if exits:
                code = exit_code(exits[0])
                if code != 0:
                    lines = await client.log_lines(config.app, machine_id)
                    raise ReleaseCommandFailed(machine_id, f"exited with code {code}" + (
                        " | last log lines: " + " / ".join(lines) if lines else ""))
                return
            if loop.time() > deadline:
                raise ReleaseCommandFailed(machine_id, f"still running after {timeout:.0f}s")
            await asyncio.sleep(0.3)
    finally:
        with contextlib.suppress(BodegaError):
            await client.destroy(config.app, machine_id, force=True)
