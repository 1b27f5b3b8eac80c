"""``bodega deploy``, ``bodega releases`` and ``bodega rollback``: parse, call, render.

The policy lives in ``bodega.deploy``; this module only reads arguments, prints
progress (Rich for people; with ``--json`` one JSON object a line, each event as it
happens and a final ``{"type": "result", ...}``) and turns a failed deploy into one
readable line and a non-zero exit, with or without ``--json``.
"""

from __future__ import annotations

import contextlib
import getpass
import json as jsonlib
import time
from collections.abc import Iterator
from typing import Annotated, Any

import typer
from rich.markup import escape

from bodega.cli.commands.build import DataDir, Registry
from bodega.cli.commands.deploy_build import built_image
from bodega.cli.session.api import (
    ApiUrl,
    ContextName,
    DrainTime,
    Json,
    SmokeTime,
    Token,
    call,
    call_target,
    console,
    show_json,
    table,
    target,
)
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import fail, friendly
from bodega.deploy.core.config import AppConfig, config_file, load, unserved_statics
from bodega.deploy.core.plan import STRATEGIES, Relabel, Strategy
from bodega.deploy.deployer import DeployOptions, DeployResult, deploy
from bodega.deploy.execute import Progress
from bodega.model.duration import parse_duration
from bodega.model.errors import BodegaError
from bodega.model.plural import counted
from bodega.wire.public.machines_client import MachinesClient
from bodega.wire.public.releases import Release

DeployJson = Annotated[bool, typer.Option(
    "--json", help="One JSON object a line: each event as it happens, then the result")]


def _strategy(value: str | None) -> Strategy | None:
    if value is None:
        return None
    for known in STRATEGIES:
        if value == known:
            return known
    raise ValueError(f"unknown strategy {value!r}: use one of {', '.join(STRATEGIES)}")


def _reporter(json: bool) -> Any:
    started = time.monotonic()

    def report(progress: Progress) -> None:
        if json:
            typer.echo(jsonlib.dumps({"type": "check" if progress.check else "progress",
                                      **progress.model_dump(mode="json", exclude_none=True)}))
            return
        who = f"[cyan]{progress.machine}[/cyan] " if progress.machine else ""
        message = escape(progress.message)  # a check's output may hold "[...]"
        # One event, one line, however narrow the terminal: a reader (or grep) follows it.
        console.print(f"[dim]{time.monotonic() - started:6.1f}s[/dim] "
                      f"[bold]{escape(progress.stage)}[/bold]: {who}{message}",
                      soft_wrap=True, highlight=False)
    return report


def _finish(result: DeployResult, json: bool) -> None:
    if json:
        typer.echo(result.summary().line())
    outcome = result.outcome
    if outcome.ok:
        if not json:
            console.print(f"[green]Release v{result.version} of {result.app} deployed "
                          f"({result.strategy}){_left_alone(result)}.[/green]", soft_wrap=True)
        return
    failure = outcome.failure
    line = f"release v{result.version} failed: {failure.describe() if failure else 'unknown'}"
    if outcome.not_updated:
        line += f"; not updated: {', '.join(outcome.not_updated)}"
    if result.app_removed:
        line += f"; app {result.app} removed, since nothing of it was made"
    fail(line)


def _left_alone(result: DeployResult) -> str:
    skipped = len(result.outcome.skipped)
    if not skipped:
        return ""
    if all(isinstance(a, Relabel) for s in result.plan.stages for a in s.actions):
        return f": {counted(skipped, 'machine')} already current, nothing restarted"
    return f"; {counted(skipped, 'machine')} already current, left running"


@contextlib.contextmanager
def _json_result_on_error(json: bool) -> Iterator[None]:
    """With --json, an error before the deploy could end still prints a final result."""
    try:
        yield
    except (BodegaError, ValueError, OSError) as err:
        if json:
            message = err.message if isinstance(err, BodegaError) else str(err)
            typer.echo(jsonlib.dumps({"type": "result", "status": "error", "error": message}))
        raise


