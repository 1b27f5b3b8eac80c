"""The query API's wire: the statement forms a client sends, and the NDJSON lines a server
writes read back into their events."""

from __future__ import annotations

import json
import re

import pytest

from bodega.wire.public.queries import (
    Change,
    Columns,
    EndOfQuery,
    Failure,
    Row,
    Statement,
    as_object,
    change_line,
    columns_line,
    eoq_line,
    error_line,
    read_event,
    row_line,
    statement,
    value,
)


def test_the_statement_forms() -> None:
    assert statement("SELECT 1") == Statement(sql="SELECT 1")
    assert statement(["SELECT ?", ["a", 1, 2.5, None]]) == Statement(
        sql="SELECT ?", params=["a", 1, 2.5, None])
    assert statement(["SELECT :id", {"id": "m1"}]) == Statement(sql="SELECT :id",
                                                                params={"id": "m1"})
    assert statement({"query": "SELECT ?", "params": ["x"]}) == Statement(sql="SELECT ?",
                                                                           params=["x"])
    assert Statement(sql="SELECT 1").to_json() == "SELECT 1"
    assert Statement(sql="SELECT ?", params=[1]).to_json() == ["SELECT ?", [1]]


@pytest.mark.parametrize(("body", "words"), [
    (42, "a statement is a JSON string"),
    (["SELECT 1"], "a statement is a JSON string"),
    (["SELECT ?", [["nested"]]], "params: a list, or an object, of strings, numbers and nulls"),
    ({"sql": "SELECT 1"}, "a statement is a JSON string"),
    ("   ", "the statement is empty"),
    ("SELECT " + "1" * 70_000, "over 65536 characters"),
])
def test_other_bodies_are_refused_in_a_line(body: object, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)) as refused:
        statement(body)
    assert "\n" not in str(refused.value)


def test_values_as_json_holds_them() -> None:
    assert [value(v) for v in (None, 1, 2.5, "x", b"\x01\xff", float("inf"),
                               float("-inf"))] == [None, 1, 2.5, "x", "01ff", "Inf", "-Inf"]


def test_lines_read_back_into_their_events() -> None:
    assert read_event(columns_line(["id", "state"])) == Columns(columns=["id", "state"])
    row = read_event(row_line(3, ["m1", None, 2.5]))
    assert isinstance(row, Row)
    assert row.values == ["m1", None, 2.5]
    end = read_event(eoq_line(0.00123456789, 7))
    assert isinstance(end, EndOfQuery)
    assert (end.eoq.time, end.eoq.change_id) == (0.001235, 7)
    assert json.loads(eoq_line(0.5)) == {"eoq": {"time": 0.5}}
    change = read_event(change_line("update", 2, ["m1", "stopped"], 9))
    assert isinstance(change, Change)
    assert (change.kind, change.number, change.values, change.change_id) == (
        "update", 2, ["m1", "stopped"], 9)
    assert read_event(error_line("cut")) == Failure(error="cut")
    assert json.loads(row_line(1, ["é"])) == {"row": [1, ["é"]]}
    with pytest.raises(ValueError, match="not a query event"):
        read_event(b'{"rows": []}')
    assert as_object(["id", "n"], ["m1", 1]) == {"id": "m1", "n": 1}
