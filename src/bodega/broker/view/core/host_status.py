"""A machine's (or volume's, or member's) ``host_status``, as the broker answers it.

A worker writes ``host_status: ok`` into its own rows, and a worker that is
frozen, cut off or gone writes nothing more, so its rows in the view keep
saying ``ok``, ``started`` and ``passing`` long after anyone could reach it.
The broker knows better: its membership says whether the worker is heard.
One rule, for every reader (the machine and volume answers, ``bodega status``
through them, the dashboard, ``cluster members``):

    membership says   host_status
    alive             ok
    suspect           unreachable   (SWIM cannot reach it now; it may refute)
    dead, left        unreachable
    nothing           unknown       (never heard of, or forgotten: a member dead
                                     or left longer than the retention, 48 h)

A machine's ``state`` stays what its worker last published: the worker is the
only one who knows, and the broker does not guess a state for it. Its checks
do not: a check of a machine whose host is not ``ok`` reads ``unknown`` (what
it last said is kept in its output), so nothing waiting for checks to pass
takes an old ``passing`` for a live one.

A worker the view has a row of but membership has forgotten is still a member
of the cluster as ``cluster members`` lists it: its machines are still listed
too, so its host stays listed, ``unknown``, as long as its rows are there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from bodega.model.machine import CheckStatus, Machine
from bodega.model.rows import WorkerRow
from bodega.model.volume import Volume
from bodega.wire.public.platform import Member

OK = "ok"
UNREACHABLE = "unreachable"
UNKNOWN = "unknown"
UNREACHABLE_STATUSES = frozenset({"suspect", "dead", "left"})
GONE_HOSTS = frozenset({"dead", "left"})  # not merely suspected: not worth asking
UNHEARD = "unknown"  # a member's status when membership has no record of it
Hosted = TypeVar("Hosted", Machine, Volume)


def host_status(member_status: str | None) -> str:
    """``ok``, ``unreachable`` or ``unknown`` for a worker membership calls ``member_status``
    (None: membership has no record of it)."""
    if member_status is None:
        return UNKNOWN
    return UNREACHABLE if member_status in UNREACHABLE_STATUSES else OK


def check_status(reported: str, host: str) -> str:
    """What a check's status reads as, on a host of status ``host``."""
    return reported if host == OK else UNKNOWN


def stale_check(check: CheckStatus, host: str) -> CheckStatus:
    """A check as answered from a host of status ``host``: unknown, its last word kept."""
    if host == OK:
        return check
    said = f"host {host}; last reported {check.status or 'nothing'}"
    return check.model_copy(update={
        "status": check_status(check.status, host),
        "output": f"{said}: {check.output}" if check.output else said})


def hosted(found: Hosted, host: str) -> Hosted:
    """A machine or volume answered from a host of status ``host``."""
    if found.host_status != host:
        found = found.model_copy(update={"host_status": host})
    if isinstance(found, Machine) and host != OK and found.checks:
        return found.model_copy(update={"checks": [stale_check(c, host) for c in found.checks]})
    return found


def with_host_status(found: Hosted, status_of: Callable[[str], str | None]) -> Hosted:
    """A machine or volume (naming its ``worker``) as answered from the view: its host's
    status from membership."""
    return hosted(found, host_status(status_of(found.worker) if found.worker else None))


def unreachable(known: Machine) -> Machine:
    """A machine whose host did not answer: the last config the view had, marked so."""
    return hosted(known, UNREACHABLE).model_copy(
        update={"config": None, "incomplete_config": known.config}).public()


def listed_members(members: Iterable[Member], worker_rows: Iterable[WorkerRow]) -> list[Member]:
    """Every member with its ``host_status``, and every worker with a row in the view that
    membership has no record of (gone longer than it remembers, or not heard of yet):
    ``unknown``, since its row last changed. By role, then name."""
    listed = {m.name: m.model_copy(update={"host_status": host_status(m.status)})
              for m in members}
    for row in worker_rows:
        if not row.name or row.name in listed:
            continue
        listed[row.name] = Member(name=row.name, role="worker", region=row.region,
                                  status=UNHEARD, host_status=UNKNOWN,
                                  since=row.updated_at or None)
    return sorted(listed.values(), key=lambda m: (m.role, m.name))
