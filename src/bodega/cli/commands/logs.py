"""``bodega logs``: an app's (or one machine's) logs from the broker, optionally followed."""

from __future__ import annotations

import contextlib
import json as jsonlib
from dataclasses import replace
from typing import Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Json, Token, call
from bodega.cli.session.app_choice import DEFAULT_CONFIG, AppOption, ConfigPath, app_name
from bodega.cli.session.errors import friendly
from bodega.model.errors import Unavailable, Unreachable, from_wire
from bodega.wire.public.logs import LogLine
from bodega.wire.public.machines_client import MachinesClient
from bodega.wire.transport.seam import NoAnswer, NotConnected, lines

CONNECT_TIMEOUT = 10.0  # a follow has no bound on the whole call, only on connecting


def render(line: LogLine) -> str:
    return f"{line.timestamp} app[{line.machine_id}] {line.region} [{line.stream}] {line.message}"


async def stream(client: MachinesClient, app: str, params: dict[str, str], json: bool) -> None:
    try:
        await _stream(client, app, params, json)
    except NotConnected as exc:
        raise Unreachable(f"the API at {client.base_url} unreachable ({exc.reason})",
                          url=client.base_url, reason=exc.reason) from exc
    except NoAnswer as exc:
        raise Unavailable(f"the API at {client.base_url}: {exc}") from exc


async def _stream(client: MachinesClient, app: str, params: dict[str, str], json: bool) -> None:
    call = replace(client.outgoing("GET", f"/v1/apps/{app}/logs", params=params, timeout=None),
                   connect_timeout=CONNECT_TIMEOUT)
    async with client.transport.stream(call) as answer:
        if answer.status != 200:
            data = b"".join([chunk async for chunk in answer.chunks])
            try:
                body = jsonlib.loads(data)
            except ValueError:
                body = {"error": data[:200].decode(errors="replace")}
            raise from_wire(answer.status, body)
        async for raw in lines(answer.chunks):
            if not raw.strip():
                continue
            if json:
                typer.echo(raw.decode())
            else:
                typer.echo(render(LogLine.model_validate_json(raw)))


@friendly
def logs(app: AppOption = None, config: ConfigPath = DEFAULT_CONFIG,
         machine: Annotated[str | None, typer.Option("--machine", help="Only this machine")
                            ] = None,
         region: Annotated[str | None, typer.Option("--region", "-r", help="Only this region")
                           ] = None,
         follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming")] = False,
         since: Annotated[str | None, typer.Option(
             help="An RFC 3339 time or a duration back from now (5m)")] = None,
         limit: Annotated[int, typer.Option(help="At most this many past lines")] = 100,
         api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
         json: Json = False) -> None:
    """Show an app's logs (NDJSON lines with --json)."""
    app = app_name(app, config)
    params = {k: v for k, v in (("machine", machine), ("region", region), ("since", since),
                                ("limit", str(limit)), ("follow", "true" if follow else None))
              if v}
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a follow
        call(api_url, token, lambda client: stream(client, app, params, json), context=context)
