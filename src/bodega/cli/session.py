"""What every API command shares: where the API is, the token, and how results are shown.

``--api-url`` (``BODEGA_API_URL``) defaults to the local cluster's broker;
``--token`` comes from ``BODEGA_API_TOKEN`` (or ``FLY_API_TOKEN``, so a shell
set up for flyctl works too). ``--json`` prints what the API answered,
for scripts; otherwise a table.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from bodega.wire.machines_client import MachinesClient

T = TypeVar("T")
DEFAULT_API = "http://127.0.0.1:4280"

ApiUrl = Annotated[str, typer.Option("--api-url", envvar="BODEGA_API_URL",
                                     help="The broker's Machines API")]
Token = Annotated[str | None, typer.Option("--token", envvar=["BODEGA_API_TOKEN", "FLY_API_TOKEN"],
                                           help="API token (printed by `bodega up`)",
                                           show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer")]
SmokeTime = Annotated[float, typer.Option(
    min=0, envvar="BODEGA_SMOKE_TIME",
    help="Seconds a new machine must run without exiting before its checks count "
         "(0: no smoke check)")]
DrainTime = Annotated[float, typer.Option(
    min=0, envvar="BODEGA_DRAIN_TIME",
    help="Seconds the proxy gets to finish a machine's requests before it is replaced")]
App = Annotated[str, typer.Option("--app", "-a", envvar="BODEGA_APP", help="App name")]

# Lines are never wrapped: piped to a file or a program, a line stays one line (rich
# would cut it at 80 columns there); a terminal folds long lines itself.
console = Console(soft_wrap=True)


def call(api_url: str, token: str | None,
         work: Callable[[MachinesClient], Awaitable[T]]) -> T:
    """Run ``work`` with a client for the API, and close it."""
    token = token or default_token_file()
    if not token:
        raise ValueError("no API token: pass --token or set BODEGA_API_TOKEN "
                         "(`bodega up` prints one)")

    async def run() -> T:
        async with MachinesClient(api_url, token) as client:
            return await work(client)

    return asyncio.run(run())


def show_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2))


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    """A table as wide as its cells: an id or a name is never cut to fit a narrow terminal
    (a user copies them), the lines are simply longer."""
    out = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for column in columns:
        out.add_column(column, no_wrap=True, overflow="ignore")
    for row in rows:
        out.add_row(*("" if v is None else str(v) for v in row))
    wide = Console(width=10_000)
    needed = Measurement.get(wide, wide.options, out).maximum
    Console(width=max(console.width, needed)).print(out)


def readable_time(value: Any) -> str:
    """An event's epoch milliseconds (or an RFC 3339 string) as a UTC time a person reads."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"
    return "" if value is None else str(value)


def env_pairs(values: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values or []:
        key, sep, val = value.partition("=")
        if not sep or not key:
            raise ValueError(f"--env takes NAME=VALUE, got {value!r}")
        out[key] = val
    return out


def default_token_file() -> str | None:
    """The token a local cluster started here wrote (``.bodega/api-token``), if any."""
    path = os.path.join(os.environ.get("BODEGA_DATA_DIR", ".bodega"), "api-token")
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except OSError:
        return None
