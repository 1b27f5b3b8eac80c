"""Which versions of each origin a node has: the bookkeeping anti-entropy runs on.

Every write a node makes gets the next number of that node's own counter
(its *version*), whatever the table. A replica records, per origin, the set
of versions it has *seen*: applied, or found superseded by a newer row, or
vouched for by a peer during a sync. It is kept as Corrosion keeps it: a
``top`` (the highest version known to exist) and the *gaps* below it::

    top = 9, gaps = ((3, 4), (7, 7))    seen: 1 2 . . 5 6 . 8 9

A broadcast of version 12 to that replica makes ``top`` 12 and opens the
gap (10, 11); a notice that version 12 exists without its row opens
(10, 12). Gaps are what sync fetches, and a replica whose gaps outlive a look of its
pacer syncs sooner (``peers.GapWatch``).

``need(theirs, mine)`` is the whole anti-entropy decision: the versions one
side has seen and the other has not. It is pure, so it is property-tested
against plain sets.

Seen versions are a promise: every write of that origin with a seen version
is applied here or dominated by a newer row. A version never becomes seen
by mistake; forgetting one (merging gaps when there are too many) only costs
a fetch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Span = tuple[int, int]  # inclusive: (lo, hi) with 1 <= lo <= hi
MAX_GAPS = 64  # beyond this, the two closest gaps merge (forgetting what lay between)


@dataclass(frozen=True)
class Known:
    top: int = 0
    gaps: tuple[Span, ...] = ()  # sorted, disjoint, non-adjacent, all within [1, top]

    def __post_init__(self) -> None:
        if self.top < 0:
            raise ValueError("top must be >= 0")
        prev_hi = -1
        for lo, hi in self.gaps:
            if not 1 <= lo <= hi <= self.top or lo <= prev_hi + 1:
                raise ValueError(f"bad gaps {self.gaps} under top {self.top}")
            prev_hi = hi
        if len(self.gaps) > MAX_GAPS:
            raise ValueError(f"more than {MAX_GAPS} gaps")

    # ── reading ──────────────────────────────────────────────────────────────

    @property
    def missing(self) -> int:
        """How many versions below ``top`` are not seen."""
        return sum(hi - lo + 1 for lo, hi in self.gaps)

    def spans(self) -> list[Span]:
        """The seen versions as sorted inclusive spans."""
        out: list[Span] = []
        start = 1
        for lo, hi in self.gaps:
            if lo > start:
                out.append((start, lo - 1))
            start = hi + 1
        if start <= self.top:
            out.append((start, self.top))
        return out

    def __contains__(self, version: int) -> bool:
        if not 1 <= version <= self.top:
            return False
        return not any(lo <= version <= hi for lo, hi in self.gaps)

    def covers(self, lo: int, hi: int) -> bool:
        """Every version in [lo, hi] is seen."""
        if lo > hi:
            return True
        if lo < 1 or hi > self.top:
            return False
        return not any(g_lo <= hi and lo <= g_hi for g_lo, g_hi in self.gaps)

    # ── learning ─────────────────────────────────────────────────────────────

    def add(self, version: int) -> Known:
        return self.add_span(version, version)

    def add_span(self, lo: int, hi: int) -> Known:
        """These versions are now seen."""
        if lo < 1 or hi < lo:
            raise ValueError(f"bad span ({lo}, {hi})")
        gaps: list[Span] = []
        for g_lo, g_hi in self.gaps:
            if g_hi < lo or g_lo > hi:
                gaps.append((g_lo, g_hi))
                continue
            if g_lo < lo:
                gaps.append((g_lo, lo - 1))
            if g_hi > hi:
                gaps.append((hi + 1, g_hi))
        if lo > self.top + 1:
            gaps.append((self.top + 1, lo - 1))
        return _bounded(max(self.top, hi), gaps)

    def expect(self, version: int) -> Known:
        """``version`` exists (a notice said so) but is not seen yet."""
        if version <= self.top:
            return self
        return _bounded(version, [*self.gaps, (self.top + 1, version)])

    def add_spans(self, spans: Iterable[Span]) -> Known:
        known = self
        for lo, hi in spans:
            known = known.add_span(lo, hi)
        return known

    # ── wire ─────────────────────────────────────────────────────────────────

    def to_json(self) -> list[object]:
        return [self.top, [list(g) for g in self.gaps]] if self.gaps else [self.top]

    @classmethod
    def from_json(cls, value: object) -> Known:
        """Parse ``[top]`` or ``[top, [[lo, hi], ...]]``; ValueError on anything else."""
        if not isinstance(value, list) or not 1 <= len(value) <= 2:
            raise ValueError("known is [top] or [top, gaps]")
        top = _int(value[0])
        gaps: list[Span] = []
        if len(value) == 2:
            if not isinstance(value[1], list):
                raise ValueError("gaps must be an array")
            for gap in value[1]:
                if not isinstance(gap, list) or len(gap) != 2:
                    raise ValueError("a gap is [lo, hi]")
                gaps.append((_int(gap[0]), _int(gap[1])))
        return cls(top, tuple(gaps))


EMPTY = Known()


def need(theirs: Known, mine: Known) -> list[Span]:
    """Versions ``mine`` has seen and ``theirs`` has not, as sorted inclusive spans."""
    out: list[Span] = []
    unseen = [*theirs.gaps, (theirs.top + 1, max(mine.top, theirs.top + 1))]
    for m_lo, m_hi in mine.spans():
        for u_lo, u_hi in unseen:
            lo, hi = max(m_lo, u_lo), min(m_hi, u_hi)
            if lo > hi:
                continue
            if out and out[-1][1] + 1 == lo:
                out[-1] = (out[-1][0], hi)
            else:
                out.append((lo, hi))
    return out


def _bounded(top: int, gaps: list[Span]) -> Known:
    gaps.sort()
    merged: list[Span] = []
    for lo, hi in gaps:
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    while len(merged) > MAX_GAPS:
        # Merge the two gaps with the fewest seen versions between them: forgetting
        # those few is safe (they are fetched again) and keeps the record bounded.
        i = min(range(len(merged) - 1), key=lambda j: merged[j + 1][0] - merged[j][1])
        merged[i:i + 2] = [(merged[i][0], merged[i + 1][1])]
    return Known(top, tuple(merged))


def _int(value: object) -> int:
    if type(value) is not int or not 0 <= value < 2**62:
        raise ValueError("versions are non-negative integers")
    return value
