"""Counts as people read them: "1 machine", "2 machines", "update 2 of 4", "update 2-3 of 4"."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun, singular for exactly one (``plural`` when adding "s" is wrong)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def span(first: int, last: int, total: int) -> str:
    """Items ``first`` to ``last`` (1-based) of ``total``: "2 of 4" alone, "2-3 of 4" for more."""
    return f"{first} of {total}" if first == last else f"{first}-{last} of {total}"
