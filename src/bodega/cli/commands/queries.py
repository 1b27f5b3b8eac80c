"""``bodega query`` and ``bodega watch``: SQL on the registry, answered once or followed.

Both post a statement to the API (``/v1/queries``, ``/v1/subscriptions``; the
broker hands them to its host's registry agent) and read the NDJSON answer
(``wire/public/queries.py``) as it comes. ``query`` prints the rows as a table (with
``--json``, one object per row); ``watch`` prints the rows, then one line per
change until Ctrl-C, and says how to resume where it stopped (``--id ID --from
N``). A refusal, or an answer cut at a bound, is one ``Error:`` line.
"""

from __future__ import annotations

import json as jsonlib
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated

import typer

from bodega.cli.session.api import ApiUrl, ContextName, Token, call, table
from bodega.cli.session.errors import fail, friendly
from bodega.model.errors import BodegaError, Unavailable, Unreachable, from_wire
from bodega.wire.public.machines_client import MachinesClient
from bodega.wire.public.queries import (
    QUERY_ID_HEADER,
    Change,
    Columns,
    EndOfQuery,
    Event,
    Failure,
    Row,
    Statement,
    Value,
    as_object,
    read_event,
)
from bodega.wire.transport.seam import NoAnswer, NotConnected, lines

CONNECT_TIMEOUT = 10.0  # a followed answer has no bound on the whole call, only on connecting
QUERY_TIMEOUT = 120.0  # a query's answer (the server cuts a query at its own time limit)

Sql = Annotated[str, typer.Argument(
    help="One SELECT on the registry's tables: machines, workers, volumes, apps, releases, "
         "... (docs/registry.md)", show_default=False)]
Params = Annotated[list[str] | None, typer.Option(
    "--param", "-p", help="A value for the statement's next ? (sent as text); repeat it")]


class StreamEnded(BodegaError):
    """The answer stopped before it said it was done (the connection, or the server, went)."""

    http_status = 503
    status = "unavailable"


@dataclass
class Followed:
    """Where a watch is: its subscription, its columns, the last change it printed."""
    sub: str | None = None
    columns: list[str] = field(default_factory=list)
    change_id: int | None = None

    def resume_line(self) -> str | None:
        if self.sub is None or self.change_id is None:
            return None
        return (f"resume with: bodega watch --id {self.sub} --from {self.change_id}")


async def events(client: MachinesClient, method: str, path: str, body: Statement | None,
                 seen: Followed | None = None, *,
                 params: dict[str, str] | None = None,
                 timeout: float | None = None) -> AsyncIterator[Event]:
    """The answer's events, as they come; an error answer raises its ``BodegaError``."""
    try:
        call = client.outgoing(
            method, path, params=params, timeout=timeout,
            headers={"content-type": "application/json"} if body is not None else None,
            body=None if body is None else jsonlib.dumps(body.to_json()).encode())
        async with client.transport.stream(replace(call, connect_timeout=CONNECT_TIMEOUT)
                                           ) as answer:
            if answer.status != 200:
                data = b"".join([chunk async for chunk in answer.chunks])
                try:
                    error = jsonlib.loads(data)
                except ValueError:
                    error = {"error": data[:200].decode(errors="replace")}
                raise from_wire(answer.status, error)
            if seen is not None:
                seen.sub = answer.headers.get(QUERY_ID_HEADER, seen.sub)
            async for raw in lines(answer.chunks):
                if raw.strip():
                    yield read_event(raw)
    except NotConnected as exc:
        raise Unreachable(f"the API at {client.base_url} unreachable ({exc.reason})",
                          url=client.base_url, reason=exc.reason) from exc
    except NoAnswer as exc:
        raise Unavailable(f"the API at {client.base_url}: {exc}") from exc


def _statement(sql: str, params: Sequence[str] | None) -> Statement:
    if not sql.strip():
        raise ValueError("the statement is empty")
    return Statement(sql=sql, params=list(params or []))


def _show(columns: Sequence[str], rows: Sequence[Sequence[Value]]) -> None:
    if columns:
        table(list(columns), [["NULL" if v is None else v for v in row] for row in rows])


# ── bodega query ─────────────────────────────────────────────────────────────────────


