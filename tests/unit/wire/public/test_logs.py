"""The log stream's pure parts: cutting bytes into lines, `since`, `limit`, choosing lines."""

from __future__ import annotations

import pytest

from bodega.model.errors import BadRequest
from bodega.wire.public.logs import MAX_LINE, LogLine, parse_limit, parse_since, select, split_lines


def line(ts: str, message: str) -> LogLine:
    return LogLine(timestamp=ts, app="a", machine_id="m", region="ams", instance_id="v",
                   stream="stdout", message=message)


def test_split_keeps_an_unfinished_line_for_later_and_cuts_endless_ones() -> None:
    lines, rest = split_lines(b"", b"one\r\ntwo\nthr")
    assert (lines, rest) == (["one", "two"], b"thr")
    assert split_lines(rest, b"ee\n") == (["three"], b"")
    long, rest = split_lines(b"", b"x" * (MAX_LINE + 5))
    assert (len(long), len(long[0]), rest) == (1, MAX_LINE, b"")
    assert split_lines(b"", b"\xff\n")[0] == ["\ufffd"]


def test_since_is_a_time_or_a_duration_back_from_now() -> None:
    assert parse_since("2026-01-01T00:00:10Z") == parse_since("2026-01-01T00:00:00Z") + 10  # type: ignore[operator]
    assert parse_since("5m", now=1000.0) == 700.0
    assert parse_since(None) is None
    with pytest.raises(BadRequest):
        parse_since("yesterday")


def test_limit_is_bounded_and_checked() -> None:
    assert parse_limit(None) == 100
    assert parse_limit("7") == 7
    for bad in ("0", "-1", "x", "100001"):
        with pytest.raises(BadRequest):
            parse_limit(bad)


def test_select_keeps_the_newest_lines_since_oldest_first() -> None:
    lines = [line("2026-01-01T00:00:03Z", "c"), line("2026-01-01T00:00:01Z", "a"),
             line("2026-01-01T00:00:02Z", "b"), line("2026-01-01T00:00:04Z", "d")]
    assert [x.message for x in select(lines, None, 3)] == ["b", "c", "d"]
    since = parse_since("2026-01-01T00:00:02Z")
    assert [x.message for x in select(lines, since, 10)] == ["b", "c", "d"]
