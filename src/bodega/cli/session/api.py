"""What every API command shares: which cluster, with which token, and how results are shown.

``--context`` (``BODEGA_CONTEXT``) names a cluster kept in the contexts file
(``bodega context``); ``--api-url`` (``BODEGA_API_URL``) and ``--token``
(``BODEGA_API_TOKEN``, or ``FLY_API_TOKEN`` so a shell set up for flyctl works
too) override it. ``core/target.py`` holds the precedence; ``call`` runs a command's
work with a client for the chosen API and turns a refused token or an API that
does not answer into one line that says which API and what to do. ``--json``
prints what the API answered, for scripts; otherwise a table.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from bodega.cli.session import context_store, plain_table
from bodega.cli.session.core.contexts import ContextError, normal_url
from bodega.cli.session.core.target import (
    DEFAULT_API as DEFAULT_API,  # where nothing else says to go
)
from bodega.cli.session.core.target import Given, Holder, Target, refused_line, resolve
from bodega.model.errors import Unauthorized, Unreachable

if TYPE_CHECKING:
    from rich.console import Console

    from bodega.wire.public.machines_client import MachinesClient

    console: Console  # made on first use (__getattr__): a command that prints a line needs no rich

T = TypeVar("T")

ApiUrl = Annotated[str | None, typer.Option(
    "--api-url", envvar="BODEGA_API_URL", show_default=False,
    help="The broker's Machines API (default: the context's)")]
Token = Annotated[str | None, typer.Option(
    "--token", envvar=["BODEGA_API_TOKEN", "FLY_API_TOKEN"], show_default=False,
    help="API token (default: the one kept with the API URL)")]
ContextName = Annotated[str | None, typer.Option(
    "--context", envvar="BODEGA_CONTEXT", show_default=False,
    help="The cluster, by name (see `bodega context list`; default: the current context)")]
Json = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer")]
SmokeTime = Annotated[float, typer.Option(
    min=0, envvar="BODEGA_SMOKE_TIME",
    help="Seconds a new machine must run without exiting before its checks count "
         "(0: no smoke check)")]
DrainTime = Annotated[float, typer.Option(
    min=0, envvar="BODEGA_DRAIN_TIME",
    help="Seconds the proxy gets to finish a machine's requests before it is replaced")]
App = Annotated[str, typer.Option("--app", "-a", envvar="BODEGA_APP", help="App name")]


def shared_console() -> Console:
    """The console commands print to, made on first use (``session.console``)."""
    made: Console | None = globals().get("console")
    if made is None:
        from rich.console import Console

        # Lines are never wrapped: piped to a file or a program, a line stays one line (rich
        # would cut it at 80 columns there); a terminal folds long lines itself.
        made = globals()["console"] = Console(soft_wrap=True)
    return made


def __getattr__(name: str) -> Any:
    if name == "console":
        return shared_console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _source(value: str | None, flag: str, envvars: Sequence[str]) -> str:
    """Which environment variable gave a parameter its value, else its flag, for messages."""
    return next((name for name in envvars if value and os.environ.get(name) == value), flag)


def target(api_url: str | None, token: str | None, context: str | None = None,
           data_dir: str | None = None) -> Target:
    """The cluster a command talks to, by the precedence in ``core/target.py``."""
    given = Given(api_url or None, token or None, context or None,
                  _source(api_url, "--api-url", ["BODEGA_API_URL"]),
                  _source(token, "--token", ["BODEGA_API_TOKEN", "FLY_API_TOKEN"]),
                  _source(context, "--context", ["BODEGA_CONTEXT"]))
    data_dir = data_dir or os.environ.get("BODEGA_DATA_DIR") or ".bodega"
    contexts = context_store.load(context_store.config_path(os.environ))
    return resolve(given, contexts, context_store.here_cluster(data_dir), context_store.shown,
                   data_dir)


def call(api_url: str | None, token: str | None,
         work: Callable[[MachinesClient], Awaitable[T]], *, context: str | None = None,
         data_dir: str | None = None) -> T:
    """Run ``work`` with a client for the chosen cluster's API, and close it."""
    return call_target(target(api_url, token, context, data_dir), work)


def call_target(chosen: Target, work: Callable[[MachinesClient], Awaitable[T]]) -> T:
    # Loaded only by commands that call the API. Their calls travel on asyncio's own
    # streams (StreamHttp), not aiohttp: importing aiohttp took longer than a command's work.
    from bodega.wire.public.machines_client import MachinesClient
    from bodega.wire.transport.stream_http import StreamHttp

    secret = token_of(chosen)

    async def run() -> T:
        async with MachinesClient(chosen.api_url, secret, transport=StreamHttp()) as client:
            return await work(client)

    try:
        return asyncio.run(run())
    except Unauthorized:
        raise ContextError(refused_line(chosen, secret, holders())) from None
    except Unreachable as err:
        if normal_url(err.url) != normal_url(chosen.api_url):  # not the API: someone else's
            raise
        raise ContextError(f"cannot reach the bodega API at {chosen.api_url} ({err.reason}); "
                           "is `bodega up` running?") from None


def token_of(chosen: Target) -> str:
    if chosen.token:
        return chosen.token
    found = context_store.read_token(chosen.token_file) if chosen.token_file else None
    if not found:
        raise ContextError(f"no token in {chosen.token_file}: the file is missing or empty "
                           "(was that cluster's data dir removed? see `bodega context list`)")
    return found


def holders() -> list[Holder]:
    """Every token kept here (contexts, the data dir's cluster), read for a 401's message."""
    found = []
    for context in context_store.load(context_store.config_path(os.environ)).entries:
        token = context.token or (context_store.read_token(context.token_file)
                                  if context.token_file else None)
        found.append(Holder(f"context '{context.name}'", context.api_url, token,
                            f"--context {context.name}"))
    data_dir = os.environ.get("BODEGA_DATA_DIR") or ".bodega"
    here = context_store.here_cluster(data_dir)
    if here is not None:
        found.append(Holder(f"the cluster in {data_dir}", here.api_url,
                            context_store.read_token(here.token_file)))
    return found


def show_json(data: Any) -> None:
    """An answer as JSON for scripts: a model (or a list of them) as the API sent it."""
    typer.echo(json.dumps(plain(data), indent=2))


def plain(data: Any) -> Any:
    """Answer models as JSON values (unset fields left out, as on the wire); anything else
    as it is."""
    if hasattr(data, "model_dump"):  # a pydantic model, told apart without importing pydantic
        return data.model_dump(mode="json", exclude_none=True)
    if isinstance(data, list):
        return [plain(item) for item in data]
    return data


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str | None = None) -> None:
    """A table as wide as its cells: an id or a name is never cut to fit a narrow terminal
    or a pipe (a user copies them, a script reads them), the lines are simply longer."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    text = plain_table.drawn(columns, cells) if title is None else None
    if text is None:
        rich_table(columns, cells, title)
    else:
        sys.stdout.write(text)


def rich_table(columns: Sequence[str], rows: Sequence[Sequence[str]],
               title: str | None = None) -> None:
    """``table`` drawn by rich, as any table whose cells are not plain text is."""
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table

    out = Table(title=title, header_style="bold", box=None, pad_edge=False)
    for column in columns:
        out.add_column(column, no_wrap=True, overflow="ignore")
    for row in rows:
        out.add_row(*row)
    wide = Console(width=10_000)
    needed = Measurement.get(wide, wide.options, out).maximum
    Console(width=max(shared_console().width, needed)).print(out)


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
