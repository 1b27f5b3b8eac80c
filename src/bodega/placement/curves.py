"""Desirability curves: how much a host is wanted at a given utilization.

A curve is a few ``(utilization, desirability)`` points, both in [0, 1],
linearly interpolated between them, the way the article describes flaps's
ranking. The default for cpu and memory prefers hosts that end up 30-80 %
used over idle ones (which we would rather keep free for big asks) and over
nearly full ones (noisy neighbours, no room to grow)::

    desirability
      1 |        ___________
        |       /           \\
    0.3 |______/             \\
    0.2 |                     \\__
        +------+-----------+---+--- utilization after placing
        0     0.3         0.8  1

Curves are configuration, parsed from ``"0:0.3,0.3:1,0.8:1,1:0.2"``.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import pairwise


@dataclass(frozen=True)
class Curve:
    points: tuple[tuple[float, float], ...]
    _xs: tuple[float, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.points) < 2:
            raise ValueError("a curve needs at least two points")
        xs = tuple(float(x) for x, _ in self.points)
        if xs[0] != 0.0 or xs[-1] != 1.0:
            raise ValueError("a curve's points must start at utilization 0 and end at 1")
        if any(b <= a for a, b in pairwise(xs)):
            raise ValueError("a curve's utilizations must strictly increase")
        if any(not 0.0 <= y <= 1.0 for _, y in self.points):
            raise ValueError("desirability must be between 0 and 1")
        object.__setattr__(self, "_xs", xs)

    def at(self, utilization: float) -> float:
        """The desirability at ``utilization`` (clamped to [0, 1])."""
        if utilization <= 0.0:
            return self.points[0][1]
        if utilization >= 1.0:
            return self.points[-1][1]
        i = bisect_right(self._xs, utilization)
        (x0, y0), (x1, y1) = self.points[i - 1], self.points[i]
        return y0 + (y1 - y0) * (utilization - x0) / (x1 - x0)

    @classmethod
    def parse(cls, text: str) -> Curve:
        """``"0:0.3,0.3:1,0.8:1,1:0.2"`` -> a curve; ValueError with the reason otherwise."""
        points = []
        for part in text.split(","):
            x, sep, y = part.strip().partition(":")
            if not sep:
                raise ValueError(f"curve point {part.strip()!r} is not utilization:desirability")
            try:
                points.append((float(x), float(y)))
            except ValueError:
                raise ValueError(f"curve point {part.strip()!r} is not two numbers") from None
        return cls(tuple(points))

    def describe(self) -> str:
        return ",".join(f"{x:g}:{y:g}" for x, y in self.points)


# Prefer 30-80 % used after placing; idle hosts are fine, nearly full ones are the last resort.
BALANCED = Curve(((0.0, 0.3), (0.3, 1.0), (0.8, 1.0), (1.0, 0.2)))
# Disk matters less and only near full.
ROOMY = Curve(((0.0, 0.8), (0.7, 1.0), (0.9, 0.8), (1.0, 0.2)))
