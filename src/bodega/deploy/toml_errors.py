"""A bodega.toml's first problem as one line: ``file:line: field: what is wrong``.

An unknown key is reported before anything else, with the known key it is closest
to: a typo'd ``[http_servce]`` or ``internal_prot`` also leaves a required key
missing, and "internal_port: Field required" would send the reader to the wrong
line. Pure: no I/O.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Mapping, Set
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError


def describe(exc: ValidationError, text: str, name: str, root: type[BaseModel],
             ignored: Mapping[str, Set[str]]) -> str:
    """The line for the most useful of ``exc``'s errors (``root`` is the file's model)."""
    errors = exc.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = [str(p) for p in first["loc"]]
    field = ".".join(loc) or "(top level)"
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "unknown key"
        close = difflib.get_close_matches(loc[-1], known_keys(root, loc[:-1], ignored), n=1)
        if close:
            message += f" (did you mean `{close[0]}`?)"
    where = loc[:-1] if first["type"] == "missing" else loc  # a missing key: its table
    return f"{name}:{line_of(text, where)}: {field}: {message}"


def known_keys(root: type[BaseModel], loc: list[str],
               ignored: Mapping[str, Set[str]]) -> list[str]:
    """The keys the table at ``loc`` takes (list indexes and map keys in ``loc`` included),
    the ones flyctl knows and bodega ignores too; none if ``loc`` leads nowhere known."""
    node: Any = root
    parts = list(loc)
    while True:
        node = _unwrapped(node)
        if isinstance(node, type) and issubclass(node, BaseModel):
            if not parts:
                return sorted({*node.model_fields, *ignored.get(".".join(loc), ())})
            field = node.model_fields.get(parts.pop(0))
            if field is None:
                return []
            node = field.annotation
        elif get_origin(node) in (list, dict) and parts:
            parts.pop(0)  # a list index or a map key
            node = get_args(node)[-1]
        else:
            return []


def _unwrapped(node: Any) -> Any:
    """``X | None`` as ``X``; a union of a table with plain values as the table."""
    if get_origin(node) in (Union, types.UnionType):
        for arg in get_args(node):
            if get_origin(arg) in (list, dict) or (isinstance(arg, type)
                                                   and issubclass(arg, BaseModel)):
                return arg
    return node


def line_of(text: str, loc: list[str]) -> int:
    """The line a field is on: its key under its section header, or the nearest found part."""
    lines = text.splitlines()
    names = [p for p in loc if not p.isdigit()]
    best, start = 1, 0
    for depth, part in enumerate(names):
        header = re.compile(r"^\s*\[{1,2}\s*" + re.escape(".".join(names[:depth + 1])) +
                            r"\s*\]{1,2}")
        key = re.compile(r"^\s*['\"]?" + re.escape(part) + r"['\"]?\s*=")
        for number in range(start, len(lines)):
            if header.match(lines[number]) or key.match(lines[number]):
                best, start = number + 1, number + 1
                break
    return best
