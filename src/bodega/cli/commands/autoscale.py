"""``bodega autoscale``: set an app's bounds and target, show what its evaluator last
decided and why, or turn it off (docs/metrics.md, "Autoscaler")."""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, show_json
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.model.duration import parse_duration
from bodega.wire.public.autoscale import Autoscale, SetAutoscale

autoscale = typer.Typer(help="Scale an app's machines on its load: bounds and a target.",
                        no_args_is_help=True)


def _path(app: str) -> str:
    return f"/v1/apps/{app}/autoscale"


@autoscale.command("set")
@friendly
def set_(min_: Annotated[int, typer.Option("--min", help="Never fewer machines serving")],
         max_: Annotated[int, typer.Option("--max", help="Never more machines serving")],
         concurrency: Annotated[float | None, typer.Option(
             help="Sessions per machine: wanted = ceil(sessions / this)")] = None,
         expr: Annotated[str | None, typer.Option(
             help="A PromQL expression whose value is the wanted count")] = None,
         scale_in_after: Annotated[str, typer.Option(
             help="How long fewer must be wanted before machines are stopped")] = "30s",
         app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
         json: Json = False) -> None:
    """Autoscale the app between --min and --max on --concurrency or --expr."""
    app = app_name(app, config)
    try:
        body = SetAutoscale(min=min_, max=max_, concurrency=concurrency, expr=expr,
                            scale_in_after=parse_duration(scale_in_after, 30.0))
    except ValidationError as exc:
        raise typer.BadParameter("; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'setting'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors())) from None
    except ValueError as exc:  # the duration
        raise typer.BadParameter(f"--scale-in-after: {exc}") from None
    found: Autoscale = call(api_url, token, lambda c: c.answer(
        Autoscale, "PUT", _path(app), json=body.model_dump(exclude_none=True)), context=context)
    if json:
        show_json(found)
        return
    typer.echo(f"Autoscaling {app}: {_target(found)}")


@autoscale.command("show")
@friendly
def show(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
         json: Json = False) -> None:
    """The app's setting, who evaluates it, and what it decided last and why."""
    app = app_name(app, config)
    found: Autoscale = call(api_url, token, lambda c: c.answer(Autoscale, "GET", _path(app)),
                            context=context)
    if json:
        show_json(found)
        return
    for line in describe(found):
        typer.echo(line)


@autoscale.command("off")
@friendly
def off(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
        api_url: ApiUrl = None, token: Token = None, context: ContextName = None) -> None:
    """Stop autoscaling the app (its machines stay as they are)."""
    app = app_name(app, config)
    call(api_url, token, lambda c: c.request("DELETE", _path(app)), context=context)
    typer.echo(f"Autoscaling of {app} is off; its machines stay as they are")


def _target(found: Autoscale) -> str:
    s = found.setting
    target = (f"{s.concurrency:g} sessions a machine" if s.concurrency is not None
              else f"expression {s.expr}")
    return f"{s.min} to {s.max} machines on {target}, scale in after {s.scale_in_after:g} s"


def describe(found: Autoscale) -> list[str]:
    lines = [f"{'App:':<11}{found.app}", f"{'Setting:':<11}{_target(found)}",
             f"{'Evaluator:':<11}{found.evaluator or '(none yet)'}"]
    d = found.decision
    if d is None:
        return [*lines, f"{'Decision:':<11}(none yet)"]
    acts = [f"{label} {', '.join(ids)}" for label, ids in
            (("start", d.start), ("uncordon", d.uncordon), ("cordon", d.cordon),
             ("stop", d.stop)) if ids]
    if d.create:
        acts.append(f"create {d.create}")
    lines += [f"{'Wanted:':<11}{d.wanted} ({d.serving} serving)",
              f"{'Figure:':<11}{d.figure}", f"{'Why:':<11}{d.reason}",
              f"{'Did:':<11}{'; '.join(acts) or 'nothing'}"]
    if found.draining:
        lines.append(f"{'Draining:':<11}{', '.join(found.draining)}")
    if found.error:
        lines.append(f"{'Error:':<11}{found.error}")
    return lines
