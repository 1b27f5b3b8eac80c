"""A streamed body read as lines (a subscription's rows, a log): each line whole, however
the bytes were cut."""

from __future__ import annotations

from collections.abc import AsyncIterator

from bodega.wire.transport.seam import lines


async def chunks(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def read(*parts: bytes) -> list[bytes]:
    return [line async for line in lines(chunks(*parts))]


async def test_lines_cut_anywhere_come_out_whole() -> None:
    assert await read(b'{"a"', b':1}\n{"b":2}\n', b"\n", b'{"c"', b":3}") == [
        b'{"a":1}', b'{"b":2}', b"", b'{"c":3}']


async def test_a_line_far_longer_than_a_chunk_is_one_line() -> None:
    row = b"x" * 300_000
    assert await read(*(row[i:i + 4096] for i in range(0, len(row), 4096)), b"\nend\n") == [
        row, b"end"]


async def test_carriage_returns_before_line_ends_are_dropped() -> None:
    assert await read(b"one\r\ntwo\r", b"\n") == [b"one", b"two"]
