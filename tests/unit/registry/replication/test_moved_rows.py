"""A machine's row after a move: two owners have written it, the newest generation wins.

A move hands a machine to another worker (``worker/core/moves.py``), whose counter is its
own: the row it writes carries the machine's generation, one more than its former
worker's, and every replica keeps that one, in whatever order the two arrive and
whatever their versions. A row of the same generation from another owner is still
refused: an owned key changes hands only with a move.
"""

from __future__ import annotations

from bodega.registry.replication.core.rows import merge

from .row_kit import machine_doc, metrics, rejected, replica, row


def test_the_newer_generation_wins_whatever_the_versions() -> None:
    old = row("machines", "m1", machine_doc("m1", "a", "stopped"), "a", 90)
    new = row("machines", "m1", machine_doc("m1", "b", "started", generation=1), "b", 3)
    assert merge(old, new) == merge(new, old) == new


def test_a_former_owner_tombstone_never_hides_the_moved_machine() -> None:
    gone = row("machines", "m1", None, "a", 95)
    new = row("machines", "m1", machine_doc("m1", "b", "started", generation=1), "b", 3)
    assert merge(gone, new) == new


def test_replicas_take_the_moved_row_in_either_order() -> None:
    old = row("machines", "m1", machine_doc("m1", "a", "stopped"), "a", 90)
    new = row("machines", "m1", machine_doc("m1", "b", "started", generation=1), "b", 3)
    first, second = replica("r1"), replica("r2")
    first.apply([old])
    first.apply([new])
    second.apply([new])
    second.apply([old])
    for held in (first, second):
        found = held.view.get("machines", "m1")
        assert found is not None
        assert (found.owner, found.doc) == ("b", new.doc)


def test_another_owner_of_the_same_generation_is_refused() -> None:
    m = metrics()
    held = replica("r1", metrics=m)
    held.apply([row("machines", "m1", machine_doc("m1", "a"), "a", 5)])
    held.apply([row("machines", "m1", machine_doc("m1", "b"), "b", 9)])
    found = held.view.get("machines", "m1")
    assert found is not None
    assert found.owner == "a"
    assert rejected(m, "machines", "owner") == 1
