"""Where a problem in a bodega.toml is: its key's line, and what a refusal says; pure.

A model's refusal (``ValidationError``) becomes (key, line's key, message),
the line of a missing key being its table's, where it should have been written.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

MISSING = "required"


def problems(exc: ValidationError) -> list[tuple[tuple[str, ...], tuple[str, ...], str]]:
    """Each of ``exc``'s errors as (the key, where its line is, what)."""
    out = []
    for error in exc.errors():
        loc = tuple(str(p) for p in error["loc"])
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "missing":
            out.append((loc, loc[:-1], MISSING))
        else:
            out.append((loc, loc, message))
    return out


def line_of(text: str, loc: tuple[str, ...] | list[str]) -> int:
    """The line a key is on: under its table's header (the n-th of an array of tables for
    an index), or the nearest part of the path found."""
    lines = text.splitlines()
    best, start = 1, 0
    names: list[str] = []
    for part in loc:
        if part.isdigit():  # the n-th [[table]] of the names so far: skip to it
            header = _header(names)
            seen = -1
            for number in range(start, len(lines)):
                if header.match(lines[number]):
                    seen += 1
                    if seen == int(part):
                        best, start = number + 1, number + 1
                        break
            continue
        names.append(part)
        header = _header(names)
        key = re.compile(r"^\s*['\"]?" + re.escape(part) + r"['\"]?\s*=")
        for number in range(start, len(lines)):
            if header.match(lines[number]) or key.match(lines[number]):
                best, start = number + 1, number + 1
                break
    return best


def _header(names: list[str]) -> re.Pattern[str]:
    return re.compile(r"^\s*\[{1,2}\s*" + re.escape(".".join(names)) + r"\s*\]{1,2}")
