"""Precedence of claims about a member (SWIM §4.2 plus generations) and the events they cause."""

from __future__ import annotations

import pytest

from bodega.registry.membership.core.members import EventKind, Status, change_kind, supersedes
from tests.unit.registry.membership.swim_kit import rec

A, S, D, L = Status.ALIVE, Status.SUSPECT, Status.DEAD, Status.LEFT


@pytest.mark.parametrize(("old", "new", "wins"), [
    # alive(i) over alive(j) / suspect(j) iff i > j
    ((A, 1), (A, 2), True), ((A, 2), (A, 2), False), ((A, 3), (A, 2), False),
    ((S, 1), (A, 2), True), ((S, 2), (A, 2), False), ((S, 3), (A, 2), False),
    # suspect(i) over alive(j) iff i >= j, over suspect(j) iff i > j
    ((A, 2), (S, 2), True), ((A, 1), (S, 2), True), ((A, 3), (S, 2), False),
    ((S, 1), (S, 2), True), ((S, 2), (S, 2), False), ((S, 3), (S, 2), False),
    # dead overrides any live claim, whatever the incarnation
    ((A, 5), (D, 0), True), ((S, 5), (D, 0), True), ((A, 0), (D, 9), True),
    # dead and left are final within a generation; left refines dead, not the reverse
    ((D, 1), (A, 9), False), ((D, 1), (S, 9), False), ((D, 1), (D, 9), False),
    ((L, 1), (A, 9), False), ((L, 1), (D, 9), False), ((D, 1), (L, 1), True),
    ((A, 1), (L, 1), True),
])
def test_precedence_within_a_generation(old: tuple[Status, int], new: tuple[Status, int],
                                        wins: bool) -> None:
    before = rec("b", status=old[0], inc=old[1])
    after = rec("b", status=new[0], inc=new[1])
    assert supersedes(after, before) is wins


@pytest.mark.parametrize("old_status", list(Status))
@pytest.mark.parametrize("new_status", list(Status))
def test_a_higher_generation_supersedes_everything_and_a_lower_nothing(
        old_status: Status, new_status: Status) -> None:
    old = rec("b", gen=2, inc=7, status=old_status)
    assert supersedes(rec("b", gen=3, inc=0, status=new_status), old)
    assert not supersedes(rec("b", gen=1, inc=99, status=new_status), old)


@pytest.mark.parametrize(("old", "new", "kind"), [
    (None, rec("b"), EventKind.JOINED),
    (None, rec("b", status=D), EventKind.DEAD),
    (rec("b"), rec("b", status=S), EventKind.SUSPECT),
    (rec("b", status=S), rec("b", inc=1), EventKind.ALIVE),
    (rec("b", status=S), rec("b", inc=1, status=S), None),
    (rec("b"), rec("b", status=D), EventKind.DEAD),
    (rec("b"), rec("b", status=L), EventKind.LEFT),
    (rec("b", status=D), rec("b", gen=2), EventKind.JOINED),
    (rec("b"), rec("b", gen=2), EventKind.JOINED),
    (rec("b"), rec("b", inc=1), None),
    (rec("b"), rec("b", inc=1, meta={"api": "http://w:1"}), EventKind.META_UPDATED),
])
def test_change_kinds(old: object, new: object, kind: EventKind | None) -> None:
    assert change_kind(old, new) is kind  # type: ignore[arg-type]


@pytest.mark.parametrize("meta", [{"k": "v" * 600}, {"k": 1}])
def test_records_refuse_metadata_that_would_not_fit_or_is_not_strings(meta: object) -> None:
    with pytest.raises(ValueError, match="metadata"):
        rec("b", meta=meta)  # type: ignore[arg-type]


def test_records_refuse_empty_or_long_names() -> None:
    with pytest.raises(ValueError, match="name"):
        rec("")
    with pytest.raises(ValueError, match="name"):
        rec("n" * 65)


@pytest.mark.parametrize("name", ["wörker", "a\nb", "a\x00"])
def test_names_are_printable_ascii_so_their_encoding_stays_bounded(name: str) -> None:
    with pytest.raises(ValueError, match="name"):
        rec(name)