@friendly
def deploy_command(
    config: ConfigPath = DEFAULT_CONFIG,
    strategy: Annotated[str | None, typer.Option(
        help="rolling, immediate, canary or bluegreen (default: bodega.toml's)")] = None,
    image: Annotated[str | None, typer.Option(
        help="Image to deploy instead of bodega.toml's")] = None,
    ha: Annotated[bool, typer.Option(
        "--ha/--no-ha", help="First deploy: two machines per group with services, "
                             "a standby for one without")] = True,
    wait_timeout: Annotated[float | None, typer.Option(
        help="Seconds each machine has to start and pass its checks")] = None,
    detach: Annotated[bool, typer.Option(help="Do not wait for machines")] = False,
    smoke_time: SmokeTime = 10.0, drain_time: DrainTime = 2.0,
    registry: Registry = None, data_dir: DataDir = None,
    api_url: ApiUrl = None, token: Token = None,
    context: ContextName = None, json: DeployJson = False,
) -> None:
    """Deploy the app described by bodega.toml (building its Dockerfile first, if any).

    -c takes the file, or a directory holding a bodega.toml.
    """
    with _json_result_on_error(json):
        config = config_file(config)
        app_config, warnings = load(config)
        for warning in warnings:
            typer.secho(f"Warning: {warning}", fg=typer.colors.YELLOW, err=True)
        cluster = target(api_url, token, context, data_dir)
        image = built_image(app_config, config, image, registry, cluster, quiet=json) or image
        imaged = app_config if image is None else app_config.model_copy(update={
            "build": app_config.build.model_copy(update={"image": image})})
        for warning in unserved_statics(imaged, config):  # known once the image is
            typer.secho(f"Warning: {warning}", fg=typer.colors.YELLOW, err=True)
        options = DeployOptions(
            strategy=_strategy(strategy), image=image, ha=ha, detach=detach,
            wait_timeout=wait_timeout if wait_timeout is not None else _seconds(
                app_config.deploy.wait_timeout), smoke=smoke_time, drain=drain_time,
            who=getpass.getuser(), base_dir=str(config.resolve().parent))
        result = call_target(cluster,
                             lambda c: deploy(c, app_config, options, _reporter(json)))
    _finish(result, json)


def _seconds(text: str) -> float:
    return parse_duration(text, 300.0)


@friendly
def releases_command(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
                     api_url: ApiUrl = None, token: Token = None,
                     context: ContextName = None,
                     json: Json = False) -> None:
    """List the app's releases, newest first."""
    name = app_name(app, config)
    found = call(api_url, token, lambda c: c.releases(name), context=context)
    if json:
        show_json(found)
        return
    table(["VERSION", "STATUS", "STRATEGY", "IMAGE", "USER", "CREATED", "FAILURE"],
          [(f"v{r.version}", r.status, r.strategy, r.image, r.user, r.created_at,
            r.failure or "") for r in found])


@friendly
def rollback_command(
    version: Annotated[int | None, typer.Argument(
        help="Release to go back to (default: the last complete one before the current)")]
    = None,
    app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
    strategy: Annotated[str | None, typer.Option(help="Strategy (default: the release's)")]
    = None,
    wait_timeout: Annotated[float, typer.Option(help="Seconds per machine")] = 300.0,
    smoke_time: SmokeTime = 10.0, drain_time: DrainTime = 2.0,
    api_url: ApiUrl = None, token: Token = None,
    context: ContextName = None, json: DeployJson = False,
) -> None:
    """Redeploy an earlier release's config with the same deploy machinery: only machines
    not on that config are replaced."""

    async def work(client: MachinesClient) -> DeployResult:
        found = await client.releases(name)
        target = pick_release(found, version)
        if not json:
            console.print(f"Rolling {name} back to v{target.version}")
        options = DeployOptions(
            strategy=_strategy(strategy) or _strategy(target.strategy or None),
            image=target.image if target.image != "process" else None,
            wait_timeout=wait_timeout, smoke=smoke_time, drain=drain_time,
            who=getpass.getuser(), base_dir=target.base_dir,
            description=f"rollback to v{target.version}")
        return await deploy(client, AppConfig.model_validate(target.config), options,
                            _reporter(json))

    with _json_result_on_error(json):
        name = app_name(app, config)
        result = call(api_url, token, work, context=context)
    _finish(result, json)


def pick_release(found: list[Release], version: int | None) -> Release:
    """The release asked for, or the newest complete one older than the newest release."""
    if version is not None:
        for release in found:
            if release.version == version:
                return release
        raise ValueError(f"no release v{version} (see `bodega releases`)")
    newest = max((r.version for r in found), default=0)
    earlier = [r for r in found if r.status == "complete" and r.version < newest]
    if not earlier:
        raise ValueError("no earlier complete release to roll back to")
    return max(earlier, key=lambda r: r.version)
