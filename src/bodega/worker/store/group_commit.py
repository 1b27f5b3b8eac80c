"""Group commit: concurrent creates share one transaction and one fsync.

A create's first durable record is the worker's costliest write (a full
fsync before the answer). Creates that arrive within one event-loop turn
join one group (and those that arrive while a group's fsync blocks the loop
are read together after it, and form the next)::

    join ──> queue ──(one loop turn)──> BEGIN
                                        ├─ SAVEPOINT, member 1, RELEASE (or ROLLBACK TO)
                                        ├─ SAVEPOINT, member 2, RELEASE
                                        └─ COMMIT, one fsync ──> every member answered

Each member's checks (capacity, names, idempotency) run in its own savepoint
after the members before it, so the group decides exactly as the same creates
one after another would, and one member's refusal rolls back only its own
part. A failed COMMIT (a full disk) rolls back the whole group: every member
fails and nothing of the group is left. No member is answered before the
commit, fsync included, returns.

The fsync runs on the loop, as every other commit of the worker's does: on
the disks measured an fdatasync costs 15-200 us, and handing it to a thread
(a hop per group, the GIL handed back and forth) measured no better.

``GroupQueue`` and ``answers`` are the pure decisions; ``GroupCommit`` is the
thin shell that runs the transaction.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from bodega.worker.store.database import Store

T = TypeVar("T")
Body = Callable[[sqlite3.Connection], Any]


@dataclass(frozen=True)
class Outcome:
    """What one member's part of the transaction came to: a value, or its own error."""

    value: Any = None
    error: BaseException | None = None


@dataclass
class GroupQueue(Generic[T]):
    """Who waits for the next group (pure)."""

    waiting: list[T] = field(default_factory=list)

    def join(self, member: T) -> bool:
        """Queue ``member``; True if it is the first, so the group's commit must be set."""
        self.waiting.append(member)
        return len(self.waiting) == 1

    def take(self) -> list[T]:
        """The group: everyone waiting."""
        group, self.waiting = self.waiting, []
        return group


def answers(parts: list[Outcome], commit_error: BaseException | None) -> list[Outcome]:
    """Each member's answer: its own error, else the group's, else its value."""
    if commit_error is None:
        return parts
    return [part if part.error is not None else Outcome(error=commit_error) for part in parts]


@dataclass
class _Member:
    body: Body
    answer: asyncio.Future[Any]


class GroupCommit:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.queue: GroupQueue[_Member] = GroupQueue()
        self.groups = 0  # committed groups (tests and metrics count them)

    def submit(self, body: Body) -> asyncio.Future[Any]:
        """Run ``body(conn)`` in the next group; the future holds its result once durable."""
        loop = asyncio.get_running_loop()
        member = _Member(body, loop.create_future())
        if self.queue.join(member):
            # On the next loop turn: the creates that arrive with this one join its group.
            loop.call_soon(self._commit_group)
        return member.answer

    def _commit_group(self) -> None:
        group = self.queue.take()
        parts, error = self._commit(group)
        for member, answer in zip(group, answers(parts, error), strict=True):
            if member.answer.done():
                continue
            if answer.error is not None:
                member.answer.set_exception(answer.error)
            else:
                member.answer.set_result(answer.value)

    def _commit(self, group: list[_Member]) -> tuple[list[Outcome], BaseException | None]:
        """One durable transaction for the group: each member's part, or its own error."""
        parts: list[Outcome] = []
        try:
            with self.store.tx() as conn:
                if len(group) == 1:  # alone: its failure is the transaction's, no savepoint
                    parts.append(Outcome(value=group[0].body(conn)))
                else:
                    for member in group:
                        parts.append(self._part(conn, member.body))
                        if not conn.in_transaction:  # SQLite rolled it all back (disk full)
                            raise parts[-1].error or RuntimeError("the transaction was lost")
        except Exception as exc:  # the COMMIT failed: the whole group is undone
            parts += [Outcome()] * (len(group) - len(parts))
            return parts, exc
        self.groups += 1
        return parts, None

    def _part(self, conn: sqlite3.Connection, body: Body) -> Outcome:
        try:
            with self.store.savepoint(conn):
                return Outcome(value=body(conn))
        except Exception as exc:
            return Outcome(error=exc)
