"""How long a failed task waits before it may run again: exponential, capped, jittered.

The n-th failed attempt waits ``base * 2**(n-1)`` seconds, at most ``cap``, of
which the second half is drawn at random ("equal jitter"): tasks that failed
together (a dependency down for all of them) come back spread over the window
instead of in one stampede, and none comes back sooner than half its delay.
Pure: the random draw ``u`` in [0, 1) is the caller's.
"""

from __future__ import annotations


def delay(failures: int, base: float, cap: float, u: float) -> float:
    """Seconds before the next attempt after ``failures`` failed ones (0 for none)."""
    if failures <= 0 or base <= 0:
        return 0.0
    full = min(cap, base * 2.0 ** min(failures - 1, 62))
    return full / 2 + full / 2 * min(max(u, 0.0), 1.0)
