"""A one-task job started at its submit, in a warm slot of its home: when, and which slot.

The queued path costs a one-task job far more than the task: probes to two workers,
each a commit there and one at the home, room reserved and given back, a take and its
commit, a drop. None of it is needed when the home itself has a warm slot of the task's
shape that is up and idle: the home commits the job, its task claimed by itself and the
run recorded in that slot, in the submit's one transaction, answers, and writes the line.
What a 200 means is unchanged (the job is committed on its home, synced); a home killed
after its commit writes the line again on restart, as for any run recorded in a slot.

When every slot of the job's shape is busy, a job of a shape whose tasks have run short
here lately (``BEHIND_AFTER`` ends in a row under ``SHORT``) is written behind the task of
one of them instead, as a queue worker prefetches the next message: it starts the moment
that task ends, with no end read by the worker in between and no second transaction. Only
behind a slot that runs one task, begun under ``SHORT`` ago; the price is that a task of
that shape which runs long holds back the one job behind it.

Pure: the submit's home asks ``at_submit`` of the job, and ``free_seat`` of its slots as
they are at that instant (no ``await`` between the choice and the commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bodega.jobs.slots import SHORT
from bodega.jobs.spec import BODEGA_POOL, JobSpec

BEHIND_AFTER = 4  # ends of a shape in a row under SHORT before a job is written behind one


@dataclass(frozen=True)
class Seat:
    """A slot as the home sees it when a submit looks for a free one."""

    key: str  # the shape of the tasks it runs (``slots.slot_key``)
    up: bool  # its machine is up and its FIFOs open: a line written now runs now
    held: int  # runs it holds (running, or written ahead)
    retiring: bool  # being stopped (idle too long, or giving way to a machine)
    idle_since: float
    began: float = 0.0  # when the task it runs began (held 1)


def at_submit(spec: JobSpec, now: float) -> bool:
    """Whether a job may start at its submit: one task of bodega's pool that waits for
    nothing, is no periodic template and is not past its deadline. Any other job is
    committed queued and its probes find it room."""
    return (spec.pool == BODEGA_POOL and spec.count == 1 and not spec.after
            and spec.periodic is None
            and (spec.deadline_at is None or spec.deadline_at > now))


def free_seat(seats: Sequence[Seat], key: str, now: float = 0.0,
              short: bool = False) -> int | None:
    """The slot a job of shape ``key`` starts in at its submit: one of that shape that is up,
    holds nothing and is not going; of those, the one idle for the shortest time (the others
    are the first to go when idle past their linger, so a trickle of jobs keeps few slots
    warm). With none idle and ``short`` (the shape's tasks ran short here lately), one of
    that shape that runs a single task begun under ``SHORT`` before ``now``, the one begun
    first: the job is written behind that task. None: the job is committed queued."""
    mine = [i for i, s in enumerate(seats) if s.key == key and s.up and not s.retiring]
    free = [i for i in mine if seats[i].held == 0]
    if free:
        return max(free, key=lambda i: seats[i].idle_since)
    if not short:
        return None
    behind = [i for i in mine if seats[i].held == 1 and now - seats[i].began < SHORT]
    return min(behind, key=lambda i: seats[i].began) if behind else None
