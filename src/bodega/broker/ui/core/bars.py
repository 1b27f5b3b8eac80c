"""The geometry of a capacity bar: one segment per machine, then reserved, then free.

A bar is drawn by the server as SVG (the template only writes out these
numbers), so its geometry is decided here and tested here: each segment's
width is its share of the total, segments are laid end to end with no gap
and no overlap, and the bar is exactly ``width`` long. Edges are rounded from
the running sum, not widths one by one, so rounding never accumulates.

When the parts add up to more than the total (a machine row that arrived
before its worker's republished capacity, for a moment), the bar is scaled to
what is drawn and says it is over: it never draws past its end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

BAR_WIDTH = 240.0  # the viewBox width; the SVG stretches to its box
PLACES = 3


@dataclass(frozen=True)
class Part:
    """Something that takes room on a bar: a machine, or the machines of one state."""

    key: str  # the machine id (or the state, for a region's aggregate)
    label: str
    state: str  # the machine state colours it
    amount: int


@dataclass(frozen=True)
class Segment:
    key: str
    label: str
    kind: str  # a machine state, "reserved" or "free"
    amount: int
    x: float
    width: float


@dataclass(frozen=True)
class Bar:
    total: int
    allocated: int  # held by the parts
    reserved: int
    free: int
    over: bool  # the parts and reservations add up to more than the total
    segments: tuple[Segment, ...]
    width: float = BAR_WIDTH

    @property
    def used_share(self) -> float:
        drawn = max(self.total, self.allocated + self.reserved)
        return 0.0 if drawn <= 0 else (self.allocated + self.reserved) / drawn


def bar(total: int, parts: Sequence[Part], reserved: int = 0,
        width: float = BAR_WIDTH) -> Bar:
    """Lay ``parts`` (in the order given), then ``reserved``, then what is free."""
    amounts = [max(0, p.amount) for p in parts]
    allocated = sum(amounts)
    reserved = max(0, reserved)
    drawn = max(total, allocated + reserved)
    free = max(0, total - allocated - reserved)
    pieces = [(p.key, p.label, p.state, a) for p, a in zip(parts, amounts, strict=True) if a]
    if reserved:
        pieces.append(("reserved", "reserved (not yet claimed)", "reserved", reserved))
    if free:
        pieces.append(("free", "free", "free", free))
    segments = []
    running = 0
    for key, label, kind, amount in pieces:
        left = _edge(running, drawn, width)
        running += amount
        segments.append(Segment(key, label, kind, amount, left,
                                round(_edge(running, drawn, width) - left, PLACES)))
    return Bar(total=max(0, total), allocated=allocated, reserved=reserved, free=free,
               over=allocated + reserved > total, segments=tuple(segments), width=width)


def _edge(amount: int, drawn: int, width: float) -> float:
    return 0.0 if drawn <= 0 else round(amount * width / drawn, PLACES)
