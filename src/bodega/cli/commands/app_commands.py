"""``bodega scale count|vm`` and ``bodega launch``: parse, call, render."""

from __future__ import annotations

import getpass
import json as jsonlib
import shlex
from pathlib import Path
from typing import Annotated

import typer

from bodega.cli.commands.deploy import _reporter
from bodega.cli.session.api import (
    ApiUrl,
    ContextName,
    DrainTime,
    Json,
    SmokeTime,
    Token,
    call,
)
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import fail, friendly
from bodega.deploy.core.plan import Create, Destroy, Plan, Stage
from bodega.deploy.core.scale import RegionChange, count_changes, vm_plan
from bodega.deploy.deployer import app_machines, current_machines
from bodega.deploy.execute import Executor, Outcome
from bodega.model.machine_config import Guest, preset
from bodega.model.plural import counted
from bodega.wire.public.fly import PlacementsRequest, checked
from bodega.wire.public.machines_client import MachinesClient
from bodega.wire.public.platform import Placements

scale = typer.Typer(help="Change how many machines run, or their size.", no_args_is_help=True)


def _outcome_line(outcome: Outcome) -> str | None:
    return outcome.failure.describe() if outcome.failure else None


@scale.command("count")
@friendly
def scale_count(
    count: Annotated[int, typer.Argument(help="Machines per region")],
    app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
    process_group: Annotated[str, typer.Option(help="Process group")] = "app",
    region: Annotated[str | None, typer.Option(help="Regions, e.g. ams,syd")] = None,
    wait_timeout: Annotated[float, typer.Option(help="Seconds per new machine")] = 120.0,
    smoke_time: SmokeTime = 10.0,
    api_url: ApiUrl = None, token: Token = None,
    context: ContextName = None, json: Json = False,
) -> None:
    """Run COUNT machines of a process group in each region (created or destroyed)."""
    name = app_name(app, config)
    regions = [r.strip() for r in (region or "").split(",") if r.strip()]

    async def work(client: MachinesClient) -> tuple[list[RegionChange], list[str], Outcome]:
        changes = count_changes(current_machines(await client.machines(name)), process_group,
                                count, regions)
        refused, stages = [], []
        for change in changes:
            if change.create and change.template is not None:
                guest = change.template.effective_guest()
                room = await client.placements(checked(PlacementsRequest, {
                    "org_slug": "personal", "region": change.region, "count": change.create,
                    "app": name, "explain": True,
                    "compute": {"cpu_kind": guest.cpu_kind, "cpus": guest.cpus,
                                "memory_mb": guest.memory_mb}}))
                fits = sum(r.count for r in room.regions if r.region == change.region)
                if fits < change.create:
                    refused.append(f"{change.region}: room for {fits} of "
                                   f"{counted(change.create, 'new machine')} ({_why(room)}); "
                                   "nothing changed there")
                    continue
                stages.append(Stage(name=f"{change.region}: +{change.create}", actions=[
                    Create(ref=f"{change.region}-{i}", group=process_group,
                           config=change.template, region=change.region)
                    for i in range(change.create)]))
            if change.destroy:
                stages.append(Stage(name=f"{change.region}: -{len(change.destroy)}", wait=False,
                                    actions=[Destroy(id=i, group=process_group)
                                             for i in change.destroy]))
        plan = Plan(strategy="immediate", stages=stages,
                    leases=[a.id for s in stages for a in s.actions if isinstance(a, Destroy)])
        executor = Executor(client, name, wait_timeout=wait_timeout, smoke=smoke_time,
                            report=_reporter(json))
        return changes, refused, await executor.run(plan)

    changes, refused, outcome = call(api_url, token, work, context=context)
    if json:  # after the progress events, one line a script reads last
        typer.echo(jsonlib.dumps({"type": "result", "changes": [
            c.model_dump(exclude={"template"}) for c in changes], "refused": refused,
            "outcome": outcome.model_dump()}))
    else:
        for change in changes:
            typer.echo(f"{change.region}: {change.have} -> {change.want}")
    problems = refused + ([line] if (line := _outcome_line(outcome)) else [])
    if problems:
        fail("; ".join(problems))


