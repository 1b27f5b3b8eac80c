"""A machine's (or volume's) ``host_status``, as the broker answers it: from membership.

A worker writes ``host_status: ok`` into its own rows, and a worker that is
frozen or gone writes nothing more, so its rows in the view keep saying ``ok``
(and ``started``) long after anyone could reach it. The broker knows better:
membership says whether the worker is ``alive``. A worker ``suspect``, ``dead``
or ``left`` is ``unreachable``; one membership has not heard of keeps what its
rows say.
A machine whose host cannot be reached is answered from the last row the view
had, marked so. Every public answer leaves out the fields a worker adds for
the cluster's own use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

UNREACHABLE = frozenset({"suspect", "dead", "left"})
GONE_HOSTS = frozenset({"dead", "left"})  # not merely suspected: not worth asking
# Fields a worker adds for the cluster's own use; public responses leave them out.
INTERNAL_FIELDS = ("app", "worker", "service_host")


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


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """A machine as clients are shown it: without the fields kept for the cluster."""
    return {k: v for k, v in doc.items() if k not in INTERNAL_FIELDS}


def unreachable(known: dict[str, Any]) -> dict[str, Any]:
    """A machine whose host cannot be reached: the last config the view had, marked so."""
    doc = {**known, "host_status": "unreachable"}
    doc["incomplete_config"] = doc.pop("config", {})
    return public(doc)
