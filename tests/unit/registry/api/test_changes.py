"""A re-run's result against the last one: numbered rows, updates by first column,
inserts and deletes, numbers never reused; applying the changes gives the new result."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bodega.registry.api.core.changes import ResultRow, RowChange, Values, diff, numbered


def test_a_row_known_by_its_first_column_changes_in_place() -> None:
    old = numbered([("m1", "started"), ("m2", "started"), ("m3", "stopped")])
    found = diff(old, [("m3", "stopped"), ("m1", "stopped"), ("m4", "started")], 4)
    assert found.changes == (RowChange("delete", 2, ("m2", "started")),
                             RowChange("update", 1, ("m1", "stopped")),
                             RowChange("insert", 4, ("m4", "started")))
    assert found.rows == (ResultRow(3, ("m3", "stopped")), ResultRow(1, ("m1", "stopped")),
                          ResultRow(4, ("m4", "started")))
    assert found.next_number == 5


def test_nothing_changed_is_no_change_whatever_the_order() -> None:
    old = numbered([("a", 1), ("b", 2)])
    found = diff(old, [("b", 2), ("a", 1)], 3)
    assert found.changes == ()
    assert found.rows == (ResultRow(2, ("b", 2)), ResultRow(1, ("a", 1)))
    assert found.next_number == 3


def test_rows_sharing_a_first_column_match_by_value_then_pair_in_order() -> None:
    old = numbered([("started",), ("started",), ("stopped",)])
    # One started machine stopped: one "started" row leaves, a second "stopped" comes.
    found = diff(old, [("started",), ("stopped",), ("stopped",)], 4)
    assert found.changes == (RowChange("delete", 2, ("started",)),
                             RowChange("insert", 4, ("stopped",)))
    old = numbered([("web", "m1"), ("web", "m2")])
    found = diff(old, [("web", "m1"), ("web", "m3")], 3)
    assert found.changes == (RowChange("update", 2, ("web", "m3")),)


def test_a_new_result_is_numbered_in_its_order_and_numbers_are_never_reused() -> None:
    found = diff(numbered([("a",)]), [("c",), ("b",)], 7)
    assert [c.kind for c in found.changes] == ["delete", "insert", "insert"]
    assert [r.number for r in found.rows] == [7, 8]
    assert found.next_number == 9


def apply(old: tuple[ResultRow, ...], changes: tuple[RowChange, ...]) -> dict[int, Values]:
    held = {row.number: row.values for row in old}
    for change in changes:
        if change.kind == "delete":
            assert held.pop(change.number) == change.values
        elif change.kind == "update":
            assert change.number in held
            held[change.number] = change.values
        else:
            assert change.number not in held
            held[change.number] = change.values
    return held


rows = st.lists(st.tuples(st.sampled_from(["a", "b", "c", None, 1]), st.integers(0, 2)),
                max_size=12)


@given(rows, rows)
def test_the_changes_turn_the_old_result_into_the_new(before: list[Values],
                                                     after: list[Values]) -> None:
    old = numbered(before)
    found = diff(old, after, len(old) + 1)
    assert apply(old, found.changes) == {row.number: row.values for row in found.rows}
    assert [row.values for row in found.rows] == after
    assert len({row.number for row in found.rows}) == len(after)
    assert all(row.number > len(old) for row in found.rows
               if row.number not in {r.number for r in old})
    again = diff(found.rows, after, found.next_number)
    assert again.changes == ()
    assert again.rows == found.rows
