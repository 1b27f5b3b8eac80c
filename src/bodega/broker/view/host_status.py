"""A machine's (or volume's) ``host_status``, as the broker answers it: from membership.

A worker writes ``host_status: ok`` into its own rows, and a worker that is
frozen or gone writes nothing more, so its rows in the view keep saying ``ok``
(and ``started``) long after anyone could reach it. The broker knows better:
membership says whether the worker is ``alive``. A worker ``suspect``, ``dead``
or ``left`` is ``unreachable``; one membership has not heard of keeps what its
rows say.
A machine whose host cannot be reached is answered from the last row the view
had, marked so. Every public answer leaves out the fields a worker adds for
the cluster's own use (``Machine.public``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from bodega.model.machine import Machine
from bodega.model.volume import Volume

UNREACHABLE = frozenset({"suspect", "dead", "left"})
GONE_HOSTS = frozenset({"dead", "left"})  # not merely suspected: not worth asking
Hosted = TypeVar("Hosted", Machine, Volume)


def host_status(member_status: str | None, reported: str = "ok") -> str:
    """``ok`` or ``unreachable`` for a worker membership calls ``member_status``."""
    if member_status is None:
        return reported
    return "unreachable" if member_status in UNREACHABLE else "ok"


def with_host_status(found: Hosted, status_of: Callable[[str], str | None]) -> Hosted:
    """A machine or volume (naming its ``worker``) with its host's status."""
    status = host_status(status_of(found.worker) if found.worker else None,
                         found.host_status or "ok")
    return found if status == found.host_status else \
        found.model_copy(update={"host_status": status})


def unreachable(known: Machine) -> Machine:
    """A machine whose host cannot be reached: the last config the view had, marked so."""
    return known.model_copy(update={"host_status": "unreachable", "config": None,
                                    "incomplete_config": known.config}).public()
