"""A job's status shows the last lines its tasks printed: the tail of their output."""

from __future__ import annotations

from bodega.jobs.tail import LINE_CHARS, TAIL_BYTES, tail


def test_the_last_lines_are_kept_with_an_unfinished_last_line() -> None:
    assert tail(b"one\ntwo\nthree\n", 2) == ["two", "three"]
    assert tail(b"one\ntwo\nthree", 2) == ["two", "three"]
    assert tail(b"one\n", 10) == ["one"]
    assert tail(b"one\r\ntwo\r\n", 5) == ["one", "two"]


def test_none_asked_or_nothing_printed_is_no_line() -> None:
    assert tail(b"one\ntwo\n", 0) == []
    assert tail(b"", 10) == []


def test_bytes_that_are_not_utf8_are_replaced_not_refused() -> None:
    assert tail(b"ok \xff\xfe\n", 1) == ["ok \ufffd\ufffd"]


def test_a_long_line_is_cut_and_a_huge_output_costs_only_its_end() -> None:
    [line] = tail(b"x" * (LINE_CHARS + 50) + b"\n", 1)
    assert len(line) == LINE_CHARS
    assert line.endswith("…")
    huge = b"".join(b"line %d\n" % n for n in range(200_000))
    assert len(huge) > TAIL_BYTES
    assert tail(huge, 3) == ["line 199997", "line 199998", "line 199999"]
    # The first line of the look is cut where the look began: never shown as a whole line.
    everything = tail(huge, 100_000)
    assert everything[0].startswith("line ")
    assert int(everything[0].split()[1]) + len(everything) - 1 == 199_999
