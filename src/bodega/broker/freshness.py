"""Which of two docs of the same machine or volume is the newer: the broker keeps that one.

A worker stamps every change of a row with ``updated_at`` (its own clock,
which only the owning worker writes), so between two docs of one machine
the later ``updated_at`` is the later state. The broker holds docs from two
sources that arrive in any order: its own reads of the worker after a
mutation, and rows replicated through the view. A doc older than the one
held must never replace it, or a client would see a state older than the
one it was just told (a destroyed machine listed as started).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

UNKNOWN = float("-inf")


def stamp(doc: dict[str, Any] | None) -> float:
    """``updated_at`` as seconds; docs without one (or with a bad one) are the oldest.

    Parsed rather than compared as text: RFC 3339 text drops a zero fraction
    (``...:05Z`` and ``...:05.000001Z``), which sorts the wrong way as a string.
    """
    if not doc:
        return UNKNOWN
    raw = doc.get("updated_at")
    if not isinstance(raw, str) or not raw:
        return UNKNOWN
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return UNKNOWN


def replaces(candidate: dict[str, Any], held: dict[str, Any] | None) -> bool:
    """Whether ``candidate`` may replace ``held`` (same id): not older. A tie is the same
    change seen twice, so either may stand; the newcomer does."""
    return held is None or stamp(candidate) >= stamp(held)


def newest(*docs: dict[str, Any] | None) -> dict[str, Any] | None:
    """The newest of some docs of one machine (the first of equals), or None if none."""
    best: dict[str, Any] | None = None
    for doc in docs:
        if doc is not None and (best is None or stamp(doc) > stamp(best)):
            best = doc
    return best
