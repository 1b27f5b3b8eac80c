"""Which broker evaluates an app: a lease in the view's ``autoscale_runs`` row, pure.

The holder writes the row at each evaluation with its ``beat`` one higher. Every other
broker notes, on its own monotonic clock, when it first saw the row's (holder, beat);
once that pair has not changed for the row's ``ttl`` seconds, the holder is taken to be
gone and the broker takes the lease by writing its own name. Nobody compares wall
clocks across hosts. Two brokers taking at once both write; the view keeps one write
(last writer wins, by its hybrid clock) and the other broker, seeing a holder not itself,
stands down. A taker does not act on the evaluation it takes in, only from its next one
(a few seconds later, when the view has settled on one holder), so two evaluators act
at once only if gossip takes longer than that.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from bodega.model.rows.autoscale import AutoscaleRunRow


class Verdict(StrEnum):
    HOLD = "hold"  # this broker holds it: evaluate
    TAKE = "take"  # nobody holds it (or its holder went quiet): write it, act next time
    WAIT = "wait"  # another broker holds it


@dataclass(frozen=True)
class Sighting:
    """What this broker last saw of another's lease, and since when (monotonic)."""

    holder: str
    beat: int
    since: float


def judge(run: AutoscaleRunRow | None, me: str, seen: Sighting | None,
          now: float) -> tuple[Verdict, Sighting | None, str]:
    """Whether ``me`` holds, takes or waits, what to remember of the lease, and why."""
    if run is None or not run.holder:
        return Verdict.TAKE, None, "no evaluator yet"
    if run.holder == me:
        return Verdict.HOLD, None, "held here"
    if seen is None or (seen.holder, seen.beat) != (run.holder, run.beat):
        return (Verdict.WAIT, Sighting(run.holder, run.beat, now),
                f"held by {run.holder} (beat {run.beat})")
    quiet = now - seen.since
    if quiet >= run.ttl:
        return (Verdict.TAKE, None,
                f"{run.holder}'s beat stayed at {run.beat} for {quiet:.1f} s (ttl {run.ttl:g} s)")
    return Verdict.WAIT, seen, f"held by {run.holder}, quiet for {quiet:.1f} s"
