"""Which of two answers for the same machine (or volume) is the newer: the broker keeps
that one.

A worker stamps every change of a row with ``updated_at`` (its own clock,
which only the owning worker writes), so between two docs of one machine
the later ``updated_at`` is the later state. The broker holds machines from two
sources that arrive in any order: its own reads of the worker after a
mutation, and rows replicated through the view. A doc older than the one
held must never replace it, or a client would see a state older than the
one it was just told (a destroyed machine listed as started).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from bodega.model.machine import Machine

UNKNOWN = float("-inf")


class Stamped(Protocol):
    """A row a worker stamps: a machine or a volume."""

    @property
    def updated_at(self) -> str | None: ...


def stamp(machine: Stamped | None) -> float:
    """``updated_at`` as seconds; a row without one (or with a bad one) is the oldest.

    Parsed rather than compared as text: RFC 3339 text drops a zero fraction
    (``...:05Z`` and ``...:05.000001Z``), which sorts the wrong way as a string.
    """
    if machine is None or not machine.updated_at:
        return UNKNOWN
    try:
        return datetime.fromisoformat(machine.updated_at.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return UNKNOWN


def replaces(candidate: Stamped, held: Stamped | None) -> bool:
    """Whether ``candidate`` may replace ``held`` (same id): not older. A tie is the same
    change seen twice, so either may stand; the newcomer does."""
    return held is None or stamp(candidate) >= stamp(held)


def newest(*machines: Machine | None) -> Machine | None:
    """The newest of some answers for one machine (the first of equals), or None if none."""
    best: Machine | None = None
    for machine in machines:
        if machine is not None and (best is None or stamp(machine) > stamp(best)):
            best = machine
    return best
