"""``bodega metrics -a APP``: a live top of an app's machines from the cluster's metrics store.

Each refresh asks ``/prometheus/<org>/api/v1/query`` (the app's org, with the
command's token) for every figure of ``core/metrics_top.py`` and lists the app's
machines beside them; ``--json`` (or ``--once``) answers once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json as jsonlib
from typing import TYPE_CHECKING, Annotated

import typer

from bodega.cli.commands.core.metrics_top import (
    COLUMNS,
    FIGURES,
    MachineFigures,
    cells,
    figures,
    queries,
)
from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call, table
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.wire.public.prometheus import QueryAnswer, query_path

if TYPE_CHECKING:
    from bodega.wire.public.machines_client import MachinesClient


async def snapshot(client: MachinesClient, app: str) -> tuple[str, list[MachineFigures]]:
    """The app's org and each of its machines' figures now."""
    org = (await client.app(app)).organization.slug or "personal"
    machines = await client.machines(app)
    asked = queries(app)

    async def one(name: str) -> dict[str, float | None]:
        answer = await client.answer(QueryAnswer, "GET", query_path(org),
                                     params={"query": asked[name]})
        return {s.metric.get("machine", ""): s.number() for s in answer.data.result}

    found = dict(zip(FIGURES, await asyncio.gather(*(one(n) for n in FIGURES)), strict=True))
    return org, figures([(m.id, m.region, m.state) for m in machines], found)


def _render(app: str, org: str, rows: list[MachineFigures]) -> object:
    from rich.table import Table

    out = Table(title=f"{app} ({org})", header_style="bold", box=None, pad_edge=False)
    for column in COLUMNS:
        out.add_column(column, no_wrap=True)
    for row in rows:
        out.add_row(*cells(row))
    return out


@friendly
def metrics(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
            api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
            json: Json = False,
            once: Annotated[bool, typer.Option("--once", help="Show the figures once")] = False,
            interval: Annotated[float, typer.Option(
                min=0.5, help="Seconds between refreshes")] = 2.0) -> None:
    """A live top of the app's machines: CPU %, memory, req/s and p95 latency."""
    name = app_name(app, config)
    if json or once:
        org, rows = call(api_url, token, lambda c: snapshot(c, name), context=context)
        if json:
            typer.echo(jsonlib.dumps({"app": name, "org": org,
                                      "machines": [r.to_json() for r in rows]}, indent=2))
        else:
            table(list(COLUMNS), [cells(r) for r in rows], title=f"{name} ({org})")
        return

    async def live(client: MachinesClient) -> None:
        from rich.live import Live

        org, rows = await snapshot(client, name)
        with Live(_render(name, org, rows), auto_refresh=False) as screen:  # type: ignore[arg-type]
            while True:
                await asyncio.sleep(interval)
                org, rows = await snapshot(client, name)
                screen.update(_render(name, org, rows), refresh=True)  # type: ignore[arg-type]

    with contextlib.suppress(KeyboardInterrupt):
        call(api_url, token, live, context=context)
