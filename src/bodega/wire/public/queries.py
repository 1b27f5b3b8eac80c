"""The registry's query API on the wire: a statement in, NDJSON events out.

Corrosion's shapes, so a client of its ``/v1/queries`` and ``/v1/subscriptions``
reads bodega's the same way. A statement is a JSON string (the SQL), ``[sql,
[params...]]`` or ``[sql, {name: value}]``; ``{"query": sql, "params": ...}`` is
read too. An answer is one JSON object per line:

    {"columns": ["id", "state"]}                  the result's column names
    {"row": [1, ["m1", "started"]]}               one per row: its number, its values
    {"eoq": {"time": 0.0012}}                     end of the rows (subscriptions: "change_id")
    {"change": ["update", 1, ["m1", "stopped"], 4]}   subscriptions: kind, row, values, change id
    {"error": "..."}                              the answer stops here, and why

A value is JSON's: a string, a number or null; a blob is sent as its hex digits.
The server writes lines with the ``*_line`` functions (plain ``json.dumps``: a
result has thousands of rows); a client reads them with ``read_event``, into the
models below.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

MEDIA_TYPE = "application/x-ndjson"
QUERY_ID_HEADER = "corro-query-id"  # Corrosion's name: a subscription's id, to resume it
MAX_SQL = 64 * 1024  # characters of one statement

Value: TypeAlias = str | int | float | None
Params: TypeAlias = list[Value] | dict[str, Value]
ChangeKind = Literal["insert", "update", "delete"]


class Statement(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    sql: str
    params: Params = []

    def to_json(self) -> str | list[object]:
        """The statement as Corrosion's clients send it."""
        return [self.sql, self.params] if self.params else self.sql


class QueryBody(BaseModel):
    """The object form: ``{"query": sql, "params": [...]}``."""
    model_config = ConfigDict(extra="forbid")
    query: str
    params: Params = []


def statement(body: object) -> Statement:
    """The statement a request body holds; ValueError (one line) for anything else."""
    form = ('a statement is a JSON string (the SQL), [sql, [params...]], [sql, {name: value}] '
            'or {"query": sql, "params": [...]}')
    try:
        if isinstance(body, str):
            found = Statement(sql=body)
        elif isinstance(body, list) and len(body) == 2 and isinstance(body[0], str):
            found = Statement(sql=body[0], params=body[1])
        elif isinstance(body, dict):
            query = QueryBody.model_validate(body)
            found = Statement(sql=query.query, params=query.params)
        else:
            raise ValueError(form)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = str(problem.get("loc", ("",))[0])
        why = ("a list, or an object, of strings, numbers and nulls" if where == "params"
               else problem.get("msg", "invalid"))
        raise ValueError(f"{form}; {where}: {why}") from None
    if not found.sql.strip():
        raise ValueError("the statement is empty")
    if len(found.sql) > MAX_SQL:
        raise ValueError(f"the statement is over {MAX_SQL} characters")
    return found


# ── lines, as the server writes them ─────────────────────────────────────────────────


def value(raw: object) -> Value:
    """A SQLite value as JSON holds it: a blob as its hex digits; an infinite float (SQLite
    has them, JSON has not) as the text SQLite prints for it."""
    if isinstance(raw, bytes):
        return raw.hex()
    if isinstance(raw, float) and not math.isfinite(raw):
        return "Inf" if raw > 0 else "-Inf"
    if raw is None or isinstance(raw, str | int | float):
        return raw
    return str(raw)


def _line(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def columns_line(columns: Sequence[str]) -> bytes:
    return _line({"columns": list(columns)})


def row_line(number: int, values: Sequence[Value]) -> bytes:
    return _line({"row": [number, list(values)]})


def eoq_line(seconds: float, change_id: int | None = None) -> bytes:
    eoq: dict[str, float | int] = {"time": round(seconds, 6)}
    if change_id is not None:
        eoq["change_id"] = change_id
    return _line({"eoq": eoq})


def change_line(kind: ChangeKind, number: int, values: Sequence[Value], change_id: int) -> bytes:
    return _line({"change": [kind, number, list(values), change_id]})


def error_line(message: str) -> bytes:
    return _line({"error": message})


# ── events, as a client reads them ───────────────────────────────────────────────────


class Columns(BaseModel):
    model_config = ConfigDict(extra="forbid")
    columns: list[str]


class Row(BaseModel):
    model_config = ConfigDict(extra="forbid")
    row: tuple[int, list[Value]]

    @property
    def values(self) -> list[Value]:
        return self.row[1]


class EndOfRows(BaseModel):
    model_config = ConfigDict(extra="forbid")
    time: float
    change_id: int | None = None


class EndOfQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    eoq: EndOfRows


class Change(BaseModel):
    model_config = ConfigDict(extra="forbid")
    change: tuple[ChangeKind, int, list[Value], int]

    @property
    def kind(self) -> ChangeKind:
        return self.change[0]

    @property
    def number(self) -> int:
        return self.change[1]

    @property
    def values(self) -> list[Value]:
        return self.change[2]

    @property
    def change_id(self) -> int:
        return self.change[3]


class Failure(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: str


Event: TypeAlias = Columns | Row | EndOfQuery | Change | Failure


@cache
def _events() -> TypeAdapter[Event]:
    return TypeAdapter(Event)


def read_event(line: bytes | str) -> Event:
    """One line of an answer; ValueError for a line that is none of the events."""
    try:
        return _events().validate_json(line)
    except ValidationError:
        raise ValueError(f"not a query event: {str(line)[:120]}") from None


def as_object(columns: Sequence[str], values: Sequence[Value]) -> Mapping[str, Value]:
    """A row as ``{column: value}`` (a later column of a repeated name wins)."""
    return dict(zip(columns, values, strict=False))