@friendly
def query_command(sql: Sql, param: Params = None, api_url: ApiUrl = None, token: Token = None,
                  context: ContextName = None,
                  json: Annotated[bool, typer.Option(
                      "--json", help="One JSON object per row (NDJSON)")] = False) -> None:
    """Run a read-only SQL query on the registry (the cluster's view)."""
    asked = _statement(sql, param)

    async def work(client: MachinesClient) -> None:
        columns: list[str] = []
        rows: list[list[Value]] = []
        async for event in events(client, "POST", "/v1/queries", asked,
                                  timeout=QUERY_TIMEOUT):
            if isinstance(event, Columns):
                columns = event.columns
            elif isinstance(event, Row):
                if json:
                    typer.echo(jsonlib.dumps(as_object(columns, event.values)))
                else:
                    rows.append(event.values)
            elif isinstance(event, Failure | EndOfQuery):
                if not json:
                    _show(columns, rows)
                if isinstance(event, Failure):
                    raise BodegaError(event.error)
                return
        raise StreamEnded("the answer ended before the end of the query")

    call(api_url, token, work, context=context)


# ── bodega watch ─────────────────────────────────────────────────────────────────────


def change_text(change: Change, columns: Sequence[str]) -> str:
    """``#7 update row 2: id=m1 state=stopped`` (values alone when the columns are unknown)."""
    if columns:
        shown = " ".join(f"{c}={_cell(v)}" for c, v in zip(columns, change.values, strict=False))
    else:
        shown = "  ".join(_cell(v) for v in change.values)
    return f"#{change.change_id} {change.kind} row {change.number}: {shown}"


def _cell(value: Value) -> str:
    return "NULL" if value is None else str(value)


@friendly
def watch_command(sql: Annotated[str | None, typer.Argument(
                      help="One SELECT on the registry's tables (leave out with --id)",
                      show_default=False)] = None,
                  param: Params = None,
                  sub: Annotated[str | None, typer.Option(
                      "--id", help="Resume this subscription instead of making one")] = None,
                  from_change: Annotated[int | None, typer.Option(
                      "--from", min=0, help="With --id: print the changes after this one, "
                      "then the live ones")] = None,
                  api_url: ApiUrl = None, token: Token = None, context: ContextName = None,
                  json: Annotated[bool, typer.Option(
                      "--json", help="The API's NDJSON lines as they come")] = False) -> None:
    """Print a SQL query's rows, then each change to them, until Ctrl-C."""
    if sub is None and from_change is not None:
        fail("--from resumes a subscription: give its --id too")
    if (sub is None) == (sql is None):
        fail("give a SQL statement to watch, or --id to resume a subscription")
    where = Followed(sub=sub, change_id=from_change)
    body = None if sql is None else _statement(sql, param)
    query = None if from_change is None else {"from": str(from_change)}
    method, path = ("POST", "/v1/subscriptions") if sub is None else \
        ("GET", f"/v1/subscriptions/{sub}")

    async def work(client: MachinesClient) -> None:
        rows: list[list[Value]] = []
        async for event in events(client, method, path, body, where, params=query):
            if json and not isinstance(event, Failure):
                typer.echo(event.model_dump_json(exclude_none=True))
            if isinstance(event, Columns):
                where.columns = event.columns
            elif isinstance(event, Row):
                rows.append(event.values)
            elif isinstance(event, EndOfQuery):
                where.change_id = event.eoq.change_id
                if not json:
                    _show(where.columns, rows)
                    sys.stdout.flush()  # piped, the rows are not kept back until the first change
                    typer.echo(f"subscription {where.sub}, at change {where.change_id}; "
                               "changes follow (Ctrl-C ends)", err=True)
            elif isinstance(event, Change):
                where.change_id = event.change_id
                if not json:
                    typer.echo(change_text(event, where.columns))
            else:
                raise BodegaError(_with_resume(event.error, where))
        raise StreamEnded(_with_resume("the subscription's stream ended (was the agent "
                                       "stopped?)", where))

    try:
        call(api_url, token, work, context=context)
    except KeyboardInterrupt:
        line = where.resume_line()
        if line:
            typer.echo(f"stopped at change {where.change_id}; {line}", err=True)
        sys.exit(0)


def _with_resume(message: str, where: Followed) -> str:
    line = where.resume_line()
    return f"{message}; {line}" if line and "subscribe again" not in message else message