def _why(room: Placements) -> str:
    parts = []
    for region in room.explain or []:
        parts.append(f"{counted(region.candidates, 'worker')}, {region.feasible} "
                     f"feasible, refused {region.refused or 'none'}")
    return "; ".join(parts) or "no worker in that region"


@scale.command("vm")
@friendly
def scale_vm(
    size: Annotated[str, typer.Argument(help="A preset: shared-cpu-1x ... performance-8x")],
    app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
    wait_timeout: Annotated[float, typer.Option(help="Seconds per machine")] = 120.0,
    smoke_time: SmokeTime = 10.0, drain_time: DrainTime = 2.0,
    api_url: ApiUrl = None, token: Token = None,
    context: ContextName = None, json: Json = False,
) -> None:
    """Resize every machine of the app, one at a time."""
    name = app_name(app, config)
    kind, cpus, memory = preset(size)
    guest = Guest(cpu_kind=kind, cpus=cpus, memory_mb=memory)

    async def work(client: MachinesClient) -> Outcome:
        # A machine resting after its own crash is meant to run: it is resized and started.
        plan = vm_plan(await app_machines(client, name), guest)
        return await Executor(client, name, wait_timeout=wait_timeout, smoke=smoke_time,
                              drain=drain_time, report=_reporter(json)).run(plan)

    outcome = call(api_url, token, work, context=context)
    if json:  # after the progress events, one line a script reads last
        typer.echo(jsonlib.dumps({"type": "result", "outcome": outcome.model_dump()}))
    if line := _outcome_line(outcome):
        fail(line)
    if not json:
        typer.echo(f"{name}: {counted(len(outcome.updated), 'machine')} "
                   f"{'is' if len(outcome.updated) == 1 else 'are'} now {size}")


STARTER = """# bodega.toml written by `bodega launch` ({who}); see docs/deploy.md
app = "{app}"
primary_region = "{region}"
{build}
[env]
  PORT = "{port}"

[processes]
  app = {command}

[http_service]
  internal_port = {port}
  auto_stop_machines = "off"
  auto_start_machines = true
  min_machines_running = 1

  [[http_service.checks]]
    path = "/healthz"
    interval = "5s"
    timeout = "2s"

[deploy]
  strategy = "rolling"
  wait_timeout = "2m"
"""


@friendly
def launch_command(
    command: Annotated[list[str] | None, typer.Argument(help="Command the app runs")] = None,
    name: Annotated[str, typer.Option("--name", help="App name")] = "",
    image: Annotated[str | None, typer.Option(help="Image (else the process driver runs "
                                                   "the command on the host)")] = None,
    port: Annotated[int, typer.Option(help="Port the app listens on")] = 8080,
    region: Annotated[str, typer.Option(help="Primary region")] = "ams",
    config: ConfigPath = DEFAULT_CONFIG,
) -> None:
    """Write a starter bodega.toml for a command or an image."""
    if config.exists():
        raise ValueError(f"{config} exists; edit it, or pass -c for another file")
    if not command and not image:
        raise ValueError("give the command the app runs, or --image")
    app = name or Path.cwd().name.lower().replace("_", "-")
    line = shlex.join(command) if command else ""
    text = STARTER.format(who=getpass.getuser(), app=app, region=region, port=port,
                          build=f'\n[build]\n  image = "{image}"\n' if image else "",
                          command=_toml_string(line) if line else '""')
    if not command:
        text = text.replace('\n[processes]\n  app = ""\n', "")
    config.write_text(text)
    typer.echo(f"Wrote {config} for app {app}; deploy it with `bodega deploy -c {config}`")


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
