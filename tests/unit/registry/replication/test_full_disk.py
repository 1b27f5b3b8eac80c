"""A replica whose disk fills up stores nothing, believes nothing, and catches up later."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bodega.registry.replication.replica import Replica
from bodega.registry.replication.view import View
from tests.unit.registry.replication.row_kit import Wall, app_doc, replica


def full(view: View) -> None:
    """No page more than it has now: SQLite answers SQLITE_FULL, as on a full disk."""
    pages = view.db.execute("PRAGMA page_count").fetchone()[0]
    view.db.execute(f"PRAGMA max_page_count = {pages}")


def room(view: View) -> None:
    view.db.execute("PRAGMA max_page_count = 1073741823")


def test_a_sync_refused_by_a_full_disk_is_asked_again_once_there_is_room(
        tmp_path: Path) -> None:
    a = replica("a")
    for i in range(50):
        a.write("apps", f"app{i}", app_doc(f"app{i}", "x" * 200), shared=True)
    b = Replica("b", View(tmp_path / "b.db"), wall=Wall())
    full(b.view)
    with pytest.raises(sqlite3.OperationalError, match="full"):
        b.apply_reply(a.serve(b.sync_request()))
    assert b.view.all_rows() == []
    assert "a" not in b.known() or b.known()["a"].top == 0  # it vouches for nothing it lacks
    assert not b.view.db.in_transaction  # the next transaction can begin
    room(b.view)
    b.apply_reply(a.serve(b.sync_request()))
    assert b.view.all_rows() == a.view.all_rows()


def test_a_local_write_refused_by_a_full_disk_takes_no_version(tmp_path: Path) -> None:
    b = Replica("b", View(tmp_path / "b.db"), wall=Wall())
    b.write("apps", "small", app_doc("small"), shared=True)
    before = b.counter
    full(b.view)
    def fill() -> None:
        for i in range(50):
            b.write("apps", f"app{i}", app_doc(f"app{i}", "x" * 200), shared=True)

    with pytest.raises(sqlite3.OperationalError, match="full"):
        fill()
    held = {r.key for r in b.view.all_rows()}
    assert b.counter == before + len(held) - 1  # one version per stored write, no more
    room(b.view)
    b.write("apps", "after", app_doc("after"), shared=True)
    assert b.counter == before + len(held)


def test_writes_together_commit_once_and_a_refused_batch_keeps_none(tmp_path: Path) -> None:
    b = Replica("b", View(tmp_path / "b.db"), wall=Wall())
    b.write("apps", "small", app_doc("small"), shared=True)
    commits: list[str] = []
    b.view.db.set_trace_callback(lambda sql: commits.append(sql) if sql == "COMMIT" else None)
    with b.together():
        for i in range(5):
            b.write("apps", f"app{i}", app_doc(f"app{i}"), shared=True)
    assert commits == ["COMMIT"]
    assert len(b.view.all_rows()) == 6
    before = b.counter
    full(b.view)

    def batch() -> None:
        with b.together():
            for i in range(50):  # some fit in the pages left, then the disk is full
                b.write("apps", f"big{i}", app_doc(f"big{i}", "x" * 200), shared=True)

    with pytest.raises(sqlite3.OperationalError, match="full"):
        batch()
    assert len(b.view.all_rows()) == 6  # none of the batch, though some fit
    assert b.counter == before  # and every version it took is given back
    assert not b.view.db.in_transaction
    room(b.view)
    b.write("apps", "after", app_doc("after"), shared=True)
    assert b.counter == before + 1
