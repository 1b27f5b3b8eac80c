"""``bodega logs``: an app's (or one machine's) logs from the broker, optionally followed."""

from __future__ import annotations

import asyncio
import json as jsonlib
from typing import Annotated

import aiohttp
import typer

from bodega.cli.errors import friendly
from bodega.cli.session import DEFAULT_API, ApiUrl, App, Json, Token, default_token_file
from bodega.model.errors import Unavailable, from_wire
from bodega.wire.logs import LogLine
from bodega.wire.machines_client import MachinesClient


def render(line: LogLine) -> str:
    return f"{line.timestamp} app[{line.machine_id}] {line.region} [{line.stream}] {line.message}"


async def stream(client: MachinesClient, app: str, params: dict[str, str], json: bool) -> None:
    async with client.http.get(
            f"{client.base_url}/v1/apps/{app}/logs", params=params, headers=client.headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)) as answer:
        if answer.status != 200:
            data = await answer.read()
            try:
                body = jsonlib.loads(data)
            except ValueError:
                body = {"error": data[:200].decode(errors="replace")}
            raise from_wire(answer.status, body)
        async for raw in answer.content:
            if not raw.strip():
                continue
            if json:
                typer.echo(raw.decode().rstrip("\n"))
            else:
                typer.echo(render(LogLine.model_validate_json(raw)))


@friendly
def logs(app: App,
         machine: Annotated[str | None, typer.Option("--machine", help="Only this machine")
                            ] = None,
         region: Annotated[str | None, typer.Option("--region", "-r", help="Only this region")
                           ] = None,
         follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming")] = False,
         since: Annotated[str | None, typer.Option(
             help="An RFC 3339 time or a duration back from now (5m)")] = None,
         limit: Annotated[int, typer.Option(help="At most this many past lines")] = 100,
         api_url: ApiUrl = DEFAULT_API, token: Token = None, json: Json = False) -> None:
    """Show an app's logs (NDJSON lines with --json)."""
    token = token or default_token_file()
    if not token:
        raise ValueError("no API token: pass --token or set BODEGA_API_TOKEN")
    params = {k: v for k, v in (("machine", machine), ("region", region), ("since", since),
                                ("limit", str(limit)), ("follow", "true" if follow else None))
              if v}

    async def run() -> None:
        async with MachinesClient(api_url, token) as client:
            await stream(client, app, params, json)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass
    except aiohttp.ClientError as exc:
        raise Unavailable(f"the API at {api_url}: {exc.__class__.__name__} {exc}") from exc
