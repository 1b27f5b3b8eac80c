"""A machine's (or volume's) ``host_status``, as the broker answers it: from membership.

A worker writes ``host_status: ok`` into its own rows, and a worker that is
frozen or gone writes nothing more, so its rows in the view keep saying ``ok``
(and ``started``) long after anyone could reach it. The broker knows better:
membership says whether the worker is ``alive``. A worker ``suspect``, ``dead``
or ``left`` is ``unreachable``; one membership has not heard of keeps what its
rows say.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

UNREACHABLE = frozenset({"suspect", "dead", "left"})
GONE_HOSTS = frozenset({"dead", "left"})  # not merely suspected: not worth asking


def host_status(member_status: str | None, reported: str = "ok") -> str:
    """``ok`` or ``unreachable`` for a worker membership calls ``member_status``."""
    if member_status is None:
        return reported
    return "unreachable" if member_status in UNREACHABLE else "ok"


def with_host_status(doc: dict[str, Any],
                     status_of: Callable[[str], str | None]) -> dict[str, Any]:
    """``doc`` (a machine or volume row naming its ``worker``) with its host's status."""
    worker = str(doc.get("worker") or "")
    reported = str(doc.get("host_status") or "ok")
    return {**doc, "host_status": host_status(status_of(worker) if worker else None, reported)}
